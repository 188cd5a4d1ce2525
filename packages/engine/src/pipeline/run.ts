/**
 * The request pipeline: gateway policies -> route selection -> route policies -> backend choice
 * -> backend policies -> backend call, with a trace event at each step. Every exit -- a local
 * answer, a failure, a client that went away -- goes through `respondLocal` or the upstream
 * handler, so the access log, metrics and trace always see a finished request.
 */

import type { InboundRequest, InboundResponse } from '../http/inbound.ts'
import type { Duplex } from 'node:stream'
import type { TLSSocket } from 'node:tls'
import type { CompiledBind } from '../request/compiled.ts'
import type { CompiledPolicySet, PolicyOutcome } from '../request/policy.ts'
import type { PolicyPhase } from '../ir/policy.ts'
import type { TraceHub } from '../trace/hub.ts'
import type { UpstreamPools } from '../http/upstream-pools.ts'
import type { McpGateway } from '../mcp/session/gateway.ts'
import type { RequestTracing } from '../trace/otel.ts'
import { celAttribute, endServerSpan, type SpanAttributes } from '../trace/otel.ts'
import { accessLogVars, evaluateAdded, type CelFields } from './access-log-fields.ts'
import { RequestContext, type ClientFacts } from '../request/context.ts'
import { hostOnly } from '../routing/hostname.ts'
import { addForwardedHeaders, connectionHeaderProblem, endToEndHeaders } from '../http/headers.ts'
import { grpcContentTypeOf } from '../http/grpc.ts'
import { hostHeaderProblem, normalizePath, redirectsToNormalPath, splitRequestTarget } from '../http/request-target.ts'
import { effectivePolicy, requestSnapshot } from '../trace/snapshot.ts'
import { callBackend } from './backend-call.ts'
import { refuseUpgrade, upgradeResponse } from '../http/upgrade.ts'
import { upgradeAllowed } from '../http/frontend.ts'
import { finishResponse, respondLocal } from './respond.ts'
import { serveProtectedResourceMetadata } from './well-known.ts'
import { callWithResiliency, saveBeforeBackend } from './resiliency.ts'
import { PROTECTED_RESOURCE_PATH } from '../policy/protected-resource.ts'
import { llm } from './llm-modules.ts'
import { firstProvider } from './failover.ts'
import { chooseModel } from './models.ts'
import type { CompiledBackendRef } from '../request/compiled.ts'
import { severityOf } from '../trace/recorder.ts'
import { lazyRequire } from '../util/lazy-require.ts'

// The client-facing MCP listener (and, through it, the gateway's sessions and targets) loads
// when a config with an MCP backend is installed (Engine.install calls loadMcpHttp), so no
// request pays for a synchronous require and a config without MCP never loads it.
const mcpHttp = lazyRequire<typeof import('../mcp/client/http.ts')>('../mcp/client/http.ts')

/** Loads the MCP listener now (Engine.install, for a config with an MCP backend). */
export function loadMcpHttp (): void {
  mcpHttp()
}

/**
 * The InferencePool backend (the endpoint picker's ext_proc client, inference/): loaded by
 * Engine.install with the first config that has a pool (its endpoints become backends there),
 * so a request finds it loaded and a config without a pool never loads it (issue 54).
 */
export const inferencePoolModule = lazyRequire<typeof import('./inference-pool.ts')>('../pipeline/inference-pool.ts')

/**
 * An HTTP/1.1 upgrade request (WebSocket) runs the same pipeline, with a response bound to
 * the raw socket for the proxy's own answers (http/upgrade.ts).
 */
export function handleUpgrade (rt: PipelineRuntime, bind: CompiledBind, req: InboundRequest, socket: Duplex, head: Buffer): void {
  const res = upgradeResponse(req, socket)
  // The listener asks the engine first (shouldUpgradeCallback), so only allowed upgrades get
  // here; on a Node without that hook a refused one (h2c, ...) still never reaches a backend
  // as an upgrade: it is proxied as a plain request, without its Upgrade headers.
  const allowed = upgradeAllowed(bind.selectListener(hostOnly(req.headers.host)).frontend, req.headers.upgrade)
  handleRequest(rt, bind, req, res, allowed ? { socket, head } : undefined)
}

/** What the pipeline needs from the engine that runs it. */
export interface PipelineRuntime {
  hub: TraceHub
  pools: UpstreamPools
  mcp: McpGateway
  /** `env` of every snapshot: `{}` standalone, `{podName, namespace, gateway}` in a cluster. */
  env: Record<string, string>
  /** Cap on bytes captured per body snapshot. */
  traceBodyLimit: number
  /** Requests in progress; the pipeline adds each, the end hook removes it. */
  inFlight: { add(ctx: RequestContext): void }
  /** Called once per request when the response is complete or abandoned. */
  onRequestEnd: ((ctx: RequestContext) => void) | null
  /** Called when a request fails inside the proxy (a bug or an unexpected condition). */
  onInternalError: ((err: unknown, ctx: RequestContext) => void) | null
  /** OpenTelemetry tracing; null = off (no span is started). */
  otel: RequestTracing | null
  /** config.tracing.fields: server-span attributes added with CEL or removed; null: none. */
  otelFields: CelFields | null
  /** Per-backend stats: calls that are not a request's last (retried attempts, mirror copies). */
  backendStats?: { recordCall(backendKey: string, failed: boolean, latencyMs: number | null): void }
  /** On a data-plane worker: hands a request for an MCP route to the thread that owns MCP. */
  handoff?: ((req: InboundRequest, res: InboundResponse, bindKey: string) => void) | null
}

export function handleRequest (rt: PipelineRuntime, bind: CompiledBind, req: InboundRequest, res: InboundResponse, upgrade?: RequestContext['upgrade'], facts?: ClientFacts): void {
  // A request pipelined behind one whose answer closes the connection (a 400 of refuseTarget,
  // a refused upgrade) is not served: Node parsed it before that answer could close.
  if (closingAfterAnswer.has(req.socket)) return
  // The target and Host are checked and the path normalised before anything looks at them:
  // routes, policies and the backend all see the one normalised path.
  const target = splitRequestTarget(req.url ?? '/')
  const host = target.ok && target.authority !== null ? target.authority : req.headers.host ?? ''
  const hostname = hostOnly(host)
  const listener = bind.selectListener(hostname)
  let problem = req.httpVersionMajor === 0
    ? HTTP_09
    : target.ok ? hostHeaderProblem(req.rawHeaders) ?? connectionHeaderProblem(req.headers.connection) : target.why
  if (problem === null && misdirected(bind, listener, req, facts)) problem = MISDIRECTED
  if (upgrade == null && req.headers.upgrade !== undefined && req.httpVersionMajor === 1) {
    // Its answer closes the connection (refuseUpgrade): what the client pipelined behind it
    // in later reads is not served either.
    if (req.socket != null) closingAfterAnswer.add(req.socket)
    if (refuseUpgrade(req, res)) problem ??= PREFACE_AFTER_UPGRADE
  }
  let path = '/'
  if (target.ok && problem === null) {
    const normal = normalizePath(target.rawPath, listener.frontend.path)
    if (typeof normal === 'string') problem = normal
    else {
      path = normal.path
      if (redirectsToNormalPath(normal, listener.frontend.path)) problem = REDIRECT_TO_NORMAL_PATH
    }
  }
  // MCP sessions and stdio targets live on one thread: a worker passes MCP requests on whole,
  // before anything here counts, traces or rate-limits them (the owner does all of that).
  if (rt.handoff != null && listener.mcpHandoff !== 'none' && upgrade == null && handsOff(listener, hostname, req, path, target, problem)) {
    rt.handoff(req, res, bind.ir.key)
    return
  }
  const ctx = new RequestContext({
    req,
    res,
    listener,
    facts,
    scheme: bind.ir.protocol === 'HTTPS' ? 'https' : 'http',
    host,
    hostname,
    path,
    query: target.ok ? target.query : '',
    targetProblem: problem,
    tracer: rt.hub.armed ? rt.hub.begin() : null
  })
  if (upgrade != null) ctx.upgrade = upgrade
  if (rt.otel !== null) ctx.span = rt.otel.startRequest(req.headers, ctx.method, listener.frontend.sampling)
  rt.inFlight.add(ctx)
  // `on`, not `once`: a response emits 'close' once (Node guards it with `_closed`), and
  // `once` wraps each listener in a bound function and a state object per request.
  res.on('close', () => finish(rt, ctx))
  run(rt, ctx).catch(err => {
    rt.onInternalError?.(err, ctx)
    if (!res.headersSent) respondLocal(rt, ctx, 500, 'internal error', 'Internal', String((err as Error)?.message ?? err))
    else res.destroy()
  })
}

async function run (rt: PipelineRuntime, ctx: RequestContext): Promise<void> {
  const { req, listener } = ctx
  const tracer = ctx.tracer
  tracer?.emit(ctx.span === null ? { type: 'requestStarted' } : { type: 'requestStarted', traceId: ctx.span.traceId })
  tracer?.emit({ type: 'requestSnapshot', stage: 'initial request', requestState: requestSnapshot(ctx, rt.env, { initial: true }) })

  if (ctx.targetProblem !== null) return refuseTarget(rt, ctx)

  ctx.headers = endToEndHeaders(req.headers)
  if (ctx.grpc?.web === true) {
    // gRPC-Web in, gRPC to the backend: the same messages, the trailers coming back in the body.
    ctx.headers['content-type'] = grpcContentTypeOf(String(req.headers['content-type']))
    ctx.headers.te = 'trailers'
    // The base64 form's length is not the bytes' (HTTP/2 frames the body itself).
    if (ctx.grpc.text) delete ctx.headers['content-length']
  }
  // An absolute-form target's authority is the request's host (RFC 9112 §3.2.2); the backend
  // gets it as Host with an origin-form target.
  if (ctx.host !== (req.headers.host ?? '')) ctx.headers.host = ctx.host
  addForwardedHeaders(ctx.headers, ctx.sourceAddress, ctx.scheme, ctx.host, listener.frontend.xffNumTrustedHops)

  // Gateway phase.
  // Phases answer synchronously unless a policy had to wait: `await` only then (an await
  // of a plain value still costs a microtask hop, three per request).
  let outcome: PhaseOutcome | Promise<PhaseOutcome> = null
  if (listener.filters !== null) {
    // Listener filters, in order, before everything that could answer or route (pipeline/listener-filters.ts).
    outcome = await runPhase(ctx, 'gateway', listener.filters)
    if (outcome !== null) return respondFromPolicy(rt, ctx, outcome)
  }
  outcome = runPhase(ctx, 'gateway', listener.policies)
  if (outcome instanceof Promise) outcome = await outcome
  ctx.tracer?.emit({ type: 'requestSnapshot', stage: 'gateway policies', requestState: requestSnapshot(ctx, rt.env, {}) })
  if (outcome !== null) return respondFromPolicy(rt, ctx, outcome)

  if (listener.mcpAuthRoutes && ctx.path.startsWith(PROTECTED_RESOURCE_PATH) && serveProtectedResourceMetadata(rt, ctx)) return

  // Route selection, once, with the headers as listener filters left them.
  const selection = listener.table.select(ctx.hostname, { method: ctx.method, path: ctx.path, query: ctx.query, headers: ctx.routingHeaders ?? req.headers }, ctx.tracer !== null)
  ctx.route = selection.route
  ctx.matchedPath = selection.matchedPath
  if (ctx.tracer !== null) {
    ctx.tracer.emit({ type: 'routeSelection', selectedRoute: ctx.routeKey, evaluatedRoutes: selection.evaluated }, { severity: ctx.route === null ? 'error' : 'info' })
    claimTrace(rt, ctx)
  }
  const route = ctx.route
  if (route === null) return respondLocal(rt, ctx, 404, 'route not found', 'NotFound')

  // Route phase.
  outcome = runPhase(ctx, 'route', route.policies)
  if (outcome instanceof Promise) outcome = await outcome
  ctx.tracer?.emit({ type: 'requestSnapshot', stage: 'route policies', requestState: requestSnapshot(ctx, rt.env, {}) })
  if (outcome !== null) return respondFromPolicy(rt, ctx, outcome)

  // Backend choice and backend phase: by the request's model on a route with models (pipeline/models.ts).
  let ref: CompiledBackendRef | null
  let failover: CompiledBackendRef[][] | undefined
  if (route.models !== null) {
    const model = await chooseModel(ctx, route.models)
    if ('status' in model) return respondLocal(rt, ctx, model.status, model.body, model.reason, model.reason === 'DirectResponse' ? null : ctx.error, model.headers)
    ref = model.ref
    failover = model.failover ?? undefined
  } else {
    ref = route.backends.pick()
    failover = ref?.failover
  }
  if (ref === null) return respondLocal(rt, ctx, 500, 'no valid backends', 'NoValidBackends')
  if (failover !== undefined) {
    // An ai backend's failover groups: the first provider by priority not ejected (pipeline/failover.ts).
    ctx.failover = failover
    ref = firstProvider(failover, b => rt.pools.hasHealthyEndpoint(b))
  }
  ctx.backendRef = ref
  if (ref.backend === undefined || ref.backend.kind === 'invalid') {
    const why = ref.backend?.invalidReason ?? `backend ${ref.ir.backend} does not exist`
    return respondLocal(rt, ctx, 500, 'no valid backends', 'NoValidBackends', why)
  }
  ctx.backend = ref.backend
  if (route.ir.retry !== undefined || ctx.failover !== null) saveBeforeBackend(ctx)
  // Only ai backends pay for the extra step (an await per request shows in req/s).
  outcome = ctx.backend.kind === 'ai' ? await backendPhase(ctx) : runPhase(ctx, 'backend', ref.policies)
  if (outcome instanceof Promise) outcome = await outcome
  if (ctx.backend.kind === 'mcp' && outcome === null) {
    // The MCP layer reads the JSON-RPC body first, so its snapshots can name the method.
    if (ctx.upgrade !== null) return respondLocal(rt, ctx, 400, 'upgrade not supported on an MCP route', 'InvalidRequest')
    return await mcpHttp().handleMcpHttp(rt.mcp, { env: rt.env, finish: c => finishResponse(rt, c, 'all') }, ctx)
  }
  ctx.tracer?.emit({ type: 'requestSnapshot', stage: 'final request', requestState: requestSnapshot(ctx, rt.env, { backend: true }) })
  if (outcome !== null) return respondFromPolicy(rt, ctx, outcome)

  if (ctx.res.destroyed) return // the client left while policies ran
  // An InferencePool: its endpoint picker chooses the endpoint; its fallback list is the retry.
  if (ctx.backend.inferencePool !== undefined) return await inferencePoolModule().callInferencePool(rt, ctx)
  if (route.ir.retry !== undefined || route.mirrors.length > 0 || ctx.failover !== null) return await callWithResiliency(rt, ctx, backendPhase)
  callBackend(rt, ctx)
}

/**
 * Whether a worker hands this request over: every request of a listener whose gateway
 * policies could reroute it, else those whose route -- chosen here as the pipeline would
 * (gateway policies never change what route selection reads) -- has an MCP backend.
 * Requests with a bad target are answered here, as anywhere.
 */
function handsOff (listener: CompiledBind['listeners'][number], hostname: string, req: InboundRequest, path: string, target: ReturnType<typeof splitRequestTarget>, problem: string | null): boolean {
  if (!target.ok || problem !== null) return false
  if (listener.mcpHandoff === 'all') return true
  const route = listener.table.select(hostname, { method: req.method ?? 'GET', path, query: target.query, headers: req.headers }, false).route
  return route !== null && route.hasMcp
}

/** llhttp takes a request line without a version (`GET /`) as HTTP/0.9, which has no headers and no framing. */
const HTTP_09 = 'HTTP/0.9 requests are not served'

const PREFACE_AFTER_UPGRADE = 'an HTTP/2 preface follows an upgrade request (h2c upgrades are not served)'

/** HTTP/1.x connections closing after the answer under way (requests behind it are dropped). */
const closingAfterAnswer = new WeakSet<object>()

/** `targetProblem` of a path whose escaped slashes were unescaped: redirect to the clean path. */
const REDIRECT_TO_NORMAL_PATH = 'redirect'
const MISDIRECTED = 'misdirected'

/**
 * An HTTPS request whose Host picks another listener of the bind than the TLS SNI name did
 * (a client reusing a connection for a host another listener -- another certificate, another
 * client-certificate policy -- serves) gets 421, so it retries on a connection of its own
 * (RFC 9110 §15.5.20; Envoy answers the same). Without SNI (an IP address) nothing is checked.
 */
function misdirected (bind: CompiledBind, listener: CompiledBind['listeners'][number], req: InboundRequest, facts: ClientFacts | undefined): boolean {
  if (bind.ir.protocol !== 'HTTPS' || bind.listeners.length < 2) return false
  const sni = facts !== undefined ? facts.servername : (req.socket as TLSSocket).servername
  if (typeof sni !== 'string' || sni === '') return false
  return bind.selectListener(sni.toLowerCase()) !== listener
}

/**
 * A target that cannot be served (400), or a path with escaped slashes under
 * `UnescapeAndRedirect` (307 to the normalised path, so the client, every intermediary and
 * the gateway agree on the path before anything is authorised).
 */
function refuseTarget (rt: PipelineRuntime, ctx: RequestContext): void {
  if (ctx.targetProblem === REDIRECT_TO_NORMAL_PATH) {
    return respondLocal(rt, ctx, 307, '', 'DirectResponse', null, { location: ctx.pathAndQuery })
  }
  if (ctx.targetProblem === MISDIRECTED) {
    return respondLocal(rt, ctx, 421, 'misdirected request', 'InvalidRequest', 'the Host header names a host another listener serves than the TLS SNI name selected')
  }
  // A request the gateway cannot make sense of puts the rest of the connection in doubt (a
  // front proxy may have framed or routed it otherwise): answer, close, and serve nothing
  // pipelined behind it, as Envoy does after a codec error. HTTP/2 frames each stream itself.
  if (ctx.req.httpVersionMajor < 2 && ctx.req.socket != null) closingAfterAnswer.add(ctx.req.socket)
  respondLocal(rt, ctx, 400, 'bad request', 'InvalidRequest', ctx.targetProblem, { connection: 'close' })
}

/**
 * The backend phase: the backend's policies, then for an `ai` backend the LLM request
 * checks and rewrites. Retries run it again for the backend they picked.
 */
async function backendPhase (ctx: RequestContext): Promise<PhaseOutcome> {
  const outcome = await runPhase(ctx, 'backend', ctx.backendRef!.policies)
  if (outcome !== null || ctx.backend!.kind !== 'ai') return outcome
  const refused = await llm().prepareLlmRequest(ctx)
  if (refused === null) return null
  // A rate limit that refused once the request was read (tokenize, keyed and cost buckets): metrics count it limited.
  if (refused.policy !== undefined) ctx.answeredBy = refused.policy
  return { action: 'respond', status: refused.status, body: refused.body, headers: refused.headers, reason: refused.reason === 'RateLimit' || refused.reason === 'BackendAuth' || refused.reason === 'Guardrail' ? refused.reason : 'InvalidRequest' }
}

/** What a phase decided: an answer that ends the request, or null to go on. */
type PhaseOutcome = Exclude<PolicyOutcome, { action: 'continue' }> | null

/**
 * Runs one phase's request hooks in order. Returns the first outcome that ends the request,
 * or null to go on -- synchronously while every policy answers synchronously, as a promise
 * from the first policy that has to wait.
 */
function runPhase (ctx: RequestContext, phase: PolicyPhase, set: CompiledPolicySet): PhaseOutcome | Promise<PhaseOutcome> {
  ctx.phases.push({ phase, set })
  ctx.tracer?.emit({ type: 'policySelection', phase, effectivePolicy: effectivePolicy(set), ...(set.sources !== undefined ? { sources: { ...set.sources } } : {}) })
  if (set.empty) return null
  const policies = set.policies
  for (let i = 0; i < policies.length; i++) {
    const hook = policies[i]!.onRequest
    if (hook === undefined) continue
    const out = hook.call(policies[i], ctx)
    if (out instanceof Promise) return finishPhase(ctx, policies, i, out)
    if (out.action === 'respond') {
      ctx.answeredBy = policies[i]!
      return out
    }
  }
  return null
}

/** The rest of a phase once policy `i` returned a promise. */
async function finishPhase (ctx: RequestContext, policies: CompiledPolicySet['policies'], i: number, pending: Promise<PolicyOutcome>): Promise<PhaseOutcome> {
  const first = await pending
  if (first.action === 'respond') {
    ctx.answeredBy = policies[i]!
    return first
  }
  for (let j = i + 1; j < policies.length; j++) {
    const hook = policies[j]!.onRequest
    if (hook === undefined) continue
    let out = hook.call(policies[j], ctx)
    if (out instanceof Promise) out = await out
    if (out.action === 'respond') {
      ctx.answeredBy = policies[j]!
      return out
    }
  }
  return null
}

function respondFromPolicy (rt: PipelineRuntime, ctx: RequestContext, outcome: Exclude<PolicyOutcome, { action: 'continue' }>): void {
  respondLocal(rt, ctx, outcome.status, outcome.body, outcome.reason, null, outcome.headers)
}

/** Offers a traced request to the armed watchers; unclaimed traces are dropped. */
export function claimTrace (rt: PipelineRuntime, ctx: RequestContext): void {
  const tracer = ctx.tracer
  if (tracer === null || tracer.claimed) return
  const ok = rt.hub.claim(tracer, { method: ctx.method, host: ctx.hostname, path: ctx.originalPath, route: ctx.routeKey, headers: ctx.req.headers })
  if (!ok) ctx.tracer = null
}

function finish (rt: PipelineRuntime, ctx: RequestContext): void {
  if (!ctx.res.writableFinished && !ctx.upgraded && ctx.reason !== 'DownstreamClosed') {
    ctx.reason = 'DownstreamClosed'
    ctx.error ??= 'client closed the connection before the response completed'
  }
  ctx.done = true
  ctx.abortUpstream?.()
  if (ctx.tracer !== null) {
    claimTrace(rt, ctx)
    ctx.tracer?.emit(ctx.grpc === null ? { type: 'requestFinished' } : { type: 'requestFinished', grpc: { ...ctx.grpc } }, { severity: ctx.reason === 'DownstreamClosed' ? 'error' : severityOf(ctx.status) })
  }
  if (ctx.span !== null) endSpans(rt, ctx, ctx.span)
  rt.onRequestEnd?.(ctx)
}

/** The backend call's span, if still open (it closes with the answer), then the request's. */
function endSpans (rt: PipelineRuntime, ctx: RequestContext, span: NonNullable<RequestContext['span']>): void {
  if (!span.recording) return
  const call = ctx.callSpan
  if (call !== null) {
    ctx.callSpan = null
    if (ctx.llm !== null) call.setAttributes(llm().llmResponseAttributes(ctx.llm))
    if (ctx.reason !== 'Upstream' && ctx.error !== null) call.setError(ctx.reason, ctx.error)
    call.end()
  }
  const fields = rt.otelFields
  endServerSpan(span, ctx, fields?.remove)
  if (fields !== null && fields.add.length > 0) {
    const added: SpanAttributes = {}
    for (const [name, value] of evaluateAdded(fields, accessLogVars(ctx))) added[name] = celAttribute(value)
    span.setAttributes(added)
  }
  span.end()
}
