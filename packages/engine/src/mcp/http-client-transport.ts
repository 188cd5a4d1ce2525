/**
 * The client side of the streamable HTTP transport, for Portico's upstream MCP sessions,
 * on an undici keep-alive pool: POST per message (JSON or SSE answers), a GET stream for
 * server-initiated messages (reopened with Last-Event-ID if it drops), DELETE to end the
 * session. It implements the SDK's Transport interface, like the SDK's own client transport,
 * which it replaces on the hot path because that one goes through fetch and web streams for
 * every message — most of the gateway's added latency per call in the MCP benchmark.
 */

import { Pool, type Dispatcher } from 'undici'
import { createParser } from 'eventsource-parser'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'

export interface HttpClientTransportOptions {
  /** Resume an existing upstream session. */
  sessionId?: string
}

const GET_RETRY_MS = 1000

export class StreamableHttpClientTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  sessionId?: string
  private protocolVersion: string | undefined
  private readonly url: URL
  private readonly pool: Pool
  private closed = false
  private getStream: Dispatcher.ResponseData | null = null
  private getAbort: AbortController | null = null
  private lastEventId: string | undefined
  private getStarted = false

  constructor (url: URL, options: HttpClientTransportOptions = {}) {
    this.url = url
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
    const res = await this.pool.request({ path: this.url.pathname + this.url.search, method: 'POST', headers: this.headers(), body: JSON.stringify(message) })
    const sid = res.headers['mcp-session-id']
    if (typeof sid === 'string' && sid !== '') this.sessionId = sid
    if (res.statusCode === 202) {
      await res.body.dump()
      if ('method' in message && message.method === 'notifications/initialized') this.openGetStream()
      return
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await res.body.text().catch(() => '')
      throw new Error(`HTTP ${res.statusCode} from ${this.url.href}${text !== '' ? `: ${text.slice(0, 200)}` : ''}`)
    }
    const type = String(res.headers['content-type'] ?? '')
    if (type.startsWith('application/json')) {
      const body = await res.body.json() as JSONRPCMessage | JSONRPCMessage[]
      for (const m of Array.isArray(body) ? body : [body]) this.onmessage?.(m)
      return
    }
    if (type.startsWith('text/event-stream')) {
      // The answer streams; consume it without holding up the caller.
      void this.readSse(res.body, false).catch(err => this.onerror?.(err as Error))
      return
    }
    await res.body.dump()
  }

  private async readSse (body: AsyncIterable<Uint8Array>, standalone: boolean): Promise<void> {
    const decoder = new TextDecoder()
    const parser = createParser({
      onEvent: event => {
        if (standalone && event.id !== undefined) this.lastEventId = event.id
        if (event.event !== undefined && event.event !== 'message') return
        if (event.data === '') return
        try {
          this.onmessage?.(JSON.parse(event.data) as JSONRPCMessage)
        } catch (err) {
          this.onerror?.(err as Error)
        }
      }
    })
    for await (const chunk of body) parser.feed(decoder.decode(chunk, { stream: true }))
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
            await this.readSse(res.body, true)
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
    await this.pool.close().catch(() => {})
    this.onclose?.()
  }
}
