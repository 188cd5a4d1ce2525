/**
 * The client side of a 2026-07-28 target, for an upstream session of initialize-era
 * clients: an UpstreamTransport (transport.ts, as StreamableHttpClientTransport) that makes
 * a stateless 2026-07-28 server look like an initialize-era one to TargetConnection.
 *
 *  - `initialize` is answered from the target's `server/discover` (its capabilities,
 *    serverInfo, instructions), in the revision the session's client asked for;
 *    `notifications/initialized`, `ping` and `logging/setLevel` (gone in 2026-07-28) are
 *    answered here, the level kept for the `_meta` of later requests;
 *  - every other request is a POST of its own with the 2026-07-28 headers (MCP-Protocol-
 *    Version, Mcp-Method, Mcp-Name) and `_meta` (protocolVersion, the client's capabilities
 *    and info, logLevel); its answer (JSON or SSE, each message capped by maxMessageBytes)
 *    comes back as onmessage, with the request's id as `relatedRequestId`;
 *  - an `input_required` result becomes the initialize-era exchange the client knows: each
 *    input request is sent to the client as a request of the target's (same related id),
 *    and once all are answered the request is sent again with `inputResponses` and the
 *    target's `requestState` (at most MAX_ROUNDS rounds);
 *  - `notifications/cancelled` from the client aborts the request's POST: closing the
 *    stream is how a 2026-07-28 client cancels.
 *  - change notifications come from one `subscriptions/listen` stream, opened after
 *    `notifications/initialized` and reopened with the new filter whenever the client's
 *    `resources/subscribe` / `resources/unsubscribe` change the set of URIs (answered here);
 *    they reach the client as an initialize-era server would send them, without the
 *    subscription id.
 * There is no session to open or end and no GET stream.
 */

import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js'
import type { RelatedInfo, UpstreamTransport } from './transport.ts'
import { createParser } from 'eventsource-parser'
import { httpStatusError, readJsonAnswer, readSse, requestTarget, upstreamPool, type TargetAnswer } from './http-shared.ts'
import type { H1Pool } from '../../http/h1-pool.ts'
import { redactUrl } from '../../ir/redact.ts'
import { initializeFromDiscover, modernRequestHeaders, modernRequestMeta, MODERN_VERSION, unstamped } from '../revisions/revision-2026.ts'
import {
  errorResponse, INVALID_PARAMS, INVALID_REQUEST, isRequest, isResponse, resultResponse,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import { PorticoError } from '../../util/errors.ts'

/** A target that keeps asking for input is cut off after this many rounds. */
const MAX_ROUNDS = 8
/** A listen stream the target ended or refused is opened again after this long. */
const LISTEN_RETRY_MS = 1000

export interface ModernClientTransportOptions {
  /** The session's client (its capabilities and info go into every request's `_meta`). */
  client: { capabilities: Record<string, unknown>, clientInfo: Record<string, unknown> }
  maxMessageBytes: number
  requestTimeoutMs: number
}

/**
 * Whether the target at `url` answers server/discover as a 2026-07-28 server. One question
 * for both who ask it: ModernTargets (is a route's one target modern; cached, on its pool)
 * and TargetConnection (a streamable target that refused initialize; without `via`, a pool
 * is made for the question and closed).
 */
export async function speaksModern (url: URL, timeoutMs: number, maxMessageBytes: number, via?: { pool: H1Pool, clientInfo: Record<string, unknown> }): Promise<boolean> {
  const pool = via?.pool ?? upstreamPool(url)
  const meta = modernRequestMeta(undefined, { capabilities: {}, clientInfo: via?.clientInfo ?? { name: 'portico', version: '0' } }, undefined)
  try {
    const res = await requestTarget(pool, {
      path: url.pathname + url.search,
      method: 'POST',
      headers: modernRequestHeaders('server/discover', {}),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'portico-discover', method: 'server/discover', params: { _meta: meta } }),
      headersTimeoutMs: timeoutMs,
      idleTimeoutMs: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs)
    })
    const text = (await res.whole(maxMessageBytes, 'the server/discover answer')).toString('utf8')
    if (res.statusCode !== 200) return false
    const message = res.header('content-type').startsWith('text/event-stream') ? lastSseMessage(text) : JSON.parse(text) as unknown
    const versions = (message as { result?: { supportedVersions?: unknown } } | null)?.result?.supportedVersions
    return Array.isArray(versions) && versions.includes(MODERN_VERSION)
  } catch {
    return false
  } finally {
    if (via === undefined) await pool.close().catch(() => {})
  }
}

/** The last JSON-RPC message of an SSE body (the answer of a probe). */
function lastSseMessage (text: string): unknown {
  let last: unknown = null
  const parser = createParser({
    onEvent: e => {
      try {
        last = JSON.parse(e.data)
      } catch {
        // not a message
      }
    }
  })
  parser.feed(text)
  return last
}

export class ModernClientTransport implements UpstreamTransport {
  readonly kind = 'stateless' as const
  readonly revision = MODERN_VERSION
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void
  private readonly url: URL
  private readonly pool: H1Pool
  private readonly options: ModernClientTransportOptions
  private closed = false
  private logLevel: string | undefined
  /** Requests on their way, to abort on cancellation, abandonment or close. */
  private readonly inflight = new Map<JsonRpcId, AbortController>()
  /** Input requests put to the client, waiting for its response. */
  private readonly asked = new Map<string, (response: JsonRpcResponse) => void>()
  private nextInput = 1
  /** URIs the client subscribed to (resources/subscribe), and the listen stream carrying them. */
  private readonly subscriptions = new Set<string>()
  private listen: AbortController | null = null

  constructor (url: URL, options: ModernClientTransportOptions) {
    this.url = url
    this.options = options
    this.pool = upstreamPool(url)
  }

  async start (): Promise<void> {}

  async send (message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed')
    const m = message as JsonRpcMessage
    if (isResponse(m)) {
      // The client's answer to an input request.
      const resolve = m.id === null ? undefined : this.asked.get(String(m.id))
      if (resolve !== undefined) {
        this.asked.delete(String(m.id))
        resolve(m)
      }
      return
    }
    if (!isRequest(m)) {
      if (m.method === 'notifications/cancelled') {
        const id = (m.params as { requestId?: JsonRpcId } | undefined)?.requestId
        if (id !== undefined) this.abandon(id)
      }
      if (m.method === 'notifications/initialized') this.relisten()
      // initialized, roots/list_changed, progress of input requests: nothing to carry.
      return
    }
    switch (m.method) {
      case 'initialize':
        return void this.run(m, () => this.initialize(m))
      case 'ping':
        return this.deliver(resultResponse(m.id, {}))
      case 'logging/setLevel':
        this.logLevel = String((m.params as { level?: unknown } | undefined)?.level ?? '')
        return this.deliver(resultResponse(m.id, {}))
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const uri = (m.params as { uri?: unknown } | undefined)?.uri
        if (typeof uri !== 'string') return this.deliver(errorResponse(m.id, INVALID_PARAMS, 'Invalid params: uri must be a string'))
        const had = this.subscriptions.has(uri)
        if (m.method === 'resources/subscribe') this.subscriptions.add(uri)
        else this.subscriptions.delete(uri)
        if (had !== this.subscriptions.has(uri)) this.relisten()
        return this.deliver(resultResponse(m.id, {}))
      }
      default:
        return void this.run(m, signal => this.call(m, signal))
    }
  }

  /** Runs one request to its answer (or its error), delivered as a response with its id. */
  private async run (req: JsonRpcRequest, work: (signal: AbortSignal) => Promise<JsonRpcResponse>): Promise<void> {
    const abort = new AbortController()
    this.inflight.set(req.id, abort)
    try {
      this.deliver(await work(abort.signal))
    } catch (err) {
      if (abort.signal.aborted || this.closed) return
      // The caller (TargetConnection) answers its client with TARGET_UNAVAILABLE.
      this.onerror?.(err as Error)
      this.deliver(errorResponse(req.id, -32000, `target failed: ${(err as Error).message}`, { source: 'portico', reason: 'target-unavailable' }))
    } finally {
      this.inflight.delete(req.id)
    }
  }

  private async initialize (req: JsonRpcRequest): Promise<JsonRpcResponse> {
    const answer = await this.exchange(req.id, 'server/discover', {}, AbortSignal.timeout(this.options.requestTimeoutMs), () => {})
    if (!('result' in answer)) return answer
    return resultResponse(req.id, initializeFromDiscover(answer.result, (req.params as { protocolVersion?: unknown } | undefined)?.protocolVersion))
  }

  /** A request, and its rounds of input: the final answer, in the initialize-era shape. */
  private async call (req: JsonRpcRequest, signal: AbortSignal): Promise<JsonRpcResponse> {
    let params = { ...(req.params ?? {}) } as Record<string, unknown>
    for (let round = 0; ; round++) {
      const answer = await this.exchange(req.id, req.method, params, signal, m => this.deliver(m, req.id))
      if (!('result' in answer)) return answer
      const { resultType, ...rest } = answer.result
      if (resultType !== 'input_required') return resultResponse(req.id, rest)
      if (round >= MAX_ROUNDS) return errorResponse(req.id, INVALID_REQUEST, `the target asked for input more than ${MAX_ROUNDS} times`)
      const requests = (rest.inputRequests ?? {}) as Record<string, { method?: unknown, params?: unknown }>
      const responses: Record<string, unknown> = {}
      for (const [key, input] of Object.entries(requests)) {
        const response = await this.askClient(req.id, String(input.method), (input.params ?? {}) as Record<string, unknown>, signal)
        if ('error' in response) return { jsonrpc: '2.0', id: req.id, error: response.error }
        responses[key] = response.result
      }
      params = { ...(req.params ?? {}), inputResponses: responses }
      if (typeof rest.requestState === 'string') params.requestState = rest.requestState
    }
  }

  /** Puts one input request to the client as a request of the target's, and waits for its response. */
  private askClient (related: JsonRpcId, method: string, params: Record<string, unknown>, signal: AbortSignal): Promise<JsonRpcResponse> {
    const id = `p26-input-${this.nextInput++}`
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.asked.delete(id)
        reject(signal.reason as Error)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.asked.set(id, response => {
        signal.removeEventListener('abort', onAbort)
        resolve(response)
      })
      this.deliver({ jsonrpc: '2.0', id, method, params }, related)
    })
  }

  /**
   * One POST in the 2026-07-28 shape and its answer; messages before the answer (progress,
   * logging) go to `onOther`.
   */
  async exchange (id: JsonRpcId, method: string, params: Record<string, unknown>, signal: AbortSignal, onOther: (m: JsonRpcMessage) => void, bodyTimeoutMs = this.options.requestTimeoutMs): Promise<JsonRpcResponse> {
    const meta = modernRequestMeta(params._meta, this.options.client, this.logLevel)
    const res = await requestTarget(this.pool, {
      path: this.url.pathname + this.url.search,
      method: 'POST',
      headers: modernRequestHeaders(method, params),
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
      headersTimeoutMs: this.options.requestTimeoutMs,
      idleTimeoutMs: bodyTimeoutMs,
      signal
    })
    const type = res.header('content-type')
    if (type.startsWith('application/json')) {
      const message = await readJsonAnswer(res, this.options.maxMessageBytes) as JsonRpcMessage
      if (isResponse(message)) return message
      throw new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `HTTP ${res.statusCode} from ${redactUrl(this.url.href)}: not a JSON-RPC response`)
    }
    if (res.statusCode === 200 && type.startsWith('text/event-stream')) return await this.readAnswer(res, id, onOther)
    throw await httpStatusError(res, this.url)
  }

  /** Reads an SSE answer up to the response to `id`. */
  private async readAnswer (body: TargetAnswer, id: JsonRpcId, onOther: (m: JsonRpcMessage) => void): Promise<JsonRpcResponse> {
    let answer: JsonRpcResponse | null = null
    await readSse(body, {
      maxEventBytes: this.options.maxMessageBytes,
      onBadMessage: err => this.onerror?.(err),
      onMessage: value => {
        if (answer !== null) return
        const message = value as JsonRpcMessage
        if (isResponse(message) && message.id === id) answer = message
        else onOther(message)
      },
      done: () => answer !== null
    })
    if (answer === null) throw new PorticoError('PORTICO_MCP_UPSTREAM_STREAM', 'the answer stream ended before the answer')
    return answer
  }

  /** (Re)opens the listen stream with the current filter; the previous one is closed. */
  private relisten (): void {
    this.listen?.abort(new PorticoError('PORTICO_MCP_ABORTED', 'filter changed'))
    const abort = new AbortController()
    this.listen = abort
    const filter: Record<string, unknown> = { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true }
    if (this.subscriptions.size > 0) filter.resourceSubscriptions = [...this.subscriptions]
    void this.keepListening(filter, abort.signal)
  }

  /** One listen stream, reopened after a second if the target ends it, until replaced or closed. */
  private async keepListening (filter: Record<string, unknown>, signal: AbortSignal): Promise<void> {
    while (!this.closed && !signal.aborted) {
      try {
        await this.exchange(`portico-listen-${this.nextInput++}`, 'subscriptions/listen', { notifications: filter }, signal, m => {
          if (!('method' in m) || m.method === 'notifications/subscriptions/acknowledged') return
          this.deliver(unstamped(m as { method: string, params?: Record<string, unknown> }))
        }, 0)
      } catch {
        // Refused, broken or not served: tried again below (the filter may be served later).
      }
      if (this.closed || signal.aborted) return
      await new Promise(resolve => setTimeout(resolve, LISTEN_RETRY_MS).unref())
    }
  }

  private deliver (message: JsonRpcMessage, related?: JsonRpcId): void {
    this.onmessage?.(message as JSONRPCMessage, related !== undefined ? { relatedRequestId: related } satisfies RelatedInfo as MessageExtraInfo : undefined)
  }

  /** Gives up on a request: its POST is aborted (the target sees its stream close). */
  abandon (id: JsonRpcId): void {
    this.inflight.get(id)?.abort(new PorticoError('PORTICO_MCP_ABORTED', 'abandoned'))
    this.inflight.delete(id)
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const abort of this.inflight.values()) abort.abort(new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed'))
    this.listen?.abort(new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed'))
    this.inflight.clear()
    this.asked.clear()
    await this.pool.close().catch(() => {})
    this.onclose?.()
  }
}
