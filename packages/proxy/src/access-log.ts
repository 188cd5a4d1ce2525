/** The fields of the one access-log line written per request. */

import type { RequestContext, StreamConnectionRecord, UdpFlowRecord } from '@portico/engine/serving'
import { servedModel } from '@portico/engine/serving'
import { performance } from '@portico/engine/clock'

export function accessLogFields (ctx: RequestContext): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    gateway: ctx.listener.ir.gateway,
    listener: ctx.listener.ir.name,
    route: ctx.routeKey,
    backend: ctx.backend?.name ?? null,
    // Read at arrival (RequestContext): never from a header a policy could have rewritten.
    src: ctx.sourceAddress === '' ? undefined : ctx.sourceAddress,
    method: ctx.method,
    host: ctx.host,
    path: ctx.originalPath,
    status: ctx.status,
    reason: ctx.reason,
    duration: `${Math.round((performance.now() - ctx.startMono) * 1000) / 1000}ms`
  }
  if (ctx.mcp !== null) {
    fields['mcp.method'] = ctx.mcp.method
    if (ctx.mcp.target !== '') fields['mcp.target'] = ctx.mcp.target
    if (ctx.mcp.name !== undefined) fields[`mcp.${ctx.mcp.kind ?? 'name'}`] = ctx.mcp.name
    // OpenTelemetry's mcp.protocol.version is the client's; the target's may differ (Portico bridges revisions).
    if (ctx.mcp.protocolVersion !== undefined) fields['mcp.protocol.version'] = ctx.mcp.protocolVersion
    if (ctx.mcp.targetProtocolVersion !== undefined) fields['mcp.target.protocol.version'] = ctx.mcp.targetProtocolVersion
  }
  if (ctx.grpc !== null) {
    // OpenTelemetry's RPC attribute names.
    fields['rpc.system'] = 'grpc'
    fields['rpc.service'] = ctx.grpc.service
    fields['rpc.method'] = ctx.grpc.method
    if (ctx.grpc.status !== null) fields['rpc.grpc.status_code'] = ctx.grpc.status
  }
  if (ctx.llm !== null) {
    // OpenTelemetry's gen_ai attribute names (agentgateway logs the same).
    fields['gen_ai.operation.name'] = ctx.llm.operation
    fields['gen_ai.provider.name'] = ctx.llm.system
    fields['gen_ai.request.model'] = ctx.llm.model
    // A translated call names both wire formats (what the client spoke, what the provider got).
    if (ctx.llm.inputFormat !== ctx.llm.providerFormat) {
      fields['portico.llm.input_format'] = ctx.llm.inputFormat
      fields['portico.llm.provider_format'] = ctx.llm.providerFormat
    }
    const usage = ctx.llm.usage
    if (usage !== null) {
      if (usage.responseModel !== null) fields['gen_ai.response.model'] = usage.responseModel
      if (usage.inputTokens !== null) fields['gen_ai.usage.input_tokens'] = usage.inputTokens
      if (usage.outputTokens !== null) fields['gen_ai.usage.output_tokens'] = usage.outputTokens
    }
    // The backend's pricing at the answer's usage (no semantic convention names a cost). A
    // number for log tools to sum; the exact decimal is in the trace's llmResponse event.
    const cost = ctx.llm.cost
    if (cost !== undefined) {
      fields['portico.llm.cost'] = Number(cost.amount)
      fields['portico.llm.currency'] = cost.currency
    }
  }
  if (ctx.modelChoice !== null) {
    // The model API (docs/models.md): the concrete model that served, and why it was chosen.
    fields['portico.model'] = servedModel(ctx)
    const why = [...ctx.modelChoice.why, ...(ctx.failedOver ?? []).map(f => `failed over from ${f.backend}: ${f.reason}`)]
    if (why.length > 0) fields['portico.model.why'] = why.join('; ')
  }
  if (ctx.inferencePick !== null) {
    // An InferencePool (docs/inference.md): what its endpoint picker did, the endpoint that served.
    const p = ctx.inferencePick
    fields['portico.inference.pool'] = p.pool
    fields['portico.inference.outcome'] = p.outcome
    if (p.endpoint !== null) fields['portico.inference.endpoint'] = p.endpoint
    if (p.fallbacks.length > 0) fields['portico.inference.fallbacks'] = p.fallbacks.join(',')
  }
  if (ctx.error !== null) fields.error = ctx.error
  // Joins the line to the OpenTelemetry trace and to the debug trace's requestStarted.
  if (ctx.span !== null) fields.traceId = ctx.span.traceId
  return fields
}

/**
 * The access-log line of a connection on a TCP or TLS listener (message `connection`): where
 * it went, the bytes each way, how long it lasted and how it ended. Field names as the
 * request line's where they mean the same; `sni` is OpenTelemetry's tls.server.name.
 */
export function connectionLogFields (c: StreamConnectionRecord): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    gateway: c.gateway,
    listener: c.listener,
    route: c.route,
    backend: c.backend,
    src: c.source.address === '' ? undefined : c.source.address,
    protocol: c.protocol,
    'bytes.received': c.bytesFromClient,
    'bytes.sent': c.bytesToClient,
    reason: c.reason,
    duration: `${Math.round(c.durationMs * 1000) / 1000}ms`
  }
  if (c.protocol === 'tls') {
    fields['tls.server.name'] = c.serverName
    if (c.mode !== null) fields['tls.mode'] = c.mode
  }
  if (c.target !== null) fields.target = c.target
  if (c.error !== null) fields.error = c.error
  return fields
}

/**
 * The access-log line of a UDP flow (message `flow`), written when it ends: where its
 * datagrams went, the datagrams and bytes each way, how long it lasted and why it ended
 * (IdleTimeout, Evicted, UpstreamUnreachable, ...); a datagram no flow was opened for (NoRoute,
 * NoBackend) gets one too.
 */
export function flowLogFields (r: UdpFlowRecord): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    gateway: r.gateway,
    listener: r.listener,
    route: r.route,
    backend: r.backend,
    src: r.source.address === '' ? undefined : r.source.address,
    'src.port': r.source.port,
    protocol: 'udp',
    'datagrams.received': r.datagramsFromClient,
    'datagrams.sent': r.datagramsToClient,
    'bytes.received': r.bytesFromClient,
    'bytes.sent': r.bytesToClient,
    reason: r.reason,
    duration: `${Math.round(r.durationMs * 1000) / 1000}ms`
  }
  if (r.target !== null) fields.target = r.target
  if (r.error !== null) fields.error = r.error
  return fields
}
