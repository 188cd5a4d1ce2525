/**
 * Prometheus metrics (prom-client), names prefixed `portico_`. Label sets follow
 * agentgateway's where they overlap, so dashboards carry over. A missing label value is
 * written as `unknown`.
 */

import { Counter, Gauge, Registry, collectDefaultMetrics } from './prom-client.ts'
import { LocalCounter, LocalExactCounter, LocalGauge, LocalHistogram, type HistogramSeries, type ValueSeries } from './local-metrics.ts'
import type { InferencePickFacts, LlmCall, LlmUsage, RequestContext, SpanOutcome, StreamConnectionRecord, UdpFlowCounts, UdpFlowRecord } from '@portico/engine'
import { version } from './version.ts'
import { performance } from '@portico/engine/clock'

/** The `protocol` label of a request: gRPC (over HTTP/2), else the HTTP version the client spoke. */
function protocolOf (ctx: RequestContext): 'grpc' | 'http2' | 'http1' {
  return ctx.grpc !== null ? 'grpc' : ctx.req.httpVersionMajor === 2 ? 'http2' : 'http1'
}

/**
 * A request's label values and the series they select: `portico_requests_total` and
 * `portico_request_duration_seconds` (all eight labels), and -- made when first observed -- the
 * body sizes (gateway, route) and the backend call's duration (backend).
 */
interface RequestSeries {
  readonly gateway: string
  readonly listener: string
  readonly route: string | null
  readonly backend: string | undefined
  readonly method: string
  readonly status: number
  readonly reason: string
  readonly protocol: string
  readonly requests: ValueSeries
  readonly duration: HistogramSeries
  requestBodySize: HistogramSeries | null
  responseBodySize: HistogramSeries | null
  upstreamDuration: HistogramSeries | null
}

/** How many label sets ProxyMetrics.requestSeries keeps to compare before building a key. */
const RECENT_SERIES = 8

/** LLM token counts per request: 1 ... 4M tokens, powers of 4 (agentgateway's run to 67M). */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]

/**
 * Seconds per output token after the first (OpenTelemetry's gen_ai.server.time_per_output_token
 * buckets, with agentgateway's 0.001 added for fast models).
 */
const TIME_PER_TOKEN_BUCKETS = [0.001, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5]

/** Output tokens per second of a stream after its first chunk: 1 ... 5,000. */
const TOKENS_PER_SECOND_BUCKETS = [1, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000]

/** Connection lifetimes: 1 ms ... 1 h (a TCP connection may last as long as its idle timeout). */
const CONNECTION_DURATION_BUCKETS = [0.001, 0.01, 0.1, 1, 10, 60, 300, 900, 3600]

/** Body sizes: 64 B ... 64 MiB, powers of 4. */
const SIZE_BUCKETS = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]

/** Connection set-up: 0.1 ms ... 10 s. */
const CONNECT_BUCKETS = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** Auth policies (their keys in EFFECTIVE_POLICY_KEYS) and rate limits, as the decision metrics name them. */
const AUTH_POLICIES = new Set(['jwt', 'oidc', 'basicAuth', 'apiKey', 'extAuthz', 'authorization'])
const RATE_LIMIT_POLICIES = new Set(['localRateLimit', 'remoteRateLimit'])

/** The `reason` of a refused auth decision, from the status the policy answered with (a bounded set). */
function denyReason (status: number): string {
  if (status === 401) return 'unauthenticated'
  if (status === 403) return 'forbidden'
  if (status >= 300 && status < 400) return 'login_redirect'
  if (status >= 500) return 'error'
  return 'invalid_request'
}

/** Request latency buckets: 1 ms ... 80 s. */
const DURATION_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80]

export class ProxyMetrics {
  readonly registry = new Registry()
  private readonly requests: LocalCounter
  private readonly requestDuration: LocalHistogram
  private readonly upstreamDuration: LocalHistogram
  private readonly connections: LocalCounter
  private readonly openConnections: LocalGauge
  private readonly reloads: Counter<'result'> | null
  private readonly workerRestarts: Counter | null
  private readonly meshCaCalls: Counter<'result'> | null
  private readonly meshExpiry: Gauge | null
  private readonly mcpRequests: LocalCounter
  private readonly llmTokens: LocalHistogram
  private readonly streamConnections: LocalCounter
  private readonly streamBytes: LocalCounter
  private readonly streamDuration: LocalHistogram
  private readonly udpDatagrams: LocalCounter
  private readonly udpBytes: LocalCounter
  private readonly udpDropped: LocalCounter
  private readonly udpFlowsOpened: LocalCounter
  private readonly udpFlowsClosed: LocalCounter
  private readonly udpFlowsActive: LocalGauge
  private readonly requestBodySize: LocalHistogram
  private readonly responseBodySize: LocalHistogram
  private readonly mcpDuration: LocalHistogram
  private readonly llmDuration: LocalHistogram
  private readonly llmFirstToken: LocalHistogram
  private readonly llmTimePerToken: LocalHistogram
  private readonly llmTokensPerSecond: LocalHistogram
  private readonly llmCost: LocalExactCounter
  private readonly authDecisions: LocalCounter
  private readonly rateLimitDecisions: LocalCounter
  private readonly llmFailovers: LocalCounter
  private readonly guardrailDecisions: LocalCounter
  private readonly connectDuration: LocalHistogram
  private readonly hboneConnections: LocalCounter
  private readonly hboneTunnels: LocalCounter
  private readonly tlsDuration: LocalHistogram
  private readonly tracingSpans: LocalCounter
  private readonly pickerCalls: LocalCounter
  private readonly pickerDuration: LocalHistogram
  private readonly inferencePicks: LocalCounter
  private readonly inferenceFallbacks: LocalCounter
  /** Every request label set seen, by key (requestSeries). */
  private readonly requestSeriesByKey = new Map<string, RequestSeries>()
  /** The last RECENT_SERIES label sets looked up, filled round robin (requestSeries). */
  private readonly recentSeries: Array<RequestSeries | undefined> = new Array<RequestSeries | undefined>(RECENT_SERIES)
  private nextRecent = 0

  /**
   * `dataPlane`: the metrics of one data-plane worker, which the primary sums with the other
   * workers' and its own (workers/metrics-merge.ts): request, connection, MCP, LLM and TCP
   * series only -- process, build and reload series are the primary's alone (a sum of them
   * would count the one process N times). `workers`: the primary of that many workers.
   */
  constructor (options: { dataPlane?: boolean, workers?: number, meshCa?: boolean } = {}) {
    const registers = [this.registry]
    const processWide = options.dataPlane !== true
    if (processWide) {
      collectDefaultMetrics({ register: this.registry, prefix: 'portico_' })
      // prom-client names three gauges `*_total`, which the exposition conventions (and
      // promtool) reserve for counters. Its `nodejs_active_resources{type}` gauge already
      // carries the same numbers, so the misnamed ones go.
      for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
        this.registry.removeSingleMetric(`portico_nodejs_${name}`)
      }
      new Gauge({ name: 'portico_build_info', help: 'Portico build information.', labelNames: ['version', 'node'], registers }).set({ version, node: process.version }, 1)
      new Gauge({ name: 'portico_workers', help: 'Serving event loops configured (config.workers): the primary and config.workers - 1 worker threads.', registers }).set(options.workers ?? 1)
    }
    this.requests = new LocalCounter(this.registry, 'portico_requests_total', 'HTTP requests handled, by outcome and protocol (http1, http2, grpc).')
    this.requestDuration = new LocalHistogram(this.registry, 'portico_request_duration_seconds', 'Time from request arrival to the end of the response.', DURATION_BUCKETS)
    this.upstreamDuration = new LocalHistogram(this.registry, 'portico_upstream_call_duration_seconds', 'Time from the start of a backend call to its response headers.', DURATION_BUCKETS)
    this.connections = new LocalCounter(this.registry, 'portico_downstream_connections_total', 'Client connections accepted.')
    this.openConnections = new LocalGauge(this.registry, 'portico_downstream_connections_open', 'Client connections open now.')
    this.mcpRequests = new LocalCounter(this.registry, 'portico_mcp_requests_total', 'MCP requests by method, target, tool (or prompt), and the MCP revision of the client and of the target(s).')
    this.llmTokens = new LocalHistogram(this.registry, 'portico_gen_ai_client_token_usage', 'LLM tokens per request of ai backends, by token type (OpenTelemetry gen_ai.client.token.usage).', TOKEN_BUCKETS)
    this.streamConnections = new LocalCounter(this.registry, 'portico_tcp_connections_total', 'Connections of TCP and TLS listeners (protocol tcp, tls), by route, backend and how they ended (reason: Done, NoRoute, UpstreamConnectFailed, ...).')
    this.streamBytes = new LocalCounter(this.registry, 'portico_tcp_bytes_total', 'Bytes of TCP and TLS listeners\' connections, as on the wire to the client, by direction (received from the client, sent to it).')
    this.streamDuration = new LocalHistogram(this.registry, 'portico_tcp_connection_duration_seconds', 'How long connections of TCP and TLS listeners lasted.', CONNECTION_DURATION_BUCKETS)
    this.udpDatagrams = new LocalCounter(this.registry, 'portico_udp_datagrams_total', 'Datagrams of UDP listeners\' flows, by direction (received from clients, sent to them); counted each quarter second and when a flow ends.')
    this.udpBytes = new LocalCounter(this.registry, 'portico_udp_bytes_total', 'Payload bytes of UDP listeners\' datagrams, by direction (received from clients, sent to them).')
    this.udpDropped = new LocalCounter(this.registry, 'portico_udp_datagrams_dropped_total', 'Client datagrams of UDP listeners not forwarded: the queue of a flow still connecting was full, or the send failed.')
    this.udpFlowsOpened = new LocalCounter(this.registry, 'portico_udp_flows_opened_total', 'UDP flows opened (a client address:port with its own upstream socket), by route and backend.')
    this.udpFlowsClosed = new LocalCounter(this.registry, 'portico_udp_flows_closed_total', 'UDP flows that ended, by reason: IdleTimeout, Evicted (the listener\'s maxFlows was reached), UpstreamUnreachable (ICMP refused), BackendRemoved (reload), Closed (listener closed); NoRoute and NoBackend count datagrams no flow was opened for.')
    this.udpFlowsActive = new LocalGauge(this.registry, 'portico_udp_flows_active', 'UDP flows open now, by gateway and listener.')
    this.requestBodySize = new LocalHistogram(this.registry, 'portico_request_body_size_bytes', 'Request body sizes by gateway and route: the declared content-length, or the body read whole (a chunked body streamed to the backend is not counted).', SIZE_BUCKETS)
    this.responseBodySize = new LocalHistogram(this.registry, 'portico_response_body_size_bytes', 'Response body sizes by gateway and route: the bytes of the backend\'s body passed to the client, or of the proxy\'s own answer.', SIZE_BUCKETS)
    this.mcpDuration = new LocalHistogram(this.registry, 'portico_mcp_request_duration_seconds', 'MCP requests (one JSON-RPC call over HTTP) from arrival to the end of the answer, by method, target and tool (or prompt).', DURATION_BUCKETS)
    this.llmDuration = new LocalHistogram(this.registry, 'portico_gen_ai_client_operation_duration_seconds', 'LLM calls of ai backends from the call to the end of the answer (OpenTelemetry gen_ai.client.operation.duration).', DURATION_BUCKETS)
    this.llmFirstToken = new LocalHistogram(this.registry, 'portico_gen_ai_server_time_to_first_token_seconds', 'Streamed LLM answers: from the call to their first chunk (agentgateway\'s gen_ai_server_time_to_first_token).', DURATION_BUCKETS)
    this.llmTimePerToken = new LocalHistogram(this.registry, 'portico_gen_ai_server_time_per_output_token_seconds', 'Streamed LLM answers: seconds per output token after the first chunk, (end - first chunk) / (output tokens - 1) (OpenTelemetry gen_ai.server.time_per_output_token, as seen by the gateway).', TIME_PER_TOKEN_BUCKETS)
    this.llmTokensPerSecond = new LocalHistogram(this.registry, 'portico_gen_ai_client_output_tokens_per_second', 'Streamed LLM answers: output tokens per second after the first chunk, (output tokens - 1) / (end - first chunk).', TOKENS_PER_SECOND_BUCKETS)
    this.llmCost = new LocalExactCounter(this.registry, 'portico_gen_ai_client_cost_total', 'What LLM calls of ai backends with pricing cost, in their currency (label currency), from each answer\'s token usage; summed exactly.', 12)
    this.authDecisions = new LocalCounter(this.registry, 'portico_auth_decisions_total', 'Decisions of auth policies (jwt \u2014 jwtAuth and mcpAuthentication \u2014, oidc, basicAuth, apiKey, extAuthz, authorization) on requests that reached them: allow, or deny with a reason (unauthenticated, forbidden, login_redirect, error, invalid_request).')
    this.guardrailDecisions = new LocalCounter(this.registry, 'portico_guardrail_decisions_total', 'Decisions of ai backends\' promptGuard guards, by the model asked of the provider, the guard (regex, webhook, openAIModeration) and what it did (action: pass, mask, reject, or error when the guard failed).')
    this.llmFailovers = new LocalCounter(this.registry, 'portico_gen_ai_failovers_total', 'Tries of an ai backend\'s failover provider dropped for the next provider (its groups), by route, the provider that failed (backend) and why (reason: its status, timeout or connection).')
    this.rateLimitDecisions = new LocalCounter(this.registry, 'portico_rate_limit_decisions_total', 'Decisions of localRateLimit and remoteRateLimit on requests that reached them: allowed, limited (429) or error (the service failed, failureMode failClosed).')
    this.connectDuration = new LocalHistogram(this.registry, 'portico_upstream_connect_duration_seconds', 'New backend connections: TCP connect time, by backend.', CONNECT_BUCKETS)
    this.tlsDuration = new LocalHistogram(this.registry, 'portico_upstream_tls_handshake_duration_seconds', 'New TLS backend connections: the TLS handshake after TCP connect, by backend.', CONNECT_BUCKETS)
    this.hboneConnections = new LocalCounter(this.registry, 'portico_upstream_hbone_connections_total', 'HBONE connections to mesh workloads (mTLS HTTP/2 to their port 15008), by the peer identity verified and result: opened, or failed (TLS, identity mismatch, timeout).')
    this.hboneTunnels = new LocalCounter(this.registry, 'portico_upstream_hbone_tunnels_total', 'HBONE tunnels (HTTP/2 CONNECT streams, one per upstream connection to a mesh workload), by peer identity and result: ok, refused (the peer answered non-200) or failed.')
    this.tracingSpans = new LocalCounter(this.registry, 'portico_tracing_spans_total', 'Spans of sampled requests (config.tracing) by what became of them: exported, failed (the collector refused or was away) or dropped (8192 were already waiting).')
    this.pickerCalls = new LocalCounter(this.registry, 'portico_inference_picker_calls_total', 'Calls of InferencePools\' endpoint pickers, by pool and outcome: picked, immediate (the picker answered the request itself: 503, 429), failOpen (it failed; the gateway chose round robin), failClose (it failed; the client got 503).')
    this.pickerDuration = new LocalHistogram(this.registry, 'portico_inference_picker_duration_seconds', 'How long InferencePools\' endpoint pickers took to pick (or to fail), by pool.', DURATION_BUCKETS)
    this.inferencePicks = new LocalCounter(this.registry, 'portico_inference_picks_total', 'Requests of InferencePools by the endpoint that served them (pool, endpoint ip:port).')
    this.inferenceFallbacks = new LocalCounter(this.registry, 'portico_inference_fallbacks_total', 'Endpoints of a picker\'s list that failed to connect, the request going on to the next one (pool, endpoint that failed).')
    this.reloads = processWide ? new Counter({ name: 'portico_config_reloads_total', help: 'Config loads and reloads, by result.', labelNames: ['result'], registers }) : null
    this.reloads?.inc({ result: 'success' }, 0)
    this.reloads?.inc({ result: 'failure' }, 0)
    // The mesh CA is called by the main thread alone (mesh-identity.ts); the series exist only
    // where it is configured.
    this.meshCaCalls = processWide && options.meshCa === true ? new Counter({ name: 'portico_mesh_ca_requests_total', help: 'Certificate requests to the mesh CA (config.mesh.ca), by result: ok, refused (the token was refused), unreachable (no connection or no answer in time), error (any other failure, an unreadable token or root file).', labelNames: ['result'], registers }) : null
    this.meshExpiry = processWide && options.meshCa === true ? new Gauge({ name: 'portico_mesh_certificate_expiry_timestamp_seconds', help: 'When the mesh certificate in force (from the mesh CA) expires, Unix time; 0 until one was issued.', registers }) : null
    this.workerRestarts = processWide && (options.workers ?? 1) > 1 ? new Counter({ name: 'portico_worker_restarts_total', help: 'Data-plane workers restarted after they ended unexpectedly.', registers }) : null
  }

  /** Recorded spans as they leave (RequestTracing.onSpans). */
  observeSpans (result: SpanOutcome, count: number): void {
    this.tracingSpans.inc(result, () => ({ result }), count)
  }

  /** A certificate request to the mesh CA (mesh/istio-ca-identity.ts). */
  observeMeshCaCall (result: string): void {
    this.meshCaCalls?.inc({ result })
  }

  /** The mesh certificate in force expires at this ISO time (undefined: none). */
  meshCertificateExpiry (notAfter: string | undefined): void {
    if (notAfter === undefined) this.meshExpiry?.reset()
    else this.meshExpiry?.set(Date.parse(notAfter) / 1000)
  }

  workerRestarted (): void {
    this.workerRestarts?.inc()
  }

  observeRequest (ctx: RequestContext): void {
    const now = performance.now()
    const route = ctx.routeKey
    const backend = ctx.backend?.name
    const series = this.requestSeries(ctx.listener.ir.gateway, ctx.listener.ir.name, route, backend, ctx.method, ctx.status, ctx.reason, protocolOf(ctx))
    series.requests.value++
    this.requestDuration.record(series.duration, (now - ctx.startMono) / 1000)
    if (ctx.mcp !== null) {
      const mcp = ctx.mcp
      const tool = mcp.kind === 'resource' ? '' : mcp.name ?? ''
      const version = mcp.protocolVersion ?? ''
      const targetVersion = mcp.targetProtocolVersion ?? ''
      this.mcpRequests.inc(`${mcp.method}\0${mcp.target}\0${tool}\0${version}\0${targetVersion}`, () => ({ method: mcp.method, target: mcp.target === '' ? 'unknown' : mcp.target, tool, protocol_version: version, target_protocol_version: targetVersion }))
    }
    if (ctx.llm?.usage != null) this.observeLlmUsage(ctx, ctx.llm, ctx.llm.usage, route ?? 'unknown')
    if (ctx.failedOver != null) {
      const r = route ?? 'unknown'
      for (const f of ctx.failedOver) this.llmFailovers.inc(`${r}\0${f.backend}\0${f.reason}`, () => ({ route: r, backend: f.backend, reason: f.reason }))
    }
    if (ctx.inferencePick != null) this.observeInferencePick(ctx.inferencePick)
    if (ctx.guardDecisions != null) {
      for (const d of ctx.guardDecisions) this.guardrailDecisions.inc(`${d.model}\0${d.guard}\0${d.action}`, () => ({ model: d.model, guard: d.guard, action: d.action }))
    }
    if (ctx.upstreamHeadersAt > 0 && backend !== undefined && ctx.backend!.kind !== 'mcp') {
      series.upstreamDuration ??= this.upstreamDuration.seriesOf(backend, () => ({ backend }))
      this.upstreamDuration.record(series.upstreamDuration, (ctx.upstreamHeadersAt - ctx.upstreamStart) / 1000)
    }
    this.observeSizesAndCalls(ctx, series, now)
    if (ctx.phases.length > 0) this.observeDecisions(ctx, series.gateway || 'unknown', route ?? 'unknown')
  }

  private observeInferencePick (p: InferencePickFacts): void {
    const pool = p.pool
    this.pickerCalls.inc(`${pool}\0${p.outcome}`, () => ({ pool, outcome: p.outcome }))
    this.pickerDuration.record(this.pickerDuration.seriesOf(pool, () => ({ pool })), p.pickerSeconds)
    const endpoint = p.endpoint
    if (p.served && endpoint !== null) this.inferencePicks.inc(`${pool}\0${endpoint}`, () => ({ pool, endpoint }))
    for (const e of p.fallbacks) this.inferenceFallbacks.inc(`${pool}\0${e}`, () => ({ pool, endpoint: e }))
  }

  /**
   * The series of a request with these labels. Label sets repeat from one request to the
   * next (the same listener, route, backend, method, status..., and each value the same string
   * object), so the last few are compared value by value before a key is built: building the
   * key (a string of fifteen parts) and finding it in four Maps cost ~4,800 instructions a
   * request, the Map comparing it as a string not yet flat (bench/tracing-instructions.ts
   * --functions, tracing off).
   */
  private requestSeries (gateway: string, listener: string, route: string | null, backend: string | undefined, method: string, status: number, reason: string, protocol: string): RequestSeries {
    const recent = this.recentSeries
    for (let i = 0; i < RECENT_SERIES; i++) {
      const s = recent[i]
      if (s === undefined) break
      if (s.status === status && s.route === route && s.method === method && s.backend === backend && s.reason === reason && s.protocol === protocol && s.listener === listener && s.gateway === gateway) return s
    }
    const key = `${gateway}\0${listener}\0${route}\0${backend}\0${method}\0${status}\0${reason}\0${protocol}`
    let s = this.requestSeriesByKey.get(key)
    if (s === undefined) {
      const labels = (): Record<string, string> => ({
        gateway: gateway || 'unknown',
        listener: listener || 'unknown',
        route: route ?? 'unknown',
        backend: backend ?? 'unknown',
        method,
        status: String(status),
        reason,
        protocol
      })
      s = {
        gateway,
        listener,
        route,
        backend,
        method,
        status,
        reason,
        protocol,
        requests: this.requests.seriesOf(key, labels),
        duration: this.requestDuration.seriesOf(key, labels),
        requestBodySize: null,
        responseBodySize: null,
        upstreamDuration: null
      }
      this.requestSeriesByKey.set(key, s)
    }
    recent[this.nextRecent] = s
    this.nextRecent = (this.nextRecent + 1) % RECENT_SERIES
    return s
  }

  private observeSizesAndCalls (ctx: RequestContext, series: RequestSeries, now: number): void {
    const declared = ctx.req.headers['content-length']
    const requestBytes = ctx.requestBody !== null ? ctx.requestBody.length : declared !== undefined ? Number(declared) : NaN
    if (requestBytes >= 0) this.requestBodySize.record(series.requestBodySize ??= this.bodySizeSeries(this.requestBodySize, series), requestBytes)
    const local = ctx.responseHeaders['content-length']
    const responseBytes = ctx.responseBytes > 0 ? ctx.responseBytes : typeof local === 'string' ? Number(local) : NaN
    if (responseBytes >= 0) this.responseBodySize.record(series.responseBodySize ??= this.bodySizeSeries(this.responseBodySize, series), responseBytes)
    const mcp = ctx.mcp
    if (mcp !== null) {
      const tool = mcp.kind === 'resource' ? '' : mcp.name ?? ''
      this.mcpDuration.observe(`${mcp.method}\0${mcp.target}\0${tool}`, () => ({ method: mcp.method, target: mcp.target === '' ? 'unknown' : mcp.target, tool }), (now - ctx.startMono) / 1000)
    }
    const llm = ctx.llm
    if (llm !== null && ctx.upstreamStart > 0) {
      const route = series.route ?? 'unknown'
      const backend = series.backend ?? 'unknown'
      const responseModel = llm.usage?.responseModel ?? 'unknown'
      const key = `${llm.operation}\0${llm.system}\0${llm.model}\0${responseModel}\0${route}\0${backend}`
      const llmLabels = () => ({ gen_ai_operation_name: llm.operation, gen_ai_provider_name: llm.system, gen_ai_request_model: llm.model, gen_ai_response_model: responseModel, route, backend })
      this.llmDuration.observe(key, llmLabels, (now - ctx.upstreamStart) / 1000)
      if (llm.streaming && llm.firstChunkAt > 0) {
        this.llmFirstToken.observe(key, llmLabels, (llm.firstChunkAt - ctx.upstreamStart) / 1000)
        // The pace of generation once it started: the tokens after the first over the time
        // after the first chunk (a stream's first token arrives with it, or just after).
        const output = llm.usage?.outputTokens ?? null
        const generating = (now - llm.firstChunkAt) / 1000
        if (output !== null && output > 1 && generating > 0) {
          this.llmTimePerToken.observe(key, llmLabels, generating / (output - 1))
          this.llmTokensPerSecond.observe(key, llmLabels, (output - 1) / generating)
        }
      }
      const cost = llm.cost
      if (cost !== undefined) {
        this.llmCost.inc(`${key}\0${cost.currency}`, () => ({ ...llmLabels(), currency: cost.currency }), cost.picos)
      }
    }
  }

  /** A body-size histogram's series for a request's gateway and route. */
  private bodySizeSeries (histogram: LocalHistogram, series: RequestSeries): HistogramSeries {
    const gateway = series.gateway || 'unknown'
    const route = series.route ?? 'unknown'
    return histogram.seriesOf(`${gateway}\0${route}`, () => ({ gateway, route }))
  }

  /**
   * Auth and rate-limit decisions: every such policy of the phases entered let the request
   * through, except the one that answered it (`ctx.answeredBy`), which refused it; the
   * policies after it never ran.
   */
  private observeDecisions (ctx: RequestContext, gateway: string, route: string): void {
    const refused = ctx.answeredBy
    for (const { set } of ctx.phases) {
      if (set.empty) continue
      for (const policy of set.policies) {
        const kind = policy.kind
        const denied = policy === refused
        if (AUTH_POLICIES.has(kind)) {
          const reason = denied ? denyReason(ctx.status) : ''
          const decision = denied ? 'deny' : 'allow'
          this.authDecisions.inc(`${gateway}\0${route}\0${kind}\0${decision}\0${reason}`, () => ({ gateway, route, policy: kind, decision, reason }))
        } else if (RATE_LIMIT_POLICIES.has(kind)) {
          const decision = !denied ? 'allowed' : ctx.status === 429 ? 'limited' : 'error'
          this.rateLimitDecisions.inc(`${gateway}\0${route}\0${kind}\0${decision}`, () => ({ gateway, route, policy: kind, decision }))
        }
        if (denied) return
      }
    }
  }

  /** An HBONE connection or tunnel to a mesh workload (proxy/src/hbone-metrics.ts). */
  observeHbone (peer: string, tunnel: boolean, result: string): void {
    const labels = (): Record<string, string> => ({ peer_identity: peer, result })
    if (tunnel) this.hboneTunnels.inc(`${peer}\0${result}`, labels)
    else this.hboneConnections.inc(`${peer}\0${result}`, labels)
  }

  /** A new backend connection: its TCP connect time and, over TLS, its handshake (seconds). */
  observeConnect (backend: string, tcpSeconds: number, tlsSeconds: number | null): void {
    const labels = () => ({ backend })
    this.connectDuration.observe(backend, labels, tcpSeconds)
    if (tlsSeconds !== null) this.tlsDuration.observe(backend, labels, tlsSeconds)
  }

  private observeLlmUsage (ctx: RequestContext, call: LlmCall, usage: LlmUsage, route: string): void {
    const responseModel = usage.responseModel ?? 'unknown'
    const backend = ctx.backend?.name ?? 'unknown'
    for (const [type, tokens] of [['input', usage.inputTokens], ['output', usage.outputTokens]] as const) {
      if (tokens === null) continue
      const key = `${type}\0${call.operation}\0${call.system}\0${call.model}\0${responseModel}\0${route}\0${backend}`
      this.llmTokens.observe(key, () => ({
        gen_ai_token_type: type,
        gen_ai_operation_name: call.operation,
        gen_ai_provider_name: call.system,
        // OpenTelemetry's older name (semconv 1.36 and before) for the same value, kept so
        // dashboards built on it keep working.
        gen_ai_system: call.system,
        gen_ai_request_model: call.model,
        gen_ai_response_model: responseModel,
        route,
        backend
      }), tokens)
    }
  }

  observeConnection (c: StreamConnectionRecord): void {
    const gateway = c.gateway || 'unknown'
    const listener = c.listener || 'unknown'
    const route = c.route ?? 'unknown'
    const backend = c.backend ?? 'unknown'
    const key = `${gateway}\0${listener}\0${route}\0${backend}\0${c.protocol}\0${c.reason}`
    this.streamConnections.inc(key, () => ({ gateway, listener, route, backend, protocol: c.protocol, reason: c.reason }))
    this.streamDuration.observe(key, () => ({ gateway, listener, route, backend, protocol: c.protocol, reason: c.reason }), c.durationMs / 1000)
    const base = `${gateway}\0${listener}\0${route}\0${c.protocol}`
    this.streamBytes.inc(`${base}\0received`, () => ({ gateway, listener, route, protocol: c.protocol, direction: 'received' }), c.bytesFromClient)
    this.streamBytes.inc(`${base}\0sent`, () => ({ gateway, listener, route, protocol: c.protocol, direction: 'sent' }), c.bytesToClient)
  }

  udpFlowOpened (f: { gateway: string, listener: string, route: string, backend: string }): void {
    this.udpFlowsOpened.inc(`${f.gateway}\0${f.listener}\0${f.route}\0${f.backend}`, () => ({ gateway: f.gateway, listener: f.listener, route: f.route, backend: f.backend }))
    this.udpFlowsActive.add(`${f.gateway}\0${f.listener}`, () => ({ gateway: f.gateway, listener: f.listener }), 1)
  }

  udpFlowCounts (c: UdpFlowCounts): void {
    const base = `${c.gateway}\0${c.listener}\0${c.route}`
    const labels = (direction: string) => () => ({ gateway: c.gateway, listener: c.listener, route: c.route, direction })
    if (c.datagramsFromClient > 0) {
      this.udpDatagrams.inc(`${base}\0received`, labels('received'), c.datagramsFromClient)
      this.udpBytes.inc(`${base}\0received`, labels('received'), c.bytesFromClient)
    }
    if (c.datagramsToClient > 0) {
      this.udpDatagrams.inc(`${base}\0sent`, labels('sent'), c.datagramsToClient)
      this.udpBytes.inc(`${base}\0sent`, labels('sent'), c.bytesToClient)
    }
    if (c.dropped > 0) this.udpDropped.inc(base, () => ({ gateway: c.gateway, listener: c.listener, route: c.route }), c.dropped)
  }

  udpFlowEnded (r: UdpFlowRecord): void {
    const route = r.route ?? 'unknown'
    const backend = r.backend ?? 'unknown'
    this.udpFlowsClosed.inc(`${r.gateway}\0${r.listener}\0${route}\0${backend}\0${r.reason}`, () => ({ gateway: r.gateway, listener: r.listener, route, backend, reason: r.reason }))
    // A refused datagram (no route, no backend) never opened a flow.
    if (r.backend !== null) this.udpFlowsActive.add(`${r.gateway}\0${r.listener}`, () => ({ gateway: r.gateway, listener: r.listener }), -1)
  }

  connectionOpened (bind: string, protocol: string): () => void {
    const key = `${bind}\0${protocol}`
    const labels = (): Record<string, string> => ({ bind, protocol })
    this.connections.inc(key, labels)
    this.openConnections.add(key, labels, 1)
    return () => this.openConnections.add(key, labels, -1)
  }

  configLoaded (ok: boolean): void {
    this.reloads?.inc({ result: ok ? 'success' : 'failure' })
  }

}
