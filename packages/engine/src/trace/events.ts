/**
 * The trace event record: one JSON object per SSE `data:` frame of `/debug/trace` and per
 * line of `porticoctl proxy trace --raw`. Every event type and its fields are defined here
 * once, as a union discriminated by `message.type`: the engine's `TraceRecorder.emit` takes
 * only these (a misspelt field is a compile error), and @portico/trace-view, porticoctl and
 * the web UI read them, narrowing by `type`.
 *
 * This module imports nothing and is exported alone as `@portico/engine/trace-events`, so
 * trace-view (which runs in browsers) takes its types without loading the engine.
 */

export type TraceSeverity = 'info' | 'warn' | 'error'

export interface TraceEvent {
  /** Start of a span in µs since the request started; set only on timed events. */
  eventStart: number | null
  /** µs since the request started; non-decreasing along a trace. */
  eventEnd: number
  severity: TraceSeverity
  message: TraceMessage
}

/** Stages of `requestSnapshot`, in pipeline order. */
export type RequestSnapshotStage = 'initial request' | 'gateway policies' | 'route policies' | 'final request'
/** Stages of `responseSnapshot`, in pipeline order. */
export type ResponseSnapshotStage = 'raw response' | 'backend response ready' | 'final response'
/** Stages of `bodySnapshot`: the body sent to the backend, or the one sent to the client. */
export type BodySnapshotStage = 'final request' | 'response'
/** Stages of `requestSnapshot` / `responseSnapshot` / `bodySnapshot`, in pipeline order. */
export type SnapshotStage = RequestSnapshotStage | ResponseSnapshotStage | BodySnapshotStage

/** The MCP call a request carries (method, target, item), in MCP routes' snapshots. */
export interface McpSnapshot {
  method: string
  /** Target(s) the request went to ('' for local answers, comma-joined for fan-outs). */
  target: string
  name?: string
  kind?: 'tool' | 'prompt' | 'resource'
  /** The MCP revision the client speaks (e.g. 2025-11-25, 2026-07-28). */
  protocolVersion?: string
  /** The revision(s) spoken to the target(s) of this request, comma-joined like `target`. */
  targetProtocolVersion?: string
}

/** `requestState` of a request snapshot (header values redacted, see ir/redact.ts). */
export interface RequestState {
  request: {
    method: string
    uri: string
    path: string
    pathAndQuery: string
    host: string
    scheme: string
    version: string
    headers: Record<string, string>
    startTime: string
  }
  source: { address: string, port: number, rawAddress: string, rawPort: number }
  /** From the `final request` stage on, when a backend was chosen. */
  backend?: { name: string, type: string, protocol: 'mcp' | 'http' }
  mcp?: McpSnapshot
  env: Record<string, string>
}

/** `requestState` of a response snapshot. */
export interface ResponseState {
  response: { code: number, headers: Record<string, string> }
  mcp?: McpSnapshot
  /** On `raw response`: time in the proxy before the call, and the backend's time to its head. */
  proxy?: { requestProcessingDuration: string, upstreamDuration: string }
  env: Record<string, string>
}

/** Policy kinds that report a `policy` event. */
export type TracedPolicyKind =
  | 'apiKey' | 'basicAuth' | 'cors' | 'csrf' | 'extAuthz' | 'extProc' | 'jwt' | 'localRateLimit'
  | 'oidc' | 'remoteRateLimit' | 'requestRedirect' | 'transformation' | 'urlRewrite'

export interface RequestStartedEvent {
  type: 'requestStarted'
  /** The OpenTelemetry trace id, when tracing is on: the access log line carries the same. */
  traceId?: string
}

export interface RequestSnapshotEvent {
  type: 'requestSnapshot'
  stage: RequestSnapshotStage
  requestState: RequestState
}

export interface ResponseSnapshotEvent {
  type: 'responseSnapshot'
  stage: ResponseSnapshotStage
  requestState: ResponseState
}

export interface BodySnapshotEvent {
  type: 'bodySnapshot'
  stage: BodySnapshotStage
  /** The first `traceBodyLimit` bytes, base64. */
  body: string
  truncated: boolean
}

export interface RouteSelectionEvent {
  type: 'routeSelection'
  /** The chosen route's key, or null when none matched. */
  selectedRoute: string | null
  /** Keys of the routes whose matches were tried, in order. */
  evaluatedRoutes: string[]
}

export interface PolicySelectionEvent {
  type: 'policySelection'
  phase: 'gateway' | 'route' | 'backend'
  /** Every policy key of the phase: its IR (secrets redacted), or null when not set. */
  effectivePolicy: Record<string, unknown>
  /** Policies another resource attached (a PorticoPolicy): policy key → where it came from. */
  sources?: Record<string, string>
}

export interface PolicyEvent {
  type: 'policy'
  kind: TracedPolicyKind
  result: { type: 'apply' | 'skip' | 'deny', details: string }
  /** remoteRateLimit: what was sent to the rate limit service. */
  request?: unknown
}

export interface AuthorizationResultEvent {
  type: 'authorizationResult'
  /** What was decided: the HTTP request, or an MCP item. */
  scope: string
  rules: Array<{ rule: string, mode: 'allow' | 'deny' | 'require', matched: boolean, error?: string }>
  result: 'allow' | 'deny'
}

export interface BackendCallStartEvent {
  type: 'backendCallStart'
  target: string
  /** `hbone`: the backend is a mesh workload reached through an HBONE tunnel (absent: plain). */
  mesh?: 'hbone'
  /** With `mesh`: the SPIFFE ID the peer must present (several, comma-separated, for several). */
  peerIdentity?: string
}

export interface BackendCallResultEvent {
  type: 'backendCallResult'
  /** The backend's status, or null when the call failed before a response. */
  status: number | null
  error: string | null
  /** `hbone`: the call went through an HBONE tunnel. */
  mesh?: 'hbone'
  /** With `mesh` and a status: the peer identity the tunnel's mTLS handshake verified (only a peer presenting it carries a call). */
  peerIdentity?: string
}

/**
 * An InferencePool's endpoint picker at work (pipeline/inference-pool.ts): the pick (or why
 * there is none), an endpoint refused for being outside the pool, a fallback to the next
 * endpoint of the list after a connection failure.
 */
export interface InferencePickEvent {
  type: 'inferencePick'
  pool: string
  /** The picker's host:port. */
  picker: string
  /**
   * picked: the picker chose; immediate: it answered the request itself (503, 429); failOpen:
   * it failed and the gateway chose (round robin); failClose: it failed and the client got 503;
   * fallback: the endpoint tried before failed to connect and the next one of the list is tried.
   */
  outcome: 'picked' | 'immediate' | 'failOpen' | 'failClose' | 'fallback'
  /** The endpoint the request goes to now. */
  endpoint?: string
  /** The ordered fallback list (the endpoint first). */
  endpoints?: string[]
  /** Where the pick came from: the header mutation, the envoy.lb metadata, or the gateway (failOpen). */
  source?: 'header' | 'metadata' | 'gateway'
  /** Entries of the picker's list refused: not ip:port, or not of the pool (never connected to). */
  refused?: string[]
  /** How long the picker took, ms. */
  latencyMs?: number
  /** Why the picker failed, or why the fallback happened. */
  reason?: string
  /** fallback: the endpoint that failed. */
  from?: string
  /** immediate: the status the picker answered. */
  status?: number
}

export interface RetryEvent {
  type: 'retry'
  reason: string
  /** false: the request cannot be retried (its body is too large to replay). */
  enabled?: false
  /** The try about to start (2 is the first retry) and how many are allowed in all. */
  attempt?: number
  attempts?: number
  backend?: string
  backoffMs?: number
  /** A failover across an ai backend's providers (its groups), not the route's retry policy. */
  failover?: true
  /** The provider that failed (its backend name, `<ai name>/<provider name>`), for a failover. */
  provider?: string
}

export interface MirrorEvent {
  type: 'mirror'
  backend: string
  sent: boolean
  /** Why the copy was not sent. */
  reason?: string
}

/** The model API chose a model for the request (pipeline/models.ts). */
export interface ModelSelectionEvent {
  type: 'modelSelection'
  /** The model the client asked for. */
  requestModel: string
  /** The model whose entry matched the request ('' when none did). */
  matched: string
  /** The concrete model chosen; for a failover virtual model, that model (the backendCallStart and retry events that follow say which target served). */
  model: string
  /** Each virtual model's step, in order: `smart: weight 3 of 4`, `router: rule 2`, `safe: failover`. */
  why: string[]
}

export interface LlmRequestEvent {
  type: 'llmRequest'
  provider: string
  /** The client's wire format, told by its path (`openai-chat`, `anthropic-messages`, ...); absent when both sides are OpenAI chat completions (as before formats were told apart). */
  inputFormat?: string
  /** The provider's wire format; the request is translated when it differs from inputFormat. */
  providerFormat?: string
  /** `model` as the client sent it ('' when the backend sets it). */
  requestModel: string
  model: string
  streaming: boolean
  path: string
}

/**
 * One decision of an ai backend's promptGuard (llm/guard/): which guard, on which side,
 * what it did. Never carries the text it looked at: `details` names the rules that matched
 * (`Email`, a pattern's name), the service's reason, or why the guard failed.
 */
export interface GuardrailEvent {
  type: 'guardrail'
  direction: 'request' | 'response'
  guard: 'regex' | 'webhook' | 'openAIModeration'
  /** `error`: the guard failed; `failureMode` says whether the text went on (open) or was refused (closed). */
  action: 'pass' | 'mask' | 'reject' | 'error'
  details?: string
  failureMode?: 'open' | 'closed'
  /** Position of the guard in its list (promptGuard.request[i] / response[i]). */
  index: number
}

export type LlmResponseEvent =
  | {
    type: 'llmResponse', responseModel: string | null, inputTokens: number | null, outputTokens: number | null, totalTokens: number,
    /** Parts of the input and output counts, when the answer told them. */
    cachedInputTokens?: number, cacheCreationInputTokens?: number, reasoningTokens?: number,
    /** With `pricing` on the backend: the call's exact cost (a decimal) and its currency; null when no rate matches the model. */
    cost?: string | null, currency?: string
  }
  | { type: 'llmResponse', usage: null, reason: string | null }

/** An MCP target failed after the answer's head was sent (an SSE stream): its JSON-RPC error. */
export interface McpTargetErrorEvent {
  type: 'mcpTargetError'
  code: number
  error: string
}

export interface RequestFinishedEvent {
  type: 'requestFinished'
  /** A gRPC request: the service and method called and the grpc-status it ended with (null: none came). */
  grpc?: { service: string, method: string, status: number | null }
  /** A forwarded connection (TCP and TLS listeners): the bytes each way and how it ended. */
  stream?: StreamOutcome
}

/**
 * A connection on a TCP or TLS listener, after its client hello was read (TLS): the first
 * event of its trace after `requestStarted`. Connections are traced like requests; the
 * watcher's filter sees method `TCP` or `TLS`, the SNI name as host and an empty path.
 */
export interface ConnectionStartedEvent {
  type: 'connectionStarted'
  /** `udp`: a UDP flow's first datagram (stream/udp-proxy.ts). */
  protocol: 'tcp' | 'tls' | 'udp'
  listener: string
  /** TLS: the SNI name of the client hello (null: none sent). */
  serverName?: string | null
  /** TLS: the ALPN protocols the client offered. */
  alpn?: string[]
  /** TLS: whether the listener passes the connection through or terminates it. */
  mode?: 'Terminate' | 'Passthrough'
  source: { address: string, port: number }
}

export interface StreamOutcome {
  bytesFromClient: number
  bytesToClient: number
  /** `Done`, or why the connection was refused or cut (the access log's reason). */
  reason: string
}

export type TraceMessage =
  | RequestStartedEvent
  | ConnectionStartedEvent
  | RequestSnapshotEvent
  | ResponseSnapshotEvent
  | BodySnapshotEvent
  | RouteSelectionEvent
  | PolicySelectionEvent
  | PolicyEvent
  | AuthorizationResultEvent
  | BackendCallStartEvent
  | BackendCallResultEvent
  | RetryEvent
  | InferencePickEvent
  | MirrorEvent
  | LlmRequestEvent
  | ModelSelectionEvent
  | LlmResponseEvent
  | GuardrailEvent
  | McpTargetErrorEvent
  | RequestFinishedEvent

export type TraceEventType = TraceMessage['type']

/** The message of event type `T`. */
export type TraceMessageOf<T extends TraceEventType> = Extract<TraceMessage, { type: T }>
