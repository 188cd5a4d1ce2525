/**
 * The client span of one MCP request the gateway sends a target (OpenTelemetry's MCP
 * semantic conventions): named `{mcp.method.name} {tool or prompt}`, with the target's
 * session, the JSON-RPC id and the transport; a JSON-RPC error sets `rpc.response.status_code`
 * and the span's error. Started only under a recorded request span.
 */

import type { McpTargetIR } from '../../ir/types.ts'
import { mcpAttributes, mcpSpanName, startChildSpan, type OtelSpan, type RequestSpan } from '../../trace/otel.ts'
import type { JsonRpcId, JsonRpcResponse } from '../protocol/jsonrpc.ts'
import type { HeaderMap } from '../../ir/header-map.ts'

/** What the span reads of a target connection (mcp/upstream/target.ts TargetConnection, or a 2026-07-28 target). */
export interface SpanTarget {
  readonly name: string
  readonly spec: McpTargetIR
  readonly upstreamSession?: string | null
}

export function startTargetSpan (request: RequestSpan | null | undefined, method: string, target: SpanTarget, params: Record<string, unknown> | undefined, protocolVersion?: string): OtelSpan | null {
  if (request == null || !request.recording) return null
  const kind = method === 'tools/call' ? 'tool' : method === 'prompts/get' ? 'prompt' : method.startsWith('resources/') && typeof params?.uri === 'string' ? 'resource' : undefined
  const name = kind === 'resource' ? params?.uri as string : kind !== undefined && typeof params?.name === 'string' ? params.name : undefined
  const spec = target.spec
  const url = spec.kind === 'stdio' ? null : safeUrl(spec.url)
  return startChildSpan({ span: request }, mcpSpanName(method, kind === 'resource' ? undefined : name), {
    ...mcpAttributes({ method, target: target.name, name, kind }),
    'mcp.session.id': target.upstreamSession ?? undefined,
    'mcp.protocol.version': protocolVersion,
    'network.transport': spec.kind === 'stdio' ? 'pipe' : 'tcp',
    'network.protocol.name': spec.kind === 'stdio' ? undefined : 'http',
    'server.address': url?.hostname.replace(/^\[|\]$/g, ''),
    'server.port': url === null ? undefined : Number(url.port !== '' ? url.port : url.protocol === 'https:' ? 443 : 80)
  })
}

/** Ends a target span with the target's answer (or the gateway's error in its place). */
export function endTargetSpan (span: OtelSpan | null, response: JsonRpcResponse | null, upstreamId?: JsonRpcId | null): void {
  if (span === null) return
  if (upstreamId !== undefined && upstreamId !== null) span.setAttributes({ 'jsonrpc.request.id': String(upstreamId) })
  if (response !== null && 'error' in response) {
    span.setAttributes({ 'rpc.response.status_code': String(response.error.code) })
    span.setError(String(response.error.code), response.error.message)
  }
  span.end()
}

function safeUrl (text: string): URL | null {
  try {
    return new URL(text)
  } catch {
    return null
  }
}

/**
 * The params of a request to a target with the trace context in `_meta` (`traceparent`,
 * `tracestate`, as OpenTelemetry's MCP conventions propagate it: one session carries many
 * requests, so HTTP headers cannot), the call's span as parent; the caller's params are not
 * changed.
 */
export function withTraceContext (params: Record<string, unknown> | undefined, request: RequestSpan, call: OtelSpan | null): Record<string, unknown> {
  const carrier: HeaderMap = {}
  request.inject(carrier, call)
  const meta = params?._meta !== null && typeof params?._meta === 'object' ? params._meta as Record<string, unknown> : {}
  const traced: Record<string, unknown> = { ...meta, traceparent: carrier.traceparent }
  if (carrier.tracestate !== undefined) traced.tracestate = carrier.tracestate
  return { ...params, _meta: traced }
}
