/**
 * IR of the traffic policies that call out to services (remote rate limiting, external
 * processing) and of the route and backend resiliency settings (retries, mirrors, backend
 * TLS, passive health). Plain JSON-safe data, as every IR.
 */

/** `remoteRateLimit`: Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit). */
export interface RemoteRateLimitIR {
  /** The service: `http://host:port` (plaintext gRPC) or `https://host:port` (TLS). */
  host: string
  /** RateLimitRequest.domain. */
  domain: string
  /**
   * Each descriptor's entries (values are CEL expressions, evaluated per request) and what
   * it counts: `requests` — one hit per request; `tokens` — checked (hits_addend 0) with the
   * request, then the LLM tokens of an `ai` backend's answer sent as hits_addend.
   */
  descriptors: Array<{
    entries: Array<{ key: string, value: string }>
    type: 'requests' | 'tokens'
    /** CEL giving `{requestsPerUnit, unit}`: sent as the descriptor's `limit` (agentgateway's limitOverride). */
    limitOverride?: string
  }>
  /** `failClosed`: a service that fails or is too slow answers 500; `failOpen`: the request goes on. */
  failureMode: 'failClosed' | 'failOpen'
  timeoutMs: number
}

/** `extProc`: Envoy's external processing protocol (envoy.service.ext_proc.v3.ExternalProcessor/Process). */
export interface ExtProcIR {
  /** The service: `http://host:port` (plaintext gRPC) or `https://host:port` (TLS). */
  host: string
  /** `failClosed`: a failing, closed-with-error or too slow processor answers 500; `failOpen`: processing stops, the request goes on unchanged. */
  failureMode: 'failClosed' | 'failOpen'
  /** How long to wait for each answer of the processor. */
  messageTimeoutMs: number
  processingMode: {
    requestHeaderMode: 'send' | 'skip'
    responseHeaderMode: 'send' | 'skip'
    /**
     * Envoy's BodySendMode: none; buffered (whole, one message); streamed (each chunk as it
     * comes, each answered); fullDuplexStreamed (chunks and answers both ways at once; the
     * processor's streamed_response chunks are the new body). http/ext-proc-request-phase.ts.
     */
    requestBodyMode: 'none' | 'buffered' | 'streamed' | 'fullDuplexStreamed'
    responseBodyMode: 'none' | 'buffered' | 'streamed' | 'fullDuplexStreamed'
    /** Whether the processor's mode_override (on the request headers answer) is honoured; absent = false. */
    allowModeOverride?: boolean
  }
  /** Largest body held for or from the processor, in every body mode (request: 413 above; response: a failure). */
  maxBodyBytes: number
}

/** Gateway API HTTPRouteRetry. */
export interface RetryIR {
  /** Retries after the first try (Gateway API `attempts`): 2 = at most 3 calls. */
  attempts: number
  /** Backend statuses that are retried; connection failures always are. */
  codes: number[]
  /** Wait before each retry. */
  backoffMs: number
}

/** Gateway API RequestMirror: a copy of each request (or of `percentage` % of them) goes to another backend; its answer is ignored. */
export interface RequestMirrorIR {
  /** Key into ProxyIR.backends. */
  backend: string
  /** 0..100. */
  percentage: number
}

/** TLS to a backend (BackendTLSPolicy-like): trusted roots, SNI/verified name, client certificate. */
export interface BackendTlsIR {
  /** PEM CA bundle; absent = the system's roots. */
  ca?: string
  /** Server name sent as SNI and checked against the certificate; absent = the backend host. */
  serverName?: string
  /**
   * Names the backend's certificate must carry instead of serverName (then only the SNI):
   * one match is enough (Gateway API BackendTLSPolicy subjectAltNames). Hostname matches a
   * DNS SAN (wildcards as in RFC 6125), URI a URI SAN exactly.
   */
  subjectAltNames?: BackendTlsSanIR[]
  /** Client certificate and key (PEM) for mutual TLS. */
  cert?: string
  key?: string
  /** Skip verification of the backend's certificate. */
  insecure?: boolean
}

export interface BackendTlsSanIR {
  type: 'Hostname' | 'URI'
  value: string
}

/** Passive health (outlier ejection) of a backend's endpoints. */
export interface BackendHealthIR {
  /** Consecutive failures (connection errors, timeouts, 5xx) that eject an endpoint. */
  consecutiveFailures: number
  /** How long an ejected endpoint is skipped. */
  ejectionMs: number
  /** A 429 answer counts as a failure too (a rate-limited LLM provider of failover groups). */
  rateLimited?: true
  /**
   * Each ejection in a row (no success in between) lasts one `ejectionMs` longer: the k-th
   * lasts k × ejectionMs, at most MAX_BACKOFF × (agentgateway's multiplicative backoff).
   */
  backoff?: true
}
