/**
 * Everything known about one request as it moves through the pipeline. Policies read and
 * change it (headers, path, response headers); the trace snapshots and the access log are
 * views of it. It lives in request/, below policy/, llm/, mcp/ and pipeline/, so the rooms
 * that read it import down (issue 15, "Per-request state in one place").
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { InboundRequest, InboundResponse } from '../http/inbound.ts'
import type { Duplex } from 'node:stream'
import type { BackendIR, PathMatchIR } from '../ir/types.ts'
import type { CompiledBackendRef, CompiledListener, CompiledRoute } from './compiled.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import type { CompiledPolicy, CompiledPolicySet } from './policy.ts'
import type { PolicyPhase } from '../ir/policy.ts'
import type { TraceRecorder } from '../trace/recorder.ts'
import type { LlmCall, LlmCost, McpCallInfo } from './calls.ts'
import { grpcCallOf, grpcKind, type GrpcCall } from '../http/grpc.ts'
import type { ResponseInterceptor } from '../http/response-intercept.ts'
import type { OtelSpan, RequestSpan } from '../trace/otel.ts'
import { performance } from '../util/clock.ts'

/**
 * Why a request ended the way it did -- a stable label for access logs and metrics
 * (agentgateway's reasons, so dashboards carry over).
 */
/** What the metrics read of an InferencePool request (RequestContext.inferencePick). */
export interface InferencePickFacts {
  pool: string
  /** picked, immediate, failOpen, failClose (the picker's outcome). */
  outcome: 'picked' | 'immediate' | 'failOpen' | 'failClose'
  /** The picker call's latency, seconds. */
  pickerSeconds: number
  /** The endpoint the request went to last (the one that served, when the call got an answer). */
  endpoint: string | null
  /** Whether an answer came from `endpoint`. */
  served: boolean
  /** Endpoints left after a connection failure, in order. */
  fallbacks: string[]
}

export type RequestReason =
  | 'Upstream'
  | 'DirectResponse'
  | 'NotFound'
  | 'NoValidBackends'
  | 'UpstreamFailure'
  | 'Timeout'
  | 'InvalidRequest'
  | 'DownstreamClosed'
  | 'Internal'
  | 'MCP'
  | (string & {})

export interface RequestAuth {
  /** Claims of a validated JWT. */
  jwt: Record<string, unknown> | null
  /** The API key that matched: its name and metadata (never the key itself). */
  apiKey: { name: string, metadata: Record<string, unknown> } | null
  basicAuth: { username: string } | null
  /**
   * The token the client presented that a jwtAuth or apiKey policy validated, for
   * backendAuth.passthrough to send on (llm/request.ts). Never shown: not in CEL, traces or logs.
   */
  credential?: { kind: 'jwt' | 'apiKey', token: string } | null
}

/**
 * The client connection's addresses, when they are not the socket's own: a request a
 * data-plane worker handed to the thread that owns MCP (engine.handleHandoff) arrives over
 * an internal connection, and carries what the worker's socket said.
 */
export interface ClientFacts {
  remoteAddress: string
  remotePort: number
  localAddress: string
  localPort: number
  /** TLS SNI name, when the client sent one. */
  servername?: string
}

/** Decides whether a request may see or use one MCP item. */
export interface McpItemAuthorizer {
  allows(ctx: RequestContext, item: McpItem): boolean
}

export interface McpItem {
  method: string
  kind?: 'tool' | 'prompt' | 'resource'
  /** Upstream (unprefixed) name, or URI for resources. */
  name?: string
  target?: string
}

/**
 * Why a rate limit refuses an LLM request before the provider sees it (a token or cost
 * bucket that is empty, or cannot take the prompt's estimate): llm/request.ts answers 429 in
 * the client format's error shape with these.
 */
export interface LlmTokenRefusal {
  /** What the bucket holds now and its size, as the x-ratelimit-remaining and x-ratelimit-limit headers say them. */
  remaining: string
  limit: string
  /** Seconds until it holds enough (null: it never can, the prompt is above the bucket's size). */
  retryAfterS: number | null
  /** The error message the client gets. */
  message: string
  /** The policy that refused (metrics count it `limited`). */
  policy: CompiledPolicy
  /** A rate limit service's refusal: its status (429, or 500 when it failed closed) and its headers, sent instead of x-ratelimit-*. */
  status?: 429 | 500
  headers?: Record<string, string>
}

/** A request's prompt as estimated before the call (`tokenize: true`): its tokens and, with pricing, their input cost. */
export interface LlmPromptEstimate {
  tokens: number
  /** The tokens at the model's input rate, in 10^-12 of `currency`; null without a rate. */
  cost: { picos: bigint, currency: string } | null
}

/** The `llm` variable of limit keys (and what a rate limit knows of the call when it decides). */
export interface LlmLimitCall {
  requestModel: string
  /** The model sent to the provider (the backend's own, when it names one). */
  model: string
  streaming: boolean
  operation: string
  provider: string
}

/**
 * What a rate limit service said when a request's estimated prompt tokens were sent as hits
 * (`tokenize: true` with remoteRateLimit descriptors of type tokens): taken (`ok`, or the
 * service failed and failureMode is failOpen: nothing taken), over the limit, or failed
 * (failClosed). `headers`: the service's response headers (RateLimit-*), for a refusal.
 */
export interface LlmTokenReservation {
  outcome: 'ok' | 'overLimit' | 'failed'
  headers: Array<[string, string]>
  /** The policy that asked (metrics count a refusal against it). */
  policy: CompiledPolicy
}

export class RequestContext {
  readonly req: InboundRequest
  readonly res: InboundResponse
  /** Wall-clock start (ms since epoch) for `request.startTime`. */
  readonly startTime: number
  /** Monotonic start (ms, performance.now()) for durations. */
  readonly startMono: number
  readonly listener: CompiledListener
  readonly scheme: 'http' | 'https'
  readonly method: string
  /**
   * The request's host (may include a port): the Host header, or the authority of an
   * absolute-form request target, which replaces it (RFC 9112 §3.2.2).
   */
  readonly host: string
  /** Host without port, lower-case: what hostnames match against. */
  readonly hostname: string
  /**
   * The peer's address and port as the socket reported them at arrival (IPv4-mapped form
   * kept). Read once here: undici unsets `req.socket` when it abandons a request body, and
   * every later reader (access log, trace, CEL, ext_authz) must still see the real peer.
   */
  readonly sourceAddress: string
  /** Set when the request was handed over from a data-plane worker (ClientFacts). */
  readonly facts: ClientFacts | null
  readonly sourcePort: number
  /** The request target exactly as received (`req.url`): the trace's initial snapshot. */
  readonly rawTarget: string
  /**
   * The normalised request path before any rewrite (http/request-target.ts): what routes
   * matched and what CEL's `request.path` and the access log show.
   */
  readonly originalPath: string
  /** Query without `?`, '' when absent. */
  readonly query: string
  /**
   * Why the request target or Host cannot be served (answered 400), or `redirect` when the
   * path held escaped slashes and the listener redirects to the clean path; null to go on.
   */
  readonly targetProblem: string | null

  /** Request path sent upstream (URL rewrites change it). */
  path: string
  /** Query sent upstream in place of the client's (an LLM provider's own, Azure's api-version); null = the client's. */
  upstreamQuery: string | null = null
  /** Request headers sent upstream (hop-by-hop removed; policies change them). */
  headers: HeaderMap

  route: CompiledRoute | null = null
  /**
   * The path match of the route match that selected the request (ReplacePrefixMatch of
   * urlRewrite and requestRedirect replaces the prefix it matched); null before routing.
   */
  matchedPath: PathMatchIR | null = null
  backendRef: CompiledBackendRef | null = null
  backend: BackendIR | null = null
  /** The failover groups of the route's backend choice (an `ai` backend with `groups`): backendRef is the provider tried now. */
  failover: CompiledBackendRef[][] | null = null
  /** Providers whose try was dropped for the next one (failover), with why: a status, `timeout` or `connection` (metrics). */
  failedOver: Array<{ backend: string, reason: string }> | null = null
  /**
   * An InferencePool backend's pick (pipeline/inference-pool.ts), for metrics and the access
   * log: the picker's outcome and latency, the endpoint that served, the endpoints left for
   * the next one after a connection failure.
   */
  inferencePick: InferencePickFacts | null = null
  /**
   * The model API's choice (pipeline/models.ts): the model the client asked for, the concrete
   * model chosen and why (each virtual model's step: `smart: weight 3 of 4`, ...); for a
   * failover virtual model the model serving is the one whose backend is `backend`
   * (`failoverModels`).
   */
  modelChoice: { requested: string, model: string, why: string[], failoverModels?: ReadonlyMap<string, string> } | null = null
  /** promptGuard decisions of an ai backend's request and answer (metrics: portico_guardrail_decisions_total). */
  guardDecisions: Array<{ model: string, guard: string, action: string }> | null = null
  /** Policy sets entered so far, in phase order; their response hooks run in reverse. */
  readonly phases: Array<{ phase: PolicyPhase, set: CompiledPolicySet }> = []
  /**
   * The policy whose request hook answered the request (an auth policy refusing, a rate
   * limit): the policies before it in `phases` let the request through. Metrics count
   * decisions from it.
   */
  answeredBy: CompiledPolicy | null = null

  status = 0
  responseHeaders: HeaderMap = {}
  reason: RequestReason = 'Upstream'
  /** A short description of what went wrong, for the access log and the trace. */
  error: string | null = null
  /** Monotonic ms when the backend call started and when its response headers arrived. */
  upstreamStart = 0
  upstreamHeadersAt = 0
  /** Bytes of the backend's response body passed to the client (http/client-response.ts). */
  responseBytes = 0
  /** Set once the response is complete (or the client went away). */
  done = false
  /** Cancels the backend call in progress, if any (client gone, timeout). */
  abortUpstream: (() => void) | null = null
  /** Set for HTTP/1.1 upgrade requests (WebSocket): the client socket and its first bytes. */
  upgrade: { socket: Duplex, head: Buffer } | null = null
  /** True once the backend accepted the upgrade and bytes are tunnelled both ways. */
  upgraded = false
  /**
   * The request headers route matching reads when a listener filter changed them (a copy of
   * `req.headers` with the filters' header mutations, Host and :authority never among
   * them); null: matching reads `req.headers`.
   */
  routingHeaders: IncomingHttpHeaders | null = null
  /**
   * The request body, when a policy had to read it whole (extAuthz includeRequestBody): the
   * backend call and the MCP layer send this instead of reading `req`, which is consumed.
   */
  requestBody: Buffer | null = null
  /**
   * A replacement for the response body, set by a response policy (transformation): the
   * client gets these bytes (with a matching content-length) instead of the backend's body.
   */
  responseBody: Buffer | null = null
  /** On MCP routes: the MCP method, target and tool/prompt/resource of this request. */
  mcp: McpCallInfo | null = null
  /** On `ai` backends: the model asked for and, once the answer told it, the token usage. */
  llm: LlmCall | null = null
  /** A gRPC request (content-type application/grpc...): its service, method and status. */
  grpc: GrpcCall | null = null
  /**
   * Token-based rate limits that admitted this request, waiting for the LLM token count of
   * the answer (they take it from their buckets then).
   */
  llmTokenHooks: Array<(tokens: number, cost: LlmCost | null) => void> | null = null
  /**
   * Token-based local rate limits that admitted this request, for the pre-call estimate of
   * an `ai` backend with `tokenize: true`: each says whether the estimate fits in its buckets
   * now (null) or what to answer (llm/request.ts). A check, not a debit.
   */
  llmTokenChecks: Array<(estimate: LlmPromptEstimate) => LlmTokenRefusal | null> | null = null
  /**
   * Local rate limits decided once an `ai` backend has read the request (keyed buckets of
   * type tokens and cost, whose key may name the model; cost buckets): llm/request.ts calls
   * each with the call, before the estimate; null admits (and registers what the answer
   * takes), else the refusal. Each policy adds itself once per request.
   */
  llmAdmissions: Array<(call: LlmLimitCall) => LlmTokenRefusal | null | Promise<LlmTokenRefusal | null>> | null = null
  /**
   * Remote rate limits with descriptors of type tokens that admitted this request, for the
   * pre-call estimate of `tokenize: true`: each sends the estimate as hits now (taken at the
   * service; the answer's usage later adds only what the estimate did not cover). Called once
   * per request (a retry reuses what was taken).
   */
  llmTokenReservations: Array<(tokens: number) => Promise<LlmTokenReservation>> | null = null
  /** µs on the trace's clock when the backend call in progress started (trace/backend-call.ts). */
  backendCallStartUs = 0
  /** The mesh peer identity (or identities) of the call in progress when it goes through HBONE; null: plain. */
  backendCallMesh: string | null = null
  /** The OpenTelemetry server span (trace/otel.ts); null while tracing is off. */
  span: RequestSpan | null = null
  /** The client span of the backend call in progress; null when not recorded. */
  callSpan: OtelSpan | null = null
  /** Backend calls made so far (retries count): `http.request.resend_count` of the next one. */
  upstreamAttempts = 0
  /**
   * Policies that must see the backend's response before the client does (extProc), in the
   * order they ran; null for none (http/response-intercept.ts).
   */
  responseInterceptors: ResponseInterceptor[] | null = null
  /**
   * The request as it was before the backend phase, on routes with retries: each retry runs
   * the backend policies again on it (pipeline/resiliency.ts).
   */
  beforeBackend: { headers: HeaderMap, path: string, body: Buffer | null } | null = null
  /** Slot in the engine's in-flight registry (-1 when not registered). */
  inFlightSlot = -1
  /** CEL's `request` and `source` variables, built once per request on first use. */
  celBase: { request: Record<string, unknown>, source: Record<string, unknown> } | null = null
  private authState: RequestAuth | null = null
  private mcpAuthorizers: McpItemAuthorizer[] | null = null

  /** Who the caller is, as the identity policies established it (CEL sees these). */
  get auth (): RequestAuth {
    // Made on first use: most requests on routes without identity policies never need it.
    return this.authState ??= { jwt: null, apiKey: null, basicAuth: null }
  }

  /**
   * Authorization rule sets that concern MCP items (tools, prompts, resources), left by the
   * authorization policy for the MCP layer to apply per JSON-RPC request and list item.
   */
  get mcpAuthorization (): McpItemAuthorizer[] {
    return this.mcpAuthorizers ??= []
  }

  tracer: TraceRecorder | null

  constructor (init: {
    req: InboundRequest
    res: InboundResponse
    listener: CompiledListener
    scheme: 'http' | 'https'
    host: string
    hostname: string
    /** Normalised path and raw query (http/request-target.ts). */
    path: string
    query: string
    targetProblem: string | null
    tracer: TraceRecorder | null
    facts?: ClientFacts | undefined
  }) {
    const { req } = init
    this.req = req
    this.res = init.res
    this.startMono = performance.now()
    this.startTime = Date.now()
    this.listener = init.listener
    this.scheme = init.scheme
    this.method = req.method ?? 'GET'
    this.host = init.host
    this.hostname = init.hostname
    this.facts = init.facts ?? null
    this.sourceAddress = init.facts?.remoteAddress ?? req.socket.remoteAddress ?? ''
    this.sourcePort = init.facts?.remotePort ?? req.socket.remotePort ?? 0
    this.rawTarget = req.url ?? '/'
    this.originalPath = init.path
    this.query = init.query
    this.targetProblem = init.targetProblem
    this.path = init.path
    this.headers = {}
    this.tracer = init.tracer
    const grpc = grpcKind(req.headers['content-type'])
    if (grpc !== null) this.grpc = grpcCallOf(init.path, grpc)
  }

  /** The address and port the client connected to. */
  get localAddress (): string | undefined {
    return this.facts !== null ? this.facts.localAddress : this.req.socket?.localAddress
  }

  get localPort (): number | undefined {
    return this.facts !== null ? this.facts.localPort : this.req.socket?.localPort
  }

  get pathAndQuery (): string {
    const query = this.upstreamQuery ?? this.query
    return query === '' ? this.path : `${this.path}?${query}`
  }

  get routeKey (): string | null {
    return this.route?.key ?? null
  }
}
