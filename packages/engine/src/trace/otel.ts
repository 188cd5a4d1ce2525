/**
 * OpenTelemetry distributed tracing, as the pipeline sees it: a request's server span, the
 * child spans of the calls it makes, and the trace context it propagates. This module is
 * the hot path's only contact with tracing and imports nothing at run time: the SDK
 * (trace/otel-sdk.ts) is loaded only when `config.tracing` is set, and with tracing off
 * `ctx.span` stays null, so no request allocates anything for it.
 *
 * Attribute names follow OpenTelemetry's semantic conventions: HTTP (stable), RPC for the
 * Envoy gRPC services, MCP and GenAI (development status, as of semconv 1.3x).
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import type { SamplingIR } from '../ir/types.ts'
import { BACKEND_CALL, HTTP_CLIENT_KEYS, SERVER_HTTP, type AttributeLayout, type LayoutValues } from './attribute-layouts.ts'

export type SpanAttributeValue = string | number | boolean | string[]
export type SpanAttributes = Record<string, SpanAttributeValue | undefined | null>

/** One span: a request's server span or a call's client span. */
export interface OtelSpan {
  setAttributes(attrs: SpanAttributes): void
  /**
   * The attributes of a fixed layout (trace/attribute-layouts.ts), as values in its key
   * order: what the hot path's spans use, so the keys never travel. One layout a span (a
   * second call replaces the first); setAttributes' keys win over a layout's.
   */
  setLayout(layout: AttributeLayout, values: LayoutValues): void
  /** Marks the span failed: `error.type` and an ERROR status with `message`. */
  setError(type: string, message?: string): void
  updateName(name: string): void
  /** Ends the span now, or at `endTime` (ms since the epoch) for a call timed elsewhere. */
  end(endTime?: number): void
}

/** The server span of one request, sampled or not: it always has a trace id to propagate. */
export interface RequestSpan extends OtelSpan {
  readonly traceId: string
  readonly spanId: string
  /** False for a request the sampler dropped: no child spans, nothing exported. */
  readonly recording: boolean
  /** A child span of this request (a call it makes); null when the request is not recorded. */
  child(name: string, kind: 'client' | 'internal', attrs: SpanAttributes, startTime?: number): OtelSpan | null
  /**
   * Writes the W3C `traceparent`, `tracestate` and `baggage` of a call made under `span`
   * (this request's span when null) into `headers`, replacing the caller's.
   */
  inject(headers: HeaderMap, span?: OtelSpan | null): void
}

/** What became of recorded spans (the `result` of portico_tracing_spans_total). */
export type SpanOutcome = 'exported' | 'failed' | 'dropped'

/** A running tracer (trace/otel-sdk.ts), handed to the engine when tracing is configured. */
export interface RequestTracing {
  /**
   * Starts a request's server span from its headers (W3C trace context and baggage);
   * `sampling`: its listener's, over the global one (a gateway's `tracing`).
   */
  startRequest(headers: IncomingHttpHeaders, method: string, sampling?: SamplingIR | null): RequestSpan
  /**
   * Told of each lot of recorded spans as it leaves: exported, failed (the collector refused
   * or was away) or dropped (the queue was full). Set by the proxy, for its metrics.
   */
  onSpans: ((result: SpanOutcome, count: number) => void) | null
  /**
   * Records of ended spans another thread of this process recorded and relayed here (a
   * data-plane worker's, TracingOptions.relay): exported, and counted in onSpans, here.
   */
  acceptRelayed(records: unknown[]): void
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>
}

/** What a call's span needs of a request's state (request/context.ts RequestContext has it). */
export interface SpanContext {
  span: RequestSpan | null
  /** The client span of the backend call in progress (one at a time; retries are one each). */
  callSpan: OtelSpan | null
}

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH', 'QUERY'])

/**
 * Query parameters whose values never leave the gateway in a span (semconv's url.query
 * guidance, plus the credential names Portico's own policies read from queries).
 */
const SENSITIVE_QUERY = /^(awsaccesskeyid|signature|sig|x-goog-signature|x-amz-signature|x-amz-credential|x-amz-security-token|access_token|id_token|refresh_token|token|api[-_]?key|key|code|client_secret|password|secret)$/i

/** The query with the values of credential-like parameters replaced by REDACTED. */
export function redactQuery (query: string): string {
  if (query === '') return ''
  return query.split('&').map(pair => {
    const eq = pair.indexOf('=')
    if (eq < 0) return pair
    let name = pair.slice(0, eq)
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '))
    } catch {
      // A malformed escape: the raw name is tested.
    }
    return SENSITIVE_QUERY.test(name) ? `${pair.slice(0, eq)}=REDACTED` : pair
  }).join('&')
}

/** What the server span reads of a finished request. */
export interface ServerSpanView {
  readonly method: string
  readonly scheme: string
  readonly host: string
  readonly hostname: string
  readonly originalPath: string
  readonly query: string
  readonly sourceAddress: string
  readonly sourcePort: number
  readonly status: number
  readonly reason: string
  readonly error: string | null
  readonly routeKey: string | null
  readonly req: { readonly httpVersion: string, readonly headers: IncomingHttpHeaders, readonly socket: { readonly localPort?: number | undefined } | null }
  readonly listener: { readonly ir: { readonly gateway: string, readonly name: string } }
  readonly matchedPath: { readonly kind: string, readonly value: string } | null
  readonly backend: { readonly name: string } | null
  readonly mcp: { readonly method: string, readonly target: string, readonly name?: string | undefined, readonly kind?: string | undefined } | null
  readonly grpc: { readonly service: string, readonly method: string, readonly status: number | null } | null
}

/**
 * `http.route`: the route's path template -- an exact path as it is, a prefix as
 * `/prefix/*` -- never the request's own path (span names must stay low-cardinality).
 */
export function httpRoute (match: ServerSpanView['matchedPath']): string | undefined {
  if (match === null) return undefined
  if (match.kind === 'exact') return match.value
  if (match.kind === 'prefix') return match.value === '/' ? '/*' : `${match.value.replace(/\/$/, '')}/*`
  return undefined
}

/** A route match's `http.route` and its server spans' names by method. */
interface RouteNames {
  readonly route: string | undefined
  /** `{method} {route}` by method (a known method or HTTP: a bounded set). */
  readonly names: Map<string, string>
}

/**
 * Each route match's names, worked out once (the IR does not change): built per request,
 * the route's template (a RegExp replace) and the span's name (two concatenations, which
 * the record's handover flattened again) cost a recorded request ~200 instructions
 * (bench/tracing-instructions.ts).
 */
const ROUTE_NAMES = new WeakMap<NonNullable<ServerSpanView['matchedPath']>, RouteNames>()
const NO_ROUTE: RouteNames = { route: undefined, names: new Map() }

function routeNames (match: ServerSpanView['matchedPath']): RouteNames {
  if (match === null) return NO_ROUTE
  let names = ROUTE_NAMES.get(match)
  if (names === undefined) {
    names = { route: httpRoute(match), names: new Map() }
    ROUTE_NAMES.set(match, names)
  }
  return names
}

/** The server span's name: `{method} {http.route}`, or the method alone without a route template. */
function serverSpanName (r: RouteNames, method: string): string {
  let name = r.names.get(method)
  if (name === undefined) {
    name = r.route !== undefined ? `${method} ${r.route}` : method
    r.names.set(method, name)
  }
  return name
}

/** Name and attributes of a finished request's server span; its status is ERROR for 5xx only. */
export function endServerSpan (span: OtelSpan, v: ServerSpanView, remove: readonly string[] = []): void {
  const names = routeNames(v.matchedPath)
  const route = names.route
  const known = KNOWN_METHODS.has(v.method)
  span.updateName(serverSpanName(names, known ? v.method : 'HTTP'))
  // In SERVER_HTTP's key order.
  const values: LayoutValues = [
    known ? v.method : '_OTHER',
    known ? undefined : v.method,
    v.scheme,
    v.originalPath,
    v.query === '' ? undefined : redactQuery(v.query),
    v.hostname,
    portOf(v.host) ?? v.req.socket?.localPort,
    v.sourceAddress === '' ? undefined : v.sourceAddress,
    // network.protocol.name is left out: semconv asks for it only when it is not http.
    v.req.httpVersion === '2.0' ? '2' : v.req.httpVersion,
    firstHeader(v.req.headers['user-agent']),
    route,
    v.status === 0 ? undefined : v.status,
    v.listener.ir.gateway,
    v.routeKey ?? undefined,
    v.backend?.name,
    v.reason
  ]
  let more: SpanAttributes | null = null
  if (v.mcp !== null) more = mcpAttributes(v.mcp)
  if (v.grpc !== null) more = { ...more, 'rpc.system': 'grpc', 'rpc.service': v.grpc.service, 'rpc.method': v.grpc.method, 'rpc.grpc.status_code': v.grpc.status ?? undefined }
  // config.tracing.fields.remove: built-in attributes an operator keeps out of their traces.
  for (const name of remove) {
    const at = SERVER_HTTP.keys.indexOf(name)
    if (at >= 0) values[at] = undefined
    if (more !== null) delete more[name]
  }
  span.setLayout(SERVER_HTTP, values)
  if (more !== null) span.setAttributes(more)
  if (v.status >= 500 || v.status === 0) span.setError(v.status === 0 ? v.reason : String(v.status), v.error ?? undefined)
}

/**
 * A CEL value (as JSON) as a span attribute: strings, numbers and booleans as they are, a
 * list of strings as an array, anything else as its JSON text; null is left out.
 */
export function celAttribute (value: unknown): SpanAttributeValue | undefined {
  if (value === null || value === undefined) return undefined
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value
  if (Array.isArray(value) && value.every(v => typeof v === 'string')) return value as string[]
  return JSON.stringify(value)
}

/** The MCP attributes of a request or of one call to a target. */
export function mcpAttributes (m: { method: string, target: string, name?: string | undefined, kind?: string | undefined }): SpanAttributes {
  return {
    'mcp.method.name': m.method,
    'portico.mcp.target': m.target === '' ? undefined : m.target,
    'gen_ai.operation.name': m.method === 'tools/call' ? 'execute_tool' : undefined,
    'gen_ai.tool.name': m.kind === 'tool' ? m.name : undefined,
    'gen_ai.prompt.name': m.kind === 'prompt' ? m.name : undefined,
    'mcp.resource.uri': m.kind === 'resource' ? m.name : undefined
  }
}

/** The span name of an MCP call: `{mcp.method.name} {tool or prompt}` (semconv's MCP client span). */
export function mcpSpanName (method: string, item: string | undefined): string {
  return item !== undefined && item !== '' ? `${method} ${item}` : method
}

/** Attributes of an outgoing HTTP call (semconv HTTP client span). */
export function httpClientAttributes (method: string, url: HttpCallUrl): SpanAttributes {
  const values = httpClientValues(method, url)
  const attrs: SpanAttributes = {}
  HTTP_CLIENT_KEYS.forEach((key, i) => { attrs[key] = values[i] })
  return attrs
}

export interface HttpCallUrl {
  scheme: string
  host: string
  port: number
  pathAndQuery: string
  /** urlOrigin(scheme, host, port), when the caller keeps it (a backend's is worked out once). */
  origin?: string
}

/** How `url.full` starts: `scheme://host:port`, an IPv6 host in brackets. */
export function urlOrigin (scheme: string, host: string, port: number): string {
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`
}

/**
 * httpClientAttributes' values in HTTP_CLIENT_KEYS' order, and room for BACKEND_CALL's two
 * more (made with its length, not grown).
 */
function httpClientValues (method: string, url: HttpCallUrl): LayoutValues {
  const q = url.pathAndQuery.indexOf('?')
  const target = q < 0 ? url.pathAndQuery : `${url.pathAndQuery.slice(0, q)}?${redactQuery(url.pathAndQuery.slice(q + 1))}`
  const known = KNOWN_METHODS.has(method)
  return [
    known ? method : '_OTHER',
    known ? undefined : method,
    url.host,
    url.port,
    (url.origin ?? urlOrigin(url.scheme, url.host, url.port)) + target,
    undefined,
    undefined
  ]
}

/** The backend call's client span attributes (BACKEND_CALL): the HTTP call's, its retry count (from 1) and backend. */
export function setBackendCallAttributes (span: OtelSpan, method: string, url: HttpCallUrl, resendCount: number, backend: string): void {
  const values = httpClientValues(method, url)
  values[HTTP_CLIENT_KEYS.length] = resendCount > 0 ? resendCount : undefined
  values[HTTP_CLIENT_KEYS.length + 1] = backend
  span.setLayout(BACKEND_CALL, values)
}

/** Attributes of a gRPC call to one of Envoy's services (ext_authz, ext_proc, rate limit). */
export function grpcClientAttributes (service: string, method: string, address: string): SpanAttributes {
  const { host, port } = splitAddress(address)
  return { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method, 'server.address': host, 'server.port': port }
}

/** Starts a child span of the request, when it is recorded. */
export function startChildSpan (ctx: { span: RequestSpan | null }, name: string, attrs: SpanAttributes, startTime?: number): OtelSpan | null {
  const span = ctx.span
  return span === null || !span.recording ? null : span.child(name, 'client', attrs, startTime)
}

/**
 * The W3C trace context (`traceparent`, `tracestate`, `baggage`) of a call a policy makes
 * under `span` -- the request's own span when the call has none (not sampled) -- as headers or
 * gRPC metadata; null while tracing is off. The service's spans then join the request's trace.
 */
export function callTraceHeaders (ctx: { span: RequestSpan | null }, span: OtelSpan | null): Record<string, string> | null {
  if (ctx.span === null) return null
  const headers: HeaderMap = {}
  ctx.span.inject(headers, span)
  return headers as Record<string, string>
}

/** Ends a policy's call span with its decision (`portico.decision`), failed when the call did. */
export function endDecisionSpan (span: OtelSpan | null, decision: string, error: string | null = null): void {
  if (span === null) return
  span.setAttributes({ 'portico.decision': decision })
  if (error !== null) span.setError(decision, error)
  span.end()
}

function splitAddress (address: string): { host: string, port: number | undefined } {
  const a = address.replace(/^[a-z]+:\/\//, '').replace(/\/.*$/, '')
  const m = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(a)
  if (m === null) return { host: a, port: undefined }
  return { host: m[1] ?? m[2]!, port: m[3] !== undefined ? Number(m[3]) : undefined }
}

function portOf (host: string): number | undefined {
  const colon = host.lastIndexOf(':')
  if (colon < 0 || host.endsWith(']')) return undefined
  const port = Number(host.slice(colon + 1))
  return Number.isInteger(port) && port > 0 ? port : undefined
}

function firstHeader (v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}
