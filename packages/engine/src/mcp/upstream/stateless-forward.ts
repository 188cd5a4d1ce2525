/**
 * 2026-07-28 targets: finding out whether a streamable HTTP target speaks the stateless
 * revision, and forwarding a 2026-07-28 client's request to it as it is.
 *
 * When both ends speak 2026-07-28 there is nothing to bridge: no session, no initialize, no
 * server-initiated requests (the target answers `input_required` and the client retries
 * with `inputResponses` and the target's own `requestState`). Portico then forwards the
 * POST — body, MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-* headers — and
 * streams the answer back, JSON or SSE, keeping no state: any replica serves any request.
 * What Portico still does on the way: the route's policies (authentication, authorization
 * rules over `mcp.*`, rate limits) ran before, the header/body agreement was checked by
 * classify(), a hidden item is refused as unknown, list answers are filtered for the
 * caller, and the target's faults stay bounded (maxMessageBytes per JSON body or SSE event,
 * requestTimeout as the idle limit of the answer).
 *
 * Whether a target is modern is asked, not configured: a `server/discover` with 2026-07-28
 * headers, cached per URL for a short while. A target that answers it with a
 * `supportedVersions` naming 2026-07-28 is modern; anything else (an initialize-era server
 * answers 400 or "method not found") is served by the initialize-era bridge.
 */

import { endTargetSpan, startTargetSpan } from './span.ts'
import { createParser } from 'eventsource-parser'
import type { RequestContext } from '../../request/context.ts'
import type { McpTargetIR } from '../../ir/types.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import type { HeadHook } from '../protocol/sse-writer.ts'
import { SseEventMeter } from '../protocol/message-limits.ts'
import { speaksModern } from './stateless.ts'
import { requestTarget, upstreamPool, type TargetAnswer } from './http-shared.ts'
import type { H1Pool } from '../../http/h1-pool.ts'
import {
  ALL_PROTOCOL_VERSIONS, errorResponse, INVALID_PARAMS, isRequest, MODERN_PROTOCOL_VERSIONS, targetTimeout, targetUnavailable,
  type JsonRpcMessage, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import { isPorticoError, PorticoError } from '../../util/errors.ts'

/** How long a target's answer to the revision probe is believed. */
const PROBE_TTL_MS = 30_000
/** The probe is a gateway call: it waits no longer than this whatever the target's requestTimeout. */
const PROBE_TIMEOUT_MS = 5_000
/** Request headers of the client that go to the target: the protocol's own, and no others. */
const FORWARDED_HEADERS = ['mcp-protocol-version', 'mcp-method', 'mcp-name']
const PARAM_HEADER_PREFIX = 'mcp-param-'

/** The list methods whose items an authorization filter may hide, and where the items are. */
const LIST_ITEMS: Record<string, { key: string, kind: 'tool' | 'prompt' | 'resource', nameOf: (i: Record<string, unknown>) => string }> = {
  'tools/list': { key: 'tools', kind: 'tool', nameOf: i => String(i.name) },
  'prompts/list': { key: 'prompts', kind: 'prompt', nameOf: i => String(i.name) },
  'resources/list': { key: 'resources', kind: 'resource', nameOf: i => String(i.uri) },
  'resources/templates/list': { key: 'resourceTemplates', kind: 'resource', nameOf: i => String(i.uriTemplate) }
}

export interface ModernTargetsOptions {
  /** Identity sent in the probe's `_meta` clientInfo. */
  clientInfo: { name: string, version: string }
}

/** The keep-alive pools and revision probes of the 2026-07-28 targets of one proxy. */
export class ModernTargets {
  private readonly pools = new Map<string, H1Pool>()
  private readonly probes = new Map<string, { at: number, modern: Promise<boolean> }>()
  private readonly clientInfo: { name: string, version: string }

  constructor (options: ModernTargetsOptions) {
    this.clientInfo = options.clientInfo
  }

  pool (url: URL): H1Pool {
    let pool = this.pools.get(url.origin)
    if (pool === undefined) {
      pool = upstreamPool(url)
      this.pools.set(url.origin, pool)
    }
    return pool
  }

  /** Whether the target answers server/discover as a 2026-07-28 server (cached PROBE_TTL_MS). */
  isModern (target: McpTargetIR): Promise<boolean> {
    if (target.kind !== 'mcp') return Promise.resolve(false)
    const cached = this.probes.get(target.url)
    if (cached !== undefined && Date.now() - cached.at < PROBE_TTL_MS) return cached.modern
    const modern = this.probe(target.url, Math.min(target.requestTimeoutMs, PROBE_TIMEOUT_MS), target.maxMessageBytes)
    this.probes.set(target.url, { at: Date.now(), modern })
    return modern
  }

  /** Forget what a target said (it answered a forwarded request as an older server would). */
  forget (url: string): void {
    this.probes.delete(url)
  }

  private async probe (url: string, timeoutMs: number, maxBytes: number): Promise<boolean> {
    const u = new URL(url)
    return await speaksModern(u, timeoutMs, maxBytes, { pool: this.pool(u), clientInfo: this.clientInfo })
  }

  async close (): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    this.probes.clear()
    await Promise.allSettled(pools.map(p => p.close()))
  }
}

/** What the forwarding needs of mcp/client/http.ts (the answer's head goes through the pipeline's finish step). */
export interface ForwardHelpers {
  reply(ctx: RequestContext, status: number, body: JsonRpcMessage | null, headers?: Record<string, string>): void
  traceStart(ctx: RequestContext, call?: boolean): void
  headHook(ctx: RequestContext): HeadHook
  traceTargetError(ctx: RequestContext, error: { code: number, message: string }): void
}

/**
 * Forwards one 2026-07-28 POST (already classified, its body in ctx.requestBody) to a
 * 2026-07-28 target and streams the answer back. `filter` is the caller's authorization
 * over items: a hidden item is answered as unknown, and list answers lose hidden items.
 */
export async function forwardToModernTarget (targets: ModernTargets, ctx: RequestContext, target: McpTargetIR & { kind: 'mcp' | 'sse', url: string }, message: JsonRpcMessage, filter: ItemFilter | undefined, h: ForwardHelpers): Promise<void> {
  const method = 'method' in message ? message.method : 'response'
  const params = ('params' in message ? message.params ?? {} : {}) as Record<string, unknown>
  ctx.mcp = { ...describeForward(method, params, target.name), protocolVersion: String(ctx.req.headers['mcp-protocol-version']), targetProtocolVersion: MODERN_PROTOCOL_VERSIONS[0]! }
  if (isRequest(message) && filter !== undefined && ctx.mcp.kind !== undefined && ctx.mcp.name !== undefined &&
    !filter({ method, kind: ctx.mcp.kind, name: ctx.mcp.name, target: target.name })) {
    // A forbidden item answers exactly like a missing one: its existence is not revealed.
    h.traceStart(ctx)
    return h.reply(ctx, 200, errorResponse(message.id, INVALID_PARAMS, `Unknown ${ctx.mcp.kind}: ${ctx.mcp.name}`))
  }
  h.traceStart(ctx, true)

  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (typeof value !== 'string') continue
    if (FORWARDED_HEADERS.includes(name) || name.startsWith(PARAM_HEADER_PREFIX)) headers[name] = value
  }
  const url = new URL(target.url)
  const abort = new AbortController()
  // Closing the response stream is the client's cancellation in 2026-07-28: the target sees its stream close.
  const onClose = () => abort.abort(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'the client closed the response stream'))
  ctx.res.once('close', onClose)
  const id = isRequest(message) ? message.id : null
  const span = startTargetSpan(ctx.span, method, { name: target.name, spec: target }, params, MODERN_PROTOCOL_VERSIONS[0])
  // One HTTP request per MCP request here: the trace context goes in its headers.
  ctx.span?.inject(headers, span)
  let res: TargetAnswer
  try {
    res = await requestTarget(targets.pool(url), {
      path: url.pathname + url.search,
      method: 'POST',
      headers,
      body: ctx.requestBody ?? Buffer.from(JSON.stringify(message)),
      headersTimeoutMs: target.requestTimeoutMs,
      // The answer's idle limit: an SSE answer that sends progress is alive. A
      // subscriptions/listen stream is quiet until something changes: no limit.
      idleTimeoutMs: method === 'subscriptions/listen' ? 0 : target.requestTimeoutMs,
      signal: abort.signal
    })
  } catch (err) {
    ctx.res.off('close', onClose)
    if (abort.signal.aborted) return
    const timedOut = isPorticoError(err, 'PORTICO_UPSTREAM_HEADERS_TIMEOUT')
    const answer = timedOut
      ? targetTimeout(id, `target "${target.name}" did not answer ${method} within ${target.requestTimeoutMs} ms (requestTimeout)`)
      : targetUnavailable(id, `target "${target.name}" failed: ${(err as Error).message}`)
    h.traceTargetError(ctx, answer.error)
    endTargetSpan(span, answer, id)
    return h.reply(ctx, 200, id === null ? null : answer, id === null ? {} : undefined)
  }
  span?.setAttributes({ 'http.response.status_code': res.statusCode })

  const contentType = res.header('content-type')
  const outHeaders: Record<string, string> = {}
  if (contentType !== '') outHeaders['content-type'] = contentType
  if (contentType.startsWith('text/event-stream')) outHeaders['cache-control'] = 'no-cache, no-transform'
  if (res.statusCode === 405 && typeof res.headers.allow === 'string') outHeaders.allow = res.headers.allow
  const list = LIST_ITEMS[method]
  // Answers Portico amends: a list this caller may see only part of, and discover, whose
  // supportedVersions are Portico's on this endpoint (it serves every revision in front of
  // the target), as its UnsupportedProtocolVersionError says too.
  const amend = res.statusCode !== 200
    ? null
    : list !== undefined && filter !== undefined
      ? (m: unknown) => filterList(m, method, list, filter, target.name)
      : method === 'server/discover' ? withPorticoVersions : null
  try {
    if (amend !== null) {
      // Short answers: read whole, amended, sent as JSON or SSE again.
      const text = (await res.whole(target.maxMessageBytes, `the ${method} answer`)).toString('utf8')
      const body = contentType.startsWith('text/event-stream') ? rewriteSse(text, amend) : JSON.stringify(amend(JSON.parse(text)))
      const head = await h.headHook(ctx)(res.statusCode, outHeaders)
      if (head !== null && !ctx.res.headersSent && !ctx.res.destroyed) {
        ctx.res.writeHead(head.status, { ...head.headers, 'content-length': String(Buffer.byteLength(body)) })
        ctx.res.end(body)
      }
      return
    }
    await streamAnswer(ctx, res, outHeaders, contentType.startsWith('text/event-stream'), target, h)
  } catch (err) {
    // The answer broke (too large, idle past requestTimeout, the target went away) after its head.
    abort.abort(err)
    res.destroy()
    if (!ctx.res.headersSent) {
      const answer = targetUnavailable(id, `target "${target.name}" failed: ${(err as Error).message}`)
      h.traceTargetError(ctx, answer.error)
      return h.reply(ctx, 200, id === null ? null : answer)
    }
    ctx.res.destroy()
  } finally {
    endTargetSpan(span, null, id)
    ctx.res.off('close', onClose)
  }
}

/** Streams the target's answer as it comes, each SSE event (or the JSON body) within maxMessageBytes. */
async function streamAnswer (ctx: RequestContext, res: TargetAnswer, headers: Record<string, string>, sse: boolean, target: McpTargetIR, h: ForwardHelpers): Promise<void> {
  if (!sse) {
    const body = await res.whole(target.maxMessageBytes, 'an answer')
    const head = await h.headHook(ctx)(res.statusCode, headers)
    if (head === null || ctx.res.headersSent || ctx.res.destroyed) return
    ctx.res.writeHead(head.status, { ...head.headers, 'content-length': String(body.length) })
    ctx.res.end(body)
    return
  }
  // The target's stream waits (unread) while a response policy decides on the head.
  const head = await h.headHook(ctx)(res.statusCode, headers)
  if (head === null || ctx.res.headersSent || ctx.res.destroyed) {
    res.destroy()
    return
  }
  ctx.res.writeHead(head.status, head.headers)
  ctx.res.flushHeaders()
  const meter = new SseEventMeter(target.maxMessageBytes)
  // Chunk by chunk as the target sends them; the target's connection stops reading while the client's is full.
  let gone = false
  let draining = false
  const resume = (): void => {
    draining = false
    res.resume()
  }
  try {
    await res.each((chunk, owned) => {
      if (gone) return
      if (!meter.feed(chunk)) throw new PorticoError('PORTICO_MCP_MESSAGE_TOO_LARGE', `an SSE event of the answer is over maxMessageBytes (${target.maxMessageBytes})`)
      if (ctx.res.destroyed) {
        gone = true
        res.destroy()
        return
      }
      // A lent chunk is copied: the response's socket may hold it past this call.
      if (!ctx.res.write(owned ? chunk : Buffer.from(chunk)) && !draining) {
        draining = true
        res.pause()
        ctx.res.once('drain', resume)
      }
    })
  } catch (err) {
    if (gone) return
    throw err
  } finally {
    ctx.res.off('drain', resume)
  }
  ctx.res.end()
}

/** A discover answer listing the versions Portico serves on the endpoint. */
function withPorticoVersions (message: unknown): unknown {
  const m = message as JsonRpcResponse | null
  if (m === null || typeof m !== 'object' || !('result' in m)) return message
  return { ...m, result: { ...m.result, supportedVersions: [...ALL_PROTOCOL_VERSIONS] } }
}

/** A response message with the hidden items of its list taken out. */
function filterList (message: unknown, method: string, list: (typeof LIST_ITEMS)[string], filter: ItemFilter, target: string): unknown {
  const m = message as JsonRpcResponse | null
  if (m === null || typeof m !== 'object' || !('result' in m)) return message
  const items = m.result[list.key]
  if (!Array.isArray(items)) return message
  const kept = (items as Array<Record<string, unknown>>).filter(i => filter({ method, kind: list.kind, name: list.nameOf(i), target }))
  // What this caller may see is for this caller: a shared cache must not reuse it.
  const result: Record<string, unknown> = { ...m.result, [list.key]: kept }
  if ('cacheScope' in result) result.cacheScope = 'private'
  return { ...m, result }
}

/** An SSE body with each event's data passed through `rewrite` (ids, event names and retry kept). */
function rewriteSse (text: string, rewrite: (message: unknown) => unknown): string {
  let out = ''
  const parser = createParser({
    onEvent: e => {
      let data = e.data
      try {
        data = JSON.stringify(rewrite(JSON.parse(e.data)))
      } catch {
        // not JSON: as sent
      }
      if (e.id !== undefined) out += `id: ${e.id}\n`
      if (e.event !== undefined) out += `event: ${e.event}\n`
      out += data.split('\n').map(line => `data: ${line}\n`).join('') + '\n'
    },
    onRetry: ms => {
      out += `retry: ${ms}\n\n`
    }
  })
  parser.feed(text)
  return out
}

/** The trace/log description of a forwarded message (one target: names as the client sends them). */
function describeForward (method: string, params: Record<string, unknown>, target: string): NonNullable<RequestContext['mcp']> {
  switch (method) {
    case 'tools/call': return { method, target, kind: 'tool', name: String(params.name ?? '') }
    case 'prompts/get': return { method, target, kind: 'prompt', name: String(params.name ?? '') }
    case 'resources/read': return { method, target, kind: 'resource', name: String(params.uri ?? '') }
    default: return { method, target }
  }
}
