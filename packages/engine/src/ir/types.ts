/**
 * The internal representation (IR) every config source produces: the standalone YAML file
 * (config/to-ir.ts) and, in cluster mode, the controller's push. It is plain JSON-safe data --
 * no functions, no RegExp, no class instances -- so it can be golden-tested, dumped at
 * /config_dump and sent over the wire unchanged. The engine compiles it (engine/compile.ts)
 * into the structures the hot path uses.
 *
 * Shape: binds (one per port) hold listeners (told apart by hostname), listeners hold routes,
 * routes reference backends by key. Policies attach at three levels -- gateway (listener),
 * route and backend reference -- and run in that order of phases.
 */

import type { ExtAuthzIR, PolicySetIR } from './policy.ts'
import type { BackendHealthIR, BackendTlsIR, RequestMirrorIR, RetryIR } from './traffic.ts'

export interface ProxyIR {
  /** Changes whenever the content changes; shown in /config_dump and traces. */
  version: string
  binds: BindIR[]
  backends: BackendIR[]
}

/**
 * HTTP and HTTPS listeners serve HTTP routes; TCP and TLS listeners forward whole connections
 * (stream routes): TCP as it comes, TLS chosen by SNI and either passed through encrypted or
 * decrypted first (ListenerIR.tlsMode). UDP listeners forward datagrams per client flow
 * (stream/udp-proxy.ts) to their first stream route (Gateway API UDPRoute).
 */
export type ListenerProtocol = 'HTTP' | 'HTTPS' | 'TLS' | 'TCP' | 'UDP'

/** One listening socket. Several listeners (Gateway API style) may share it by hostname. */
export interface BindIR {
  /** `<address>:<port>` -- unique. */
  key: string
  address: string
  port: number
  protocol: ListenerProtocol
  /**
   * PEM material when protocol is HTTPS, or TLS with a terminating listener: the default
   * certificate of the port (a listener's own is picked by SNI).
   */
  tls?: TlsServerIR
  listeners: ListenerIR[]
  /**
   * Milliseconds a client has to send a request head; 0 = no limit; absent = the default
   * (http/frontend.ts). Per port: it runs before the Host header picks a listener.
   */
  requestHeadersTimeoutMs?: number
  /** false: HTTP/1.1 only (no h2 by ALPN, no h2c with prior knowledge). Absent = on. */
  http2?: boolean
}

export interface TlsServerIR {
  cert: string
  key: string
  /**
   * Client certificate validation (mutual TLS); only on a bind's `tls`. It is per port, as
   * Gateway API's spec.tls.frontend is: one handshake policy for every listener of the bind
   * (a listener's own certificate is picked by SNI, the client certificate asked the same way).
   */
  clientValidation?: ClientValidationIR
  /** Oldest TLS version offered; absent = TLSv1.2. */
  minVersion?: TlsVersion
  /** Newest TLS version offered; absent = TLSv1.3. */
  maxVersion?: TlsVersion
  /**
   * TLS 1.2 cipher suites allowed, OpenSSL names in order of preference; absent = Node's
   * defaults. TLS 1.3 suites are always the standard three.
   */
  ciphers?: string[]
}

export type TlsVersion = 'TLSv1.2' | 'TLSv1.3'

/** How a bind checks client certificates (Gateway API FrontendTLSValidation). */
export interface ClientValidationIR {
  /** PEM CA certificates a client certificate must chain to. */
  caCerts: string
  /**
   * AllowValidOnly: a client without a valid certificate fails the handshake.
   * AllowInsecureFallback: a certificate is asked for and checked, but a client without a
   * valid one is served anyway.
   */
  mode: ClientValidationMode
}

export type ClientValidationMode = 'AllowValidOnly' | 'AllowInsecureFallback'

export interface ListenerIR {
  /** `<gateway>` in standalone mode, `<namespace>/<gateway>.<listener>` in cluster mode. */
  key: string
  /** Name of the gateway this listener belongs to (trace `env.gateway`, metrics label). */
  gateway: string
  name: string
  /** Optional hostname (may start with `*.`); requests for other hosts skip this listener. */
  hostname?: string
  protocol: ListenerProtocol
  /**
   * The listener's own certificate (HTTPS listeners sharing a port with different
   * certificates): chosen by SNI against `hostname`. Without it the bind's applies.
   */
  tls?: TlsServerIR
  /** Gateway-phase policies. */
  policies: PolicySetIR
  /**
   * Pre-routing filters (Gateway API listener filters), run in this order before the
   * gateway-phase policies; header changes they make are what route matching reads.
   */
  filters?: { requests: ListenerFilterIR[] }
  /**
   * Where policies came from when another resource attached them (cluster mode: a
   * PorticoPolicy): policy key -> `PorticoPolicy <namespace>/<name>`. Shown by /config_dump,
   * porticoctl and the trace's policySelection; absent when every policy is the resource's own.
   */
  policySources?: Record<string, string>
  /** How the listener treats what clients send; absent fields take the defaults (http/frontend.ts). */
  frontend?: FrontendIR
  /** HTTP routes (HTTP and HTTPS listeners; empty on TCP and TLS ones). */
  routes: RouteIR[]
  /**
   * TLS listeners: `Terminate` decrypts with `tls` (or the bind's) and forwards the plaintext;
   * `Passthrough` forwards the encrypted bytes as they came, the listener and route chosen by
   * the SNI name of the client hello. Absent on other protocols.
   */
  tlsMode?: TlsMode
  /** TCP, TLS and UDP listeners: where connections (or UDP flows) go (Gateway API TCPRoute / TLSRoute / UDPRoute). */
  streamRoutes?: StreamRouteIR[]
  /** UDP listeners: flow settings; absent fields take the defaults (stream/udp-proxy.ts). */
  udp?: UdpListenerIR
}

/** The spec's bound on a listener's filters (Gateway API ListenerFilters.requests MaxItems). */
export const MAX_LISTENER_FILTERS = 16

/** One pre-routing filter of a listener: an external authorization call (at most MAX_LISTENER_FILTERS). */
export interface ListenerFilterIR {
  extAuthz: ExtAuthzIR
}

/** How a UDP listener keeps its flows (a flow: one client address:port and its upstream socket). */
export interface UdpListenerIR {
  /** A flow with no datagram either way for this long is closed; default 60 s (Envoy's udp_proxy idle_timeout). */
  idleTimeoutMs?: number
  /** Most flows at once; a new client past it evicts the flow quiet longest. Default 10,000. */
  maxFlows?: number
}

export type TlsMode = 'Terminate' | 'Passthrough'

/**
 * A route for whole connections. On a TLS listener its hostnames are matched against the
 * client hello's SNI name (most specific wins, as for HTTP hosts); on a TCP listener they are
 * empty and the first route (by `order`) takes every connection. A backend is chosen by weight
 * per connection; backend policies other than the backend's own TLS do not apply.
 */
export interface StreamRouteIR {
  /** Unique within the IR, as RouteIR.key. */
  key: string
  name: string
  namespace?: string
  /** `TCPRoute`, `TLSRoute` or `UDPRoute` in cluster mode; `tcpRoutes` / `tlsRoutes` / `udpRoutes` standalone. */
  kind: 'tcp' | 'tls' | 'udp'
  /** SNI names (TLS listeners; a leading `*.` is a wildcard); empty = any. */
  hostnames: string[]
  /** As RouteIR.hostnameOrigins: what the SNI match ranks by. */
  hostnameOrigins?: string[]
  /** Backends by weight; an empty list, or only invalid ones, refuses connections. */
  backends: BackendRefIR[]
  /** Tie-breaker, as RouteIR.order. */
  order: number
}

/** Client-facing settings of a listener. */
export interface FrontendIR {
  /** Milliseconds a streamed request body may go without a byte; 0 = no limit. */
  requestBodyIdleTimeoutMs?: number
  /** Bytes per second a streamed request body must bring, over each idle period, until the response begins; 0 = none. */
  requestBodyMinRate?: number
  /** Default limit on each backend call's wait for response headers (routes without timeouts); 0 = none. */
  backendRequestTimeoutMs?: number
  /** Milliseconds a streamed response may go without progress; 0 = no limit. */
  streamIdleTimeoutMs?: number
  /** Proxies in front whose X-Forwarded-Proto/-Host are trusted; 0 = none (they are replaced). */
  xffNumTrustedHops?: number
  /** Upgrade protocols forwarded (lower case). */
  upgrades?: string[]
  /** How request paths are normalised before matching (http/request-target.ts). */
  path?: PathNormalizationIR
  /** This listener's tracing sampling, over config.tracing's (absent fields: the global ones). */
  tracing?: SamplingIR
}

/** Head sampling, as config.tracing's randomSampling / clientSampling (true, false or a share). */
export interface SamplingIR {
  randomSampling?: boolean | number
  clientSampling?: boolean | number
}

/**
 * What to do with `%2F` / `%5C` (and a raw `\`) in a request path -- Envoy's
 * `path_with_escaped_slashes_action`, named as Envoy Gateway's ClientTrafficPolicy names it.
 */
export type EscapedSlashesAction = 'UnescapeAndRedirect' | 'UnescapeAndForward' | 'RejectRequest' | 'KeepUnchanged'

/** Path normalisation of a listener (http/request-target.ts). Absent fields take the defaults. */
export interface PathNormalizationIR {
  /** Default UnescapeAndRedirect. */
  escapedSlashesAction?: EscapedSlashesAction
  /** Merge runs of slashes (`//a` -> `/a`); default true. */
  mergeSlashes?: boolean
}

export interface RouteIR {
  /** Unique within the IR: `name`, or `<namespace>/<name>`, plus `.<rule>` for multi-rule routes. */
  key: string
  name: string
  namespace?: string
  ruleName?: string
  /** Route hostnames (already intersected with the listener's in cluster mode); empty = any. */
  hostnames: string[]
  /**
   * Cluster mode: the route's own hostname each of `hostnames` came from, in the same places
   * (the most specific one when several intersect to the same name). Routes sharing a served
   * hostname rank by these first (Gateway API GatewayRouteHostnameIntersectionPrecedence: a
   * route for `abc.example.com` beats one for `*.example.com` that the listener narrowed to
   * `abc.example.com`). Absent, or an entry missing: the served hostname itself.
   */
  hostnameOrigins?: string[]
  /** At least one; a route without matches gets `pathPrefix: /`. */
  matches: RouteMatchIR[]
  /** Route-phase policies. */
  policies: PolicySetIR
  /**
   * Where policies came from when another resource attached them (cluster mode: a
   * PorticoPolicy): policy key -> `PorticoPolicy <namespace>/<name>`. Shown by /config_dump,
   * porticoctl and the trace's policySelection; absent when every policy is the resource's own.
   */
  policySources?: Record<string, string>
  backends: BackendRefIR[]
  /** Gateway API HTTPRouteTimeouts, in milliseconds; absent = no limit. */
  timeouts?: RouteTimeoutsIR
  /** Gateway API HTTPRouteRetry; absent = no retries. */
  retry?: RetryIR
  /** Gateway API RequestMirror filters: copies of requests to other backends. */
  mirrors?: RequestMirrorIR[]
  /**
   * Tie-breaker after the Gateway API precedence rules: lower wins. Standalone: position in
   * the file; cluster: creation timestamp then namespace/name.
   */
  order: number
  /**
   * Models served here (the model API, docs/models.md): a request's model picks one
   * (pipeline/models.ts) instead of `backends`, which are then empty. Every model a request can
   * reach is listed, the targets of virtual models included (`attached` false when reachable
   * only through one).
   */
  models?: ModelIR[]
}

/**
 * One model of a route's table. A concrete model is an `ai` backend (`backend`, built by
 * config/ai-to-ir.ts like any); a virtual one chooses another model per request.
 */
export interface ModelIR {
  /** The model's name (a PorticoModel's `<namespace>/<name>` in a cluster): what virtual models name. */
  name: string
  /** The pattern a requested model is matched against: exact, `x-*`, `*-x` or `*`. */
  match: string
  visibility: 'Public' | 'Internal'
  /** Attached to this route or listener (selectable by `match` when Public); false: only a virtual model's target. */
  attached: boolean
  backend?: BackendRefIR
  virtual?: VirtualModelIR
}

export type VirtualModelIR =
  | { kind: 'weighted', targets: Array<{ model: string, weight: number }> }
  /** `groups`: the targets' backends (each a failover provider, passive health on), `models` their names, in the same places. */
  | { kind: 'failover', groups: FailoverProviderIR[][], models: string[][] }
  | { kind: 'conditional', rules: Array<{ when: string, model: string }>, fallback: string }

export interface RouteTimeoutsIR {
  /** Whole request, from arrival to the end of the response headers; 504 when exceeded. 0 = none. */
  requestMs?: number
  /** Each backend call, until its response headers; 504 when exceeded. 0 = none. */
  backendRequestMs?: number
  /** Over the listener's requestBodyIdleTimeoutMs; 0 = none. */
  requestBodyIdleMs?: number
  /** Over the listener's requestBodyMinRate; 0 = none. */
  requestBodyMinRate?: number
  /** Over the listener's streamIdleTimeoutMs; 0 = none. */
  streamIdleMs?: number
}

export interface RouteMatchIR {
  path: PathMatchIR
  method?: string
  headers: ValueMatchIR[]
  query: ValueMatchIR[]
}

export type PathMatchIR =
  | { kind: 'exact', value: string }
  | { kind: 'prefix', value: string }
  | { kind: 'regex', value: string }

export interface ValueMatchIR {
  /** Header names are lower-cased; query names kept as written. */
  name: string
  kind: 'exact' | 'regex'
  value: string
}

export interface BackendRefIR {
  /** Key into ProxyIR.backends. A ref to a missing or invalid backend answers 500. */
  backend: string
  /** Relative weight, default 1; 0 never selected. */
  weight: number
  /** Backend-phase policies for this reference. */
  policies: PolicySetIR
  /**
   * Where policies came from when another resource attached them (cluster mode: a
   * PorticoPolicy): policy key -> `PorticoPolicy <namespace>/<name>`. Shown by /config_dump,
   * porticoctl and the trace's policySelection; absent when every policy is the resource's own.
   */
  policySources?: Record<string, string>
  /**
   * An `ai` backend's failover groups (agentgateway's `groups`), in priority order: each
   * provider is a backend of its own with its own policies. `backend` and `policies` above are
   * the first provider's. A request goes to the first group with a provider not ejected by
   * passive health (round robin within a group) and, when that provider fails before the client
   * got a byte, to the next one (pipeline/failover.ts).
   */
  failover?: FailoverProviderIR[][]
}

/** One provider of a failover group: its backend (kind `ai`) and its backend-phase policies. */
export interface FailoverProviderIR {
  backend: string
  policies: PolicySetIR
  /** As BackendRefIR.policySources (cluster mode: a PorticoPolicy attached to the PorticoBackend). */
  policySources?: Record<string, string>
}

/**
 * `static` -- a fixed host (standalone `host:`); `service` -- a cluster Service resolved to
 * endpoints; `mcp` -- MCP targets served behind one endpoint; `ai` -- an LLM provider's API
 * (its token usage is read from the answers); `invalid` -- kept so requests get a truthful
 * 500 and the trace says why.
 */
export type BackendKind = 'static' | 'service' | 'mcp' | 'ai' | 'invalid'

export interface BackendIR {
  key: string
  kind: BackendKind
  name: string
  namespace?: string
  /** Upstream protocol; `https` wraps connections in TLS. */
  protocol: 'http' | 'https'
  /** HTTP/2 over cleartext with prior knowledge (`http` only; a Service port's appProtocol kubernetes.io/h2c). */
  h2c?: boolean
  /** HTTP/2 offered by ALPN (`https` only; `http.version: HTTP2`): h2 when the server agrees. */
  h2?: boolean
  endpoints: EndpointIR[]
  /** The `host:port` label shown by traces (`backendCallStart.target`) and `porticoctl`. */
  target: string
  /** Why the backend is invalid (only for kind `invalid`). */
  invalidReason?: string
  /** The MCP side of kind `mcp` backends (endpoints are then empty). */
  mcp?: McpBackendSpecIR
  /** The LLM side of kind `ai` backends (endpoints hold the provider's host). */
  ai?: AiBackendSpecIR
  /** TLS settings (protocol is then `https`); absent = system roots, SNI from the host. */
  tls?: BackendTlsIR
  /** Passive health: endpoints failing in a row are ejected for a while. */
  health?: BackendHealthIR
  /**
   * An InferencePool (Gateway API Inference Extension): `endpoints` are the pool's pods (one
   * per target port); each request asks the pool's endpoint picker which one serves it
   * (pipeline/inference-pool.ts).
   */
  inferencePool?: InferencePoolIR
}

/** An InferencePool's endpoint picker (EPP) and how the gateway talks to it. */
export interface InferencePoolIR {
  /** The pool's name as traces and metrics show it. */
  name: string
  picker: {
    /** `host:port` of the EPP's ext_proc gRPC service (traces and metrics name the picker by it). */
    target: string
    /**
     * More addresses of the same picker (its Service's other ready endpoints), after
     * `target`: the channel connects to the first of the list that accepts and moves down
     * the list when a connection fails (gRPC pick_first). IP literals (`ip:port`,
     * `[v6]:port`) of `target`'s family only; absent: `target` alone.
     */
    fallbackTargets?: string[]
    /** TLS to the EPP (null: plaintext). The reference EPP serves a self-signed certificate. */
    tls: { insecureSkipVerify: boolean, ca?: string } | null
    /** FailOpen: the gateway picks an endpoint itself (round robin) when the EPP fails; FailClose: 503. */
    failureMode: 'FailOpen' | 'FailClose'
    /** How long the EPP may take to answer each message. */
    timeoutMs: number
    /** Largest request body sent to the EPP (413 above). */
    maxBodyBytes: number
  }
  /** Send the pool's endpoints to the EPP as the subset hint (envoy.lb.subset_hint). */
  subsetHint: boolean
}

export interface McpBackendSpecIR {
  targets: McpTargetIR[]
  /** `stateful`: sessions with Mcp-Session-Id; `stateless`: every POST stands alone. */
  statefulMode: 'stateful' | 'stateless'
  /** `conditional`: names get `<target>_` only with several targets; `always`: even with one. */
  prefixMode: 'conditional' | 'always'
  /** `failClosed`: a failing target fails fan-out calls; `failOpen`: it is skipped. */
  failureMode: 'failClosed' | 'failOpen'
  /** Validate Origin, and Host on loopback connections (DNS rebinding protection; mcp/client/http.ts). */
  dnsRebindingProtection: boolean
  /** Origins allowed to call (browser clients); empty = any origin unless the protection is on. */
  allowedOrigins: string[]
  /** Largest JSON-RPC POST body accepted (413 above). */
  maxMessageBytes: number
  /**
   * A session whose client closed its GET stream, with nothing in flight, has its upstream
   * sessions closed after this long (mcp/session/expiry.ts); absent in older IR = 60 s.
   */
  sessionIdleTimeoutMs?: number
  /** Most live sessions per proxy; past it the least recently active is closed. Absent = 1000. */
  maxSessions?: number
  /**
   * A session holding stdio processes, with no GET stream open and nothing in flight, is
   * closed after this long without activity (mcp/session/expiry.ts); absent in older IR = 5 min.
   */
  stdioSessionIdleTimeoutMs?: number
}

/** A Google Cloud service-account key's fields the gateway uses (the key file has more; they are kept). */
export type GcpServiceAccountKeyIR = {
  client_email: string
  private_key: string
  private_key_id?: string
  token_uri?: string
  [field: string]: unknown
}

/** LLM wire formats (the names of llm/formats/; repeated here because ir/ sits below llm/). */
export type AiWireFormatIR = 'openai-chat' | 'openai-responses' | 'anthropic-messages' | 'gemini' | 'bedrock-converse'

/** The OpenAI-compatible presets: OpenAI's chat completions at a documented base URL. */
export const AI_OPENAI_COMPATIBLE_PRESETS = ['ollama', 'vllm', 'llamaCpp', 'mistral', 'groq', 'deepseek', 'xai', 'openrouter', 'together', 'fireworks', 'cerebras'] as const
export type AiPresetName = typeof AI_OPENAI_COMPATIBLE_PRESETS[number]

export type AiProviderName = 'openAI' | 'azure' | 'anthropic' | 'gemini' | 'vertex' | 'bedrock' | 'custom' | AiPresetName

/**
 * An LLM provider. The client's format is told by its path (llm/formats/index.ts); when it
 * is the provider's `format` the body passes through (model override and usage aside),
 * else it is translated both ways. The provider adapter (llm/providers/) gives the path
 * and the authorisation.
 */
/** What a guard's refusal says (in the client format's error shape). */
export interface GuardRejectionIR { status: number, message?: string }

export type PromptGuardBuiltin = 'Email' | 'PhoneNumber' | 'CreditCard' | 'Ssn' | 'ApiKey'

/** One guard of `promptGuard.request` / `promptGuard.response` (llm/guard/). */
export type PromptGuardIR =
  | {
    kind: 'regex'
    action: 'reject' | 'mask'
    /** A builtin detector, or a user pattern (checked at load on the linear-time engine) with its mask name and longest match. */
    rules: Array<{ builtin: PromptGuardBuiltin } | { pattern: string, name?: string, maxLength: number }>
    rejection: GuardRejectionIR
  }
  | { kind: 'webhook', url: string, timeoutMs: number, failureMode: 'open' | 'closed', maxResponseBytes: number, rejection: GuardRejectionIR }
  | {
    kind: 'openAIModeration'
    /** The full URL: {baseURL}/v1/moderations. */
    url: string
    model: string
    /** The API key (redacted in dumps by its field name under `auth`). */
    auth?: { apiKey: string }
    timeoutMs: number
    failureMode: 'open' | 'closed'
    rejection: GuardRejectionIR
  }

export interface PromptGuardsIR {
  request: PromptGuardIR[]
  response: PromptGuardIR[]
}

export interface AiBackendSpecIR {
  /** `policies.promptGuard`: guardrails on the request's and the answer's messages (llm/guard/). */
  promptGuard?: PromptGuardsIR
  provider: AiProviderName
  /**
   * A model's `policies.transformations` (the model API): CEL edits of request-body fields, in
   * the client's format before conversion and in the provider's after (llm/body-edits.ts).
   */
  transformations?: { beforeConversion?: BodyEditIR, afterConversion?: BodyEditIR }
  /** The provider's chat wire format. */
  format: AiWireFormatIR
  /** Model that replaces the request's `model`; absent = the request's own. */
  model?: string
  /** `tokenize`: estimate the prompt's tokens before the call and refuse (429) what a tokens rate limit bucket cannot hold. */
  tokenize?: boolean
  /** `pathOverride`: the path (no query) every chat request is sent to, instead of the adapter's. */
  path?: string
  /** `pricing`: what the answer's tokens cost (llm/cost.ts); absent = no cost is computed. */
  pricing?: AiPricingIR
  /** The provider's base path (`/v1`, `/openai/v1` for Groq): operations are appended to it. */
  pathPrefix: string
  /**
   * Azure: a dated `apiVersion` uses the deployments paths; absent or `v1` the v1 API
   * (`/openai/v1/...`), `preview` the same with `?api-version=preview`; `project` (AI Foundry)
   * the project paths `/api/projects/{project}/openai/v1/...`.
   */
  azure?: { apiVersion?: string, deployment?: string, project?: string, auth?: AzureAuthIR }
  /**
   * backendAuth.passthrough: the token the client presented, validated by a jwtAuth or apiKey
   * policy (`RequestAuth.credential`), is sent in the provider's key header.
   */
  passthrough?: true
  /**
   * Vertex AI: `credential` is a service-account key (backendAuth.gcp.credential, inline or
   * read from its file at load; its private key is redacted in every dump); absent =
   * Application Default Credentials.
   */
  vertex?: { projectId: string, region: string, credential?: GcpServiceAccountKeyIR }
  /**
   * Bedrock: the region (endpoint and signing scope), a guardrail sent with every request, and
   * how requests are authorised -- `apiKey` (a Bedrock API key as a bearer token), `keys`
   * (SigV4 with explicit AWS keys) or `chain` (SigV4 with the AWS default credential chain,
   * the default). Secrets here are redacted by field name (ir/redact.ts).
   */
  bedrock?: {
    region: string
    guardrail?: { identifier: string, version: string }
    auth?: { kind: 'apiKey', apiKey: string } | { kind: 'keys', accessKeyId: string, secretAccessKey: string, sessionToken?: string } | { kind: 'chain' }
  }
}

/** Body fields set from CEL expressions (dotted paths, in order), then fields removed. */
export interface BodyEditIR {
  set: Array<{ field: string, expression: string }>
  remove: string[]
}

/**
 * Token prices per million tokens, in millionths of the currency (exact integers: "2.5" per
 * million is 2_500_000), so a cost is an exact integer of 10^-12 currency units.
 */
export interface AiRatesIR {
  input: number
  output: number
  /** Input tokens read from a prompt cache; absent = priced as input. */
  cacheRead?: number
  /** Input tokens written to a prompt cache; absent = priced as input. */
  cacheWrite?: number
  /** Output tokens spent on reasoning; absent = priced as output. */
  reasoning?: number
}

/** `ai.pricing`: the rates of the first `models` entry whose glob matches the model, else `rates`. */
export interface AiPricingIR {
  /** A label carried with every cost (metrics, logs); `USD` unless the config says. */
  currency: string
  rates?: AiRatesIR
  models: Array<{ model: string, rates: AiRatesIR }>
}

/**
 * backendAuth.azure: where Microsoft Entra ID access tokens come from (llm/providers/azure-token.ts).
 * `clientSecret` is redacted by field name in every dump; workload identity reads its
 * environment (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID) when the first
 * token is fetched. `implicit`: workload identity when that environment is set, else managed
 * identity. `authorityHost` / `imdsEndpoint`: absent = AZURE_AUTHORITY_HOST or Azure's own.
 */
export type AzureAuthIR = { authorityHost?: string, imdsEndpoint?: string } & (
  | { kind: 'clientSecret', tenantId: string, clientId: string, clientSecret: string }
  | { kind: 'managedIdentity', userAssignedIdentity?: { clientId: string } | { objectId: string } | { resourceId: string } }
  | { kind: 'workloadIdentity' }
  | { kind: 'implicit' }
)

export type McpTargetIR = McpTargetLimitsIR & (
  | {
    name: string, kind: 'stdio', cmd: string, args: string[], env: Record<string, string>, cwd?: string
    /** Most processes of this target at once on one proxy (a session's each, the warm spare included); absent in older IR = 8. */
    maxProcesses?: number
  }
  | { name: string, kind: 'mcp' | 'sse', url: string }
)

/** What one MCP target may cost the gateway, whatever its transport. */
export interface McpTargetLimitsIR {
  /** Largest message the target may send (stdout line, JSON body, SSE event), in bytes. */
  maxMessageBytes: number
  /** How long a request may wait for the target's answer (progress restarts the clock). */
  requestTimeoutMs: number
}

export interface EndpointIR {
  host: string
  port: number
  /**
   * A mesh (Istio ambient) workload: every connection to it is an HBONE tunnel -- HTTP/2
   * CONNECT over mTLS to `host:hbonePort`, `:authority` = `host:port` -- to a peer that must
   * present `identity` (mesh/hbone-pool.ts). Absent: plain TCP.
   */
  mesh?: EndpointMeshIR
}

export interface EndpointMeshIR {
  /** The peer's SPIFFE ID: `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`. */
  identity: string
  /** The pod's HBONE port; 15008 in Istio. */
  hbonePort: number
}
