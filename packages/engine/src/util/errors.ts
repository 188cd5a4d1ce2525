/**
 * Errors with stable codes, in the style of undici and fastify: callers branch on `code`,
 * people read `message`. Every code Portico throws is in PORTICO_ERRORS below -- one table,
 * as fastify's errors.js and undici's errors.js keep theirs -- so the constructor takes only
 * a code from it (a misspelt code is a compile error) and test/errors.test.ts checks that
 * every code in the table is used somewhere.
 *
 * This module imports nothing: it is exported alone as `@portico/engine/errors` for packages
 * that must not load the engine barrel (logs, the controller).
 */

export interface PorticoErrorSpec {
  /** The message when the thrower gives none; call sites usually say more (the value, the limit). */
  readonly message: string
  /** The HTTP status an admin or API endpoint answers with, where the error reaches a client as one. */
  readonly status?: number
}

export const PORTICO_ERRORS = {
  // Config and its values (thrown while loading or compiling a config).
  PORTICO_CONFIG_TOO_LARGE: { message: 'config file too large (--max-config-size)' },
  PORTICO_REFERENCED_FILE: { message: 'a file the config names is not a regular file within the size limit' },
  PORTICO_INVALID_IR: { message: 'config rejected by the engine' },
  PORTICO_BAD_DURATION: { message: 'invalid duration (use e.g. 500ms, 10s, 1m)' },
  PORTICO_BAD_REGEX: { message: 'regular expression not supported (RE2 syntax only)' },
  PORTICO_BAD_CEL: { message: 'invalid CEL expression' },
  PORTICO_BAD_SESSION_KEY: { message: 'a session key is 64 hex digits (256 bits)' },
  PORTICO_BAD_LOG_LEVEL: { message: 'invalid log level', status: 400 },
  PORTICO_BAD_JWKS: { message: 'not a JWKS: no "keys" list' },
  PORTICO_TRANSFORMATION_VALUE: { message: 'a transformation value cannot be a header value' },
  PORTICO_CEL_EVAL: { message: 'CEL evaluation error' },
  PORTICO_VIRTUAL_MODEL: { message: 'a virtual model does not resolve to a model of the route' },
  PORTICO_SHARED_STATE_MISMATCH: { message: 'the primary\'s shared state does not fit this config' },

  // Authentication providers.
  PORTICO_OIDC_DISCOVERY: { message: 'OIDC discovery failed' },
  PORTICO_OIDC_LOGIN: { message: 'OIDC login failed' },
  PORTICO_JWKS_UNAVAILABLE: { message: 'signing keys unavailable' },
  PORTICO_AUTH_SERVICE_TIMEOUT: { message: 'the authorization service did not answer in time' },

  // Services the gateway calls beside the backend (ext_proc, rate limit, EPP) over gRPC.
  PORTICO_GRPC_CONNECT: { message: 'no gRPC connection to the service' },
  PORTICO_EXT_PROC_DECODE: { message: 'malformed protobuf message from the ext_proc service' },

  // LLM providers: their settings and the cloud credentials the gateway fetches for them.
  PORTICO_LLM_PROVIDER_SETTINGS: { message: 'invalid LLM provider settings' },
  PORTICO_LLM_CREDENTIALS: { message: 'cloud credentials for an LLM provider unavailable' },

  // A request's backend call: abort reasons, so the pipeline can tell them from transport errors.
  PORTICO_DOWNSTREAM_CLOSED: { message: 'client closed the connection' },
  PORTICO_DOWNSTREAM_SLOW: { message: 'client reads the answer too slowly' },
  // The route's whole-request budget (or the client's grpc-timeout): never retried, it is the
  // client's deadline. The per-try backend timeout is retried when the route retries
  // (HTTPRouteRetryBackendTimeout). pipeline/resiliency.ts branches on these two codes.
  PORTICO_REQUEST_TIMEOUT: { message: 'request timeout', status: 504 },
  PORTICO_BACKEND_TIMEOUT: { message: 'upstream call timeout', status: 504 },
  PORTICO_REQUEST_BODY_TIMEOUT: { message: 'request body idle timeout', status: 408 },
  PORTICO_STREAM_IDLE_TIMEOUT: { message: 'response stream idle timeout' },
  PORTICO_NO_HEALTHY_ENDPOINT: { message: 'every endpoint is ejected (passive health)', status: 503 },
  PORTICO_RETRY: { message: 'retried' },
  PORTICO_RESPONSE_REPLACED: { message: 'response replaced by a policy' },

  // The HTTP/1.1 backend client (http/h1-pool.ts): transport failures with their own codes.
  PORTICO_UPSTREAM_PROTOCOL: { message: 'invalid response from backend', status: 502 },
  PORTICO_UPSTREAM_CLOSED: { message: 'backend closed the connection before the response was complete' },
  PORTICO_UPSTREAM_CONNECT_TIMEOUT: { message: 'connect timeout' },
  PORTICO_UPSTREAM_HEADERS_TIMEOUT: { message: 'no response headers from backend in time', status: 504 },
  PORTICO_REQUEST_LENGTH_MISMATCH: { message: 'request body does not match content-length', status: 400 },
  PORTICO_INVALID_UPSTREAM_HEADER: { message: 'invalid request header for backend' },
  PORTICO_POOL_CLOSED: { message: 'backend connection pool closed' },

  // HBONE tunnels to mesh workloads (mesh/hbone-pool.ts).
  PORTICO_MESH_NO_IDENTITY: { message: 'no mesh identity: the gateway holds no workload certificate', status: 503 },
  PORTICO_MESH_PEER_IDENTITY: { message: 'the mesh peer presented another identity', status: 503 },
  PORTICO_HBONE_FAILED: { message: 'HBONE connection to the mesh peer failed', status: 503 },
  PORTICO_HBONE_CONNECT_REFUSED: { message: 'the mesh peer refused the HBONE CONNECT', status: 502 },
  PORTICO_MESH_BAD_CERTIFICATE: { message: 'the mesh certificate or key is unusable' },
  PORTICO_MESH_CA_SETTINGS: { message: 'invalid mesh CA identity settings' },
  PORTICO_MESH_CA_FILE: { message: 'the mesh root or service-account token is unreadable' },
  PORTICO_MESH_CA_ISSUED: { message: 'the mesh CA issued a certificate of another identity' },

  // TCP/TLS stream proxying (stream/): why a connection ended is its StreamReason, this the error.
  PORTICO_STREAM_FAILED: { message: 'stream connection failed' },

  // MCP targets.
  PORTICO_MCP_MESSAGE_TOO_LARGE: { message: 'message larger than maxMessageSize' },
  PORTICO_MCP_TARGET_UNAVAILABLE: { message: 'MCP target unavailable (not started, failed or closed)' },
  PORTICO_MCP_TRANSPORT_CLOSED: { message: 'transport closed' },
  PORTICO_MCP_TIMEOUT: { message: 'the MCP target did not answer in time' },
  PORTICO_MCP_UPSTREAM_HTTP: { message: 'the MCP target answered with an HTTP error' },
  PORTICO_MCP_UPSTREAM_STREAM: { message: 'the answer stream ended before the answer' },
  PORTICO_MCP_PROTOCOL: { message: 'the MCP target broke the protocol' },
  PORTICO_MCP_ABORTED: { message: 'the request to the MCP target was abandoned' },

  // The proxy process and its admin server.
  PORTICO_BIND_FAILED: { message: 'cannot listen' },
  PORTICO_TRACE_DISABLED: { message: 'tracing is disabled (DEBUG_TRACE=off)' },
  PORTICO_PROFILE_BUSY: { message: 'a CPU profile is already being taken', status: 409 },
  PORTICO_ADMIN_BAD_REQUEST: { message: 'bad request', status: 400 },
  PORTICO_NOT_A_LISTENER: { message: 'not a listener port of this proxy', status: 400 },
  PORTICO_UNKNOWN_MCP_SESSION: { message: 'no such MCP playground session', status: 404 }
} as const satisfies Record<string, PorticoErrorSpec>

export type PorticoErrorCode = keyof typeof PORTICO_ERRORS

export class PorticoError extends Error {
  readonly code: PorticoErrorCode
  constructor (code: PorticoErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? PORTICO_ERRORS[code].message, options)
    this.name = 'PorticoError'
    this.code = code
  }

  /** The table's HTTP status for this code, if it has one. */
  get status (): number | undefined {
    return (PORTICO_ERRORS[this.code] as PorticoErrorSpec).status
  }
}

/** True for a PorticoError (of `code`, when given); narrows `err` so `err.code` is typed. */
export function isPorticoError<C extends PorticoErrorCode> (err: unknown, code?: C): err is PorticoError & { readonly code: C } {
  return err instanceof PorticoError && (code === undefined || err.code === code)
}
