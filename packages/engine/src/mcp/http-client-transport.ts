/**
 * The client side of the streamable HTTP transport, for Portico's upstream MCP sessions,
 * on an undici keep-alive pool: POST per message (JSON or SSE answers), a GET stream for
 * server-initiated messages (reopened with Last-Event-ID if it drops), DELETE to end the
 * session. It implements the SDK's Transport interface, like the SDK's own client transport,
 * which it replaces on the hot path because that one goes through fetch and web streams for
 * every message — most of the gateway's added latency per call in the MCP benchmark.
 *
 * What the target sends is capped (`maxMessageBytes`: a JSON body, or one SSE event): past
 * it that answer is dropped and its request fails through `onrequestfailed`, as it does
 * when its stream breaks. A request the target connection gives up on (its timeout) is
 * aborted with `abandon`, so an upstream that never answers holds no pooled connection.
 */

import { Pool, type Dispatcher } from 'undici'
import { createParser } from 'eventsource-parser'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { messageTooLarge, readLimited, SseEventMeter } from './message-limits.ts'
import { redactUrl } from '../ir/redact.ts'

export interface HttpClientTransportOptions {
  /** Resume an existing upstream session. */
  sessionId?: string
  /** Largest JSON body or SSE event accepted from the server (default 4 MiB). */
  maxMessageBytes?: number
}

type RequestId = string | number

const GET_RETRY_MS = 1000
const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
/** Enough of an error page for a log line. */
const MAX_ERROR_TEXT_BYTES = 4096

export class StreamableHttpClientTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  /** A request whose answer will not come: its stream broke, or the answer was too large. */
  onrequestfailed?: (id: RequestId, error: Error) => void
  sessionId?: string
  private protocolVersion: string | undefined
  private readonly url: URL
  private readonly pool: Pool
  private closed = false
  private getStream: Dispatcher.ResponseData | null = null
  private getAbort: AbortController | null = null
  private lastEventId: string | undefined
  private getStarted = false
  private readonly maxMessageBytes: number
  /** POSTs of requests still waiting for their answer, to abort when abandoned. */
  private readonly inflight = new Map<RequestId, AbortController>()

  constructor (url: URL, options: HttpClientTransportOptions = {}) {
    this.url = url
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
    this.pool = new Pool(url.origin, { connections: 64, keepAliveTimeout: 30_000, bodyTimeout: 0 })
    if (options.sessionId !== undefined) this.sessionId = options.sessionId
  }

  async start (): Promise<void> {
    // Connections open on first use; a resumed session reopens its stream at once.
    if (this.sessionId !== undefined) this.openGetStream()
  }

  setProtocolVersion (version: string): void {
    this.protocolVersion = version
  }

  private headers (): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }
    if (this.sessionId !== undefined) h['mcp-session-id'] = this.sessionId
    if (this.protocolVersion !== undefined) h['mcp-protocol-version'] = this.protocolVersion
    return h
  }

  async send (message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error('transport closed')
    const requestId = 'method' in message && 'id' in message ? message.id as RequestId : undefined
    const abort = new AbortController()
    if (requestId !== undefined) this.inflight.set(requestId, abort)
    let streaming = false
    try {
      const res = await this.pool.request({ path: this.url.pathname + this.url.search, method: 'POST', headers: this.headers(), body: JSON.stringify(message), signal: abort.signal })
      const sid = res.headers['mcp-session-id']
      if (typeof sid === 'string' && sid !== '') this.sessionId = sid
      if (res.statusCode === 202) {
        await res.body.dump()
        if ('method' in message && message.method === 'notifications/initialized') this.openGetStream()
        return
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        const text = await readLimited(res.body, MAX_ERROR_TEXT_BYTES).then(b => b.toString('utf8'), () => '')
        throw new Error(`HTTP ${res.statusCode} from ${redactUrl(this.url.href)}${text !== '' ? `: ${text.slice(0, 200)}` : ''}`)
      }
      const type = String(res.headers['content-type'] ?? '')
      if (type.startsWith('application/json')) {
        const declared = Number(res.headers['content-length'] ?? NaN)
        if (declared > this.maxMessageBytes) {
          res.body.destroy()
          throw messageTooLarge('an answer', this.maxMessageBytes)
        }
        const body = JSON.parse((await readLimited(res.body, this.maxMessageBytes, 'an answer')).toString('utf8')) as JSONRPCMessage | JSONRPCMessage[]
        for (const m of Array.isArray(body) ? body : [body]) this.onmessage?.(m)
        return
      }
      if (type.startsWith('text/event-stream')) {
        // The answer streams; consume it without holding up the caller.
        streaming = true
        void this.readSse(res.body, requestId).then(
          () => { if (requestId !== undefined) this.inflight.delete(requestId) },
          (err: Error) => {
            if (requestId !== undefined && this.inflight.delete(requestId)) this.onrequestfailed?.(requestId, err)
            else this.onerror?.(err)
          })
        return
      }
      await res.body.dump()
    } finally {
      if (!streaming && requestId !== undefined) this.inflight.delete(requestId)
    }
  }

  /** Gives up on a request (the caller was answered already): its POST is aborted. */
  abandon (id: RequestId): void {
    const abort = this.inflight.get(id)
    if (abort === undefined) return
    this.inflight.delete(id)
    abort.abort()
  }

  /**
   * Reads an SSE body: the answer to a POST (`requestId`; the stream ends once it is in) or
   * the standalone stream (undefined). Rejects when an event passes maxMessageBytes.
   */
  private async readSse (body: AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => unknown }, requestId: RequestId | undefined, standalone = false): Promise<void> {
    const decoder = new TextDecoder()
    const meter = new SseEventMeter(this.maxMessageBytes)
    const parser = createParser({
      onEvent: event => {
        if (standalone && event.id !== undefined) this.lastEventId = event.id
        if (event.event !== undefined && event.event !== 'message') return
        if (event.data === '') return
        let message: JSONRPCMessage
        try {
          message = JSON.parse(event.data) as JSONRPCMessage
        } catch (err) {
          this.onerror?.(err as Error)
          return
        }
        if (requestId !== undefined && !('method' in message) && 'id' in message && message.id === requestId) this.inflight.delete(requestId)
        this.onmessage?.(message)
      }
    })
    for await (const chunk of body) {
      if (!meter.feed(chunk)) {
        const err = messageTooLarge('an event', this.maxMessageBytes)
        body.destroy?.(err)
        throw err
      }
      parser.feed(decoder.decode(chunk, { stream: true }))
    }
  }

  /** The session's stream for server-initiated messages; reopened while the session lives. */
  private openGetStream (): void {
    if (this.closed || this.getStarted) return
    this.getStarted = true
    const loop = async () => {
      while (!this.closed) {
        const abort = new AbortController()
        this.getAbort = abort
        try {
          const headers: Record<string, string> = { accept: 'text/event-stream' }
          if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId
          if (this.protocolVersion !== undefined) headers['mcp-protocol-version'] = this.protocolVersion
          if (this.lastEventId !== undefined) headers['last-event-id'] = this.lastEventId
          const res = await this.pool.request({ path: this.url.pathname + this.url.search, method: 'GET', headers, signal: abort.signal })
          this.getStream = res
          if (res.statusCode === 405) {
            await res.body.dump()
            return // the server has no such stream
          }
          if (res.statusCode === 404) {
            await res.body.dump()
            this.onerror?.(new Error(`upstream session ${this.sessionId ?? ''} not found`))
            this.onclose?.()
            return
          }
          if (res.statusCode !== 200) {
            await res.body.dump()
          } else {
            await this.readSse(res.body, undefined, true)
          }
        } catch (err) {
          if (this.closed) return
          this.onerror?.(err as Error)
        }
        if (this.closed) return
        await new Promise(resolve => setTimeout(resolve, GET_RETRY_MS).unref())
      }
    }
    void loop()
  }

  /** DELETE: ends the upstream session. */
  async terminateSession (): Promise<void> {
    if (this.sessionId === undefined) return
    const headers = this.headers()
    try {
      const res = await this.pool.request({ path: this.url.pathname + this.url.search, method: 'DELETE', headers })
      await res.body.dump()
    } catch {}
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.getAbort?.abort()
    for (const abort of this.inflight.values()) abort.abort()
    this.inflight.clear()
    await this.pool.close().catch(() => {})
    this.onclose?.()
  }
}
