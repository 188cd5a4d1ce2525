/**
 * Fixed attribute layouts: the attributes of the spans every traced request has (its server
 * span, its backend call's client span), named once here, so a span record carries their
 * values alone, in this order (trace/span-record.ts). The request's thread and the export
 * thread both load this module, so a layout's id means the same keys on both.
 *
 * Why: a recorded request's two span records are structured-cloned to the export thread,
 * and with every attribute written as a key and a value the keys were half of what was
 * cloned -- ~13,000 instructions a request of 100 % sampling went to the clone alone
 * (bench/tracing-instructions.ts --functions). Other spans' attributes (MCP, gRPC, a
 * policy's call, CEL fields) stay key/value pairs.
 *
 * Imports nothing: trace/otel.ts, the hot path's contact with tracing, loads it.
 */

export interface AttributeLayout {
  /** Written into the record; 0 means no layout. */
  readonly id: number
  readonly keys: readonly string[]
}

/** A layout's values: one per key, in the layout's order; undefined leaves the attribute out. */
export type LayoutValues = Array<string | number | boolean | string[] | undefined>

/** An outgoing HTTP call (semconv's HTTP client span): what httpClientAttributes sets. */
export const HTTP_CLIENT_KEYS = ['http.request.method', 'http.request.method_original', 'server.address', 'server.port', 'url.full'] as const

/** A request's server span (trace/otel.ts endServerSpan). */
export const SERVER_HTTP: AttributeLayout = {
  id: 1,
  keys: [
    'http.request.method', 'http.request.method_original', 'url.scheme', 'url.path', 'url.query', 'server.address', 'server.port',
    'client.address', 'network.protocol.version', 'user_agent.original', 'http.route', 'http.response.status_code',
    'portico.gateway', 'portico.route', 'portico.backend', 'portico.reason'
  ]
}

/** The backend call's client span (pipeline/backend-call.ts): an HTTP client span, its retry count and backend. */
export const BACKEND_CALL: AttributeLayout = {
  id: 2,
  keys: [...HTTP_CLIENT_KEYS, 'http.request.resend_count', 'portico.backend']
}

/** Every layout at its id. */
export const LAYOUTS: ReadonlyArray<AttributeLayout | undefined> = [undefined, SERVER_HTTP, BACKEND_CALL]
