/**
 * Policy IR: every policy kind's plain JSON-safe data, as written in config or pushed by the
 * controller, and the phases policies attach at. The compiled, runtime side of a policy (what
 * it does to a RequestContext) lives in request/policy.ts.
 */

import type { ExtProcIR, RemoteRateLimitIR } from './traffic.ts'

/**
 * Every policy kind a trace reports in `policySelection.effectivePolicy`, in the order the
 * seed lists them. The trace always carries exactly these keys, `null` where not applied.
 */
export const EFFECTIVE_POLICY_KEYS = [
  'localRateLimit',
  'remoteRateLimit',
  'authorization',
  'jwt',
  'oidc',
  'basicAuth',
  'apiKey',
  'extAuthz',
  'extProc',
  'transformation',
  'csrf',
  'directResponse',
  'requestHeaderModifier',
  'responseHeaderModifier',
  'requestRedirect',
  'urlRewrite',
  'cors'
] as const

export type PolicyKind = typeof EFFECTIVE_POLICY_KEYS[number]

export type PolicyPhase = 'gateway' | 'route' | 'backend'

/** Gateway API HTTPHeaderFilter semantics: set, then add, then remove. */
export interface HeaderModifierIR {
  add?: Record<string, string>
  set?: Record<string, string>
  remove?: string[]
}

export interface DirectResponseIR {
  status: number
  body?: string
  headers?: Record<string, string>
}

/** Signing keys: fetched from a URL (cached, refreshed) or given (inline, or read from a file at load). */
export type JwksIR = { url: string } | { keys: { keys: Array<Record<string, unknown>> } }

export interface JwtProviderIR {
  issuer: string
  audiences: string[]
  jwks: JwksIR
  /** Allowed signature algorithms; default all asymmetric ones. */
  algorithms?: string[]
  /** Clock skew tolerated on exp/nbf, seconds (default 30). */
  leewaySeconds?: number
}

/** Where a bearer token is read from. */
export type TokenLocationIR =
  | { header: string, prefix: string }
  | { query: string }
  | { cookie: string }

/**
 * `strict`: a valid token is required; `optional`: validated when present (an invalid one
 * is rejected); `permissive`: never rejects, claims are recorded when valid.
 */
export type AuthMode = 'strict' | 'optional' | 'permissive'

export interface JwtAuthIR {
  mode: AuthMode
  providers: JwtProviderIR[]
  location: TokenLocationIR
  /** Forward the token to the backend (default: removed once validated). */
  keepToken: boolean
  /** Copies claims into request headers for the backend. */
  claimsToHeaders: Array<{ claim: string, header: string }>
}

/** The seed's MCP token validation: a JWT provider plus the OAuth protected-resource metadata. */
export interface McpAuthenticationIR {
  mode: AuthMode
  provider: JwtProviderIR
  /** RFC 9728 document: `scopes_supported` and any extra fields. */
  scopesSupported: string[]
  resourceMetadata: Record<string, unknown>
}

export interface BasicAuthIR {
  /** `strict`: credentials required; `optional`: checked when sent. */
  mode: 'strict' | 'optional'
  realm: string
  /** The htpasswd file's content (user:hash lines). Redacted in dumps. */
  htpasswd: string
}

export interface ApiKeyIR {
  mode: AuthMode
  location: { header: string, prefix: string } | { query: string }
  /** Keys by SHA-256 (`sha256:<hex>`), never in clear. */
  keys: Array<{ name: string, keyHash: string, metadata: Record<string, unknown> }>
}

export type AuthorizationRuleIR = { allow: string } | { deny: string } | { require: string }

export interface AuthorizationIR {
  rules: AuthorizationRuleIR[]
}

/**
 * `extAuthz`: ask an external service (Envoy's gRPC Authorization/Check, or plain HTTP)
 * whether a request may pass, and apply the header changes it answers with.
 */
export interface ExtAuthzIR {
  /** The service: `http://host:port` (plaintext) or `https://host:port` (TLS). */
  host: string
  /** http allowedResponseHeaders null: every header of a 2xx answer but framing ones and Host (Gateway API's empty list). */
  protocol: { grpc: Record<string, never> } | { http: { pathPrefix: string, allowedResponseHeaders: string[] | null } }
  /** `deny`: a service that fails or does not answer in time denies (403); `allow`: lets the request through. */
  failureMode: 'deny' | 'allow'
  timeoutMs: number
  /** Lower-case names of the request headers sent; null = all. */
  includeRequestHeaders: string[] | null
  /** Buffer the body (up to maxBytes; 413 above) and send it; packAsBytes: gRPC raw_body instead of body. */
  includeRequestBody: { maxBytes: number, packAsBytes: boolean } | null
  /** gRPC `context_extensions`. */
  contextExtensions: Record<string, string>
}

/** `oidc`: browser login (authorization code flow with PKCE) and an encrypted session cookie. */
export interface OidcIR {
  issuer: string
  clientId: string
  /** Absent for a public client (PKCE only). Redacted in dumps. */
  clientSecret?: string
  /** Path on the gateway (the base URL comes from the request) or an absolute URL. */
  redirectUri: string
  scopes: string[]
  cookieName: string
  /** 64 hex digits; absent: derived from the process session key, or random per process. Redacted in dumps. */
  sessionKey?: string
  logoutPath: string
  postLogoutRedirectUri?: string
  /** Session lifetime; absent: until the ID token expires. */
  sessionTtlSeconds?: number
}

/**
 * `localRateLimit`: token buckets kept in the proxy. A request needs a token in every
 * bucket; when one is empty it is refused with 429. Each bucket starts full and gets
 * `tokensPerFill` tokens (up to `maxTokens`) at every `fillIntervalMs` boundary.
 */
export interface LocalRateLimitBucketIR {
  /** `cost` buckets: 0 (their size is `cost.max`). */
  maxTokens: number
  tokensPerFill: number
  fillIntervalMs: number
  /**
   * What a token stands for: `requests` -- one request, taken when it is admitted; `tokens` --
   * one LLM token, taken when an `ai` backend's answer reports its usage; `cost` -- the
   * answer's cost from the backend's `pricing` (`cost` says the budget).
   */
  type: 'requests' | 'tokens' | 'cost'
  /**
   * A CEL expression whose value, per request, names the bucket (one bucket per distinct
   * value, made full when first seen): `jwt.sub`, `apiKey.name`, `llm.model`. Buckets of type
   * tokens and cost see `llm` too. At most `maxKeys` buckets, the least recently used dropped.
   */
  key?: string
  maxKeys?: number
  /** `type: cost`: the budget and what a fill adds, in millionths of `currency` (exact integers). */
  cost?: { maxMicros: number, perFillMicros: number, currency: string }
}

export type LocalRateLimitIR = LocalRateLimitBucketIR[]

/** One side of a `transformation`: CEL expressions (compiled at load) per header and for the body. */
export interface TransformIR {
  /** Lower-case header name -> CEL expression whose value overwrites the header. */
  set?: Record<string, string>
  /** Lower-case header name -> CEL expression whose value is appended to the header. */
  add?: Record<string, string>
  /** Lower-case header names removed. */
  remove?: string[]
  /** CEL expression whose value replaces the body. */
  body?: string
}

export interface TransformationIR {
  request?: TransformIR
  response?: TransformIR
}

/** `csrf`: state-changing requests must come from the request's own origin or one of these (normalized `scheme://host[:port]`). */
export interface CsrfIR {
  additionalOrigins: string[]
}

/** Gateway API HTTPPathModifier: ReplaceFullPath (`full`) or ReplacePrefixMatch (`prefix`). */
export type PathModifierIR = { full: string } | { prefix: string }

/** Gateway API HTTPRequestRedirectFilter (status: 301, 302, 303, 307 or 308). */
export interface RequestRedirectIR {
  scheme?: 'http' | 'https'
  hostname?: string
  port?: number
  path?: PathModifierIR
  status: number
}

/** Gateway API HTTPURLRewriteFilter. */
export interface UrlRewriteIR {
  hostname?: string
  path?: PathModifierIR
}

/** Gateway API HTTPCORSFilter. */
export interface CorsIR {
  /** Origins as `scheme://host[:port]`, `*`, or with a `*` wildcard in the host (`https://*.example.com`). */
  allowOrigins: string[]
  /** Methods (case-sensitive) or `*`. */
  allowMethods: string[]
  /** Lower-case header names or `*`. */
  allowHeaders: string[]
  /** Lower-case header names or `*`. */
  exposeHeaders: string[]
  /** Access-Control-Max-Age in seconds; absent: no header (browsers then use 5 s). */
  maxAge?: number
  allowCredentials: boolean
}

/** The policies implemented so far, by kind. Each kind's IR is JSON-safe. */
export interface PolicyIRByKind {
  requestHeaderModifier: HeaderModifierIR
  responseHeaderModifier: HeaderModifierIR
  directResponse: DirectResponseIR
  jwt: JwtAuthIR
  mcpAuthentication: McpAuthenticationIR
  authorization: AuthorizationIR
  basicAuth: BasicAuthIR
  apiKey: ApiKeyIR
  extAuthz: ExtAuthzIR
  oidc: OidcIR
  remoteRateLimit: RemoteRateLimitIR
  extProc: ExtProcIR
  localRateLimit: LocalRateLimitIR
  transformation: TransformationIR
  csrf: CsrfIR
  requestRedirect: RequestRedirectIR
  urlRewrite: UrlRewriteIR
  cors: CorsIR
}

export type ImplementedPolicyKind = keyof PolicyIRByKind

export type PolicySetIR = { [K in ImplementedPolicyKind]?: PolicyIRByKind[K] }
