/**
 * The client side of the legacy HTTP+SSE transport (revision 2024-11-05), for targets that
 * still speak it: one GET event stream that stays open for the whole upstream session, whose
 * first `endpoint` event names where to POST; every message the target sends, answers
 * included, comes as a `message` event on that stream, and a POST is only acknowledged
 * (202, or 200). The session is the stream: when it ends, the transport closes and the
 * target connection restarts and re-initializes it (target.ts), as after a crash.
 *
 * It goes through the same pieces as the other HTTP transports (http-shared.ts): Portico's
 * HTTP/1.1 pool (TLS verified as for any https target), the stream read chunk by chunk by
 * one dispatch handler and its SSE parser. It replaces the SDK's SSEClientTransport (fetch,
 * web streams and the `eventsource` package, with zod on every message), keeping what the
 * gateway relied on: start() resolves once the endpoint is known, an endpoint on another
 * origin than the target's URL is refused (the SDK's rule: a target must not send the
 * gateway's POSTs elsewhere), a POST's error status fails its send.
 *
 * What the target sends is bounded: one event past `maxMessageBytes` (an answer, or an event
 * with no end) drops the connection — its single stream carries every answer, so there is no
 * answer to drop alone — as a crash, with `fault` saying why; waiting for the stream and its
 * endpoint, and for each POST's acknowledgement, is bounded by the target's requestTimeout.
 */

import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import type { H1Pool } from '../../http/h1-pool.ts'
import { isPorticoError, PorticoError } from '../../util/errors.ts'
import { validMessage, type JsonRpcId } from '../protocol/jsonrpc.ts'
import { MESSAGE_TOO_LARGE } from '../protocol/message-limits.ts'
import { httpStatusError, readSse, startRequest, upstreamPool, type TargetAnswer } from './http-shared.ts'
import type { UpstreamTransport } from './transport.ts'

export interface SseClientTransportOptions {
  /** Largest SSE event accepted from the target (default 4 MiB). */
  maxMessageBytes?: number
  /** Bounds the wait for the stream and its endpoint, and for each POST's acknowledgement (default 60 s). */
  requestTimeoutMs?: number
}

const DEFAULT_REQUEST_TIMEOUT_MS = 60_000
const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
const STREAM_HEADERS = { accept: 'text/event-stream' }
const POST_HEADERS = { 'content-type': 'application/json' }
/** How much of a target-named URL an error message repeats. */
const MAX_QUOTED_CHARS = 200

export class SseClientTransport implements UpstreamTransport {
  readonly kind = 'sse' as const
  /** Why the transport closed itself for a fault of the target's (an oversized event, a foreign endpoint), or null. */
  fault: string | null = null
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private readonly url: URL
  private readonly pool: H1Pool
  private readonly maxMessageBytes: number
  private readonly requestTimeoutMs: number
  /** The GET stream's answer, once asked for. */
  private stream: TargetAnswer | null = null
  /** Where messages are POSTed (the `endpoint` event's URL), null until it came. */
  private endpoint: URL | null = null
  /** start()'s promise, until the endpoint came or the start failed. */
  private starting: { resolve: () => void, reject: (err: Error) => void, timer: NodeJS.Timeout } | null = null
  /** The start failed: the caller was told (start rejected) and closes the transport itself. */
  private startFailed = false
  private closed = false
  /** POSTs of requests not yet acknowledged, to abort when abandoned. */
  private readonly inflight = new Map<JsonRpcId, TargetAnswer>()

  constructor (url: URL, options: SseClientTransportOptions = {}) {
    this.url = url
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
    this.pool = upstreamPool(url)
  }

  /** Opens the event stream; resolves once the target named its endpoint (within requestTimeout). */
  start (): Promise<void> {
    if (this.closed) return Promise.reject(new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed'))
    if (this.stream !== null) return Promise.reject(new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'the transport was started already'))
    return new Promise((resolve, reject) => {
      const ms = this.requestTimeoutMs
      const timer = setTimeout(() => this.failStart(new PorticoError('PORTICO_MCP_TIMEOUT', `the target named no endpoint on its event stream within ${ms} ms`)), ms)
      this.starting = { resolve, reject, timer }
      void this.listen()
    })
  }

  /** The GET stream, read until it ends, breaks or is cut. */
  private async listen (): Promise<void> {
    const stream = startRequest(this.pool, { path: this.url.pathname + this.url.search, method: 'GET', headers: STREAM_HEADERS })
    this.stream = stream
    try {
      const res = await stream.head
      if (res.statusCode !== 200) throw await httpStatusError(res, this.url)
      const type = res.header('content-type')
      if (!type.toLowerCase().startsWith('text/event-stream')) {
        res.destroy()
        throw new PorticoError('PORTICO_MCP_PROTOCOL', `the target answered its event stream with ${type === '' ? 'no content type' : type.slice(0, MAX_QUOTED_CHARS)}`)
      }
      await readSse(res, {
        maxEventBytes: this.maxMessageBytes,
        onOtherEvent: (type, data) => {
          if (type === 'endpoint') this.onEndpoint(data)
        },
        onBadMessage: err => this.onerror?.(err),
        onMessage: value => {
          // Events after a fault in the same chunk: the connection is being dropped.
          if (this.fault !== null || this.closed) return
          if (!validMessage(value)) {
            this.onerror?.(new PorticoError('PORTICO_MCP_PROTOCOL', 'the target sent an event that is not a JSON-RPC message'))
            return
          }
          this.onmessage?.(value as JSONRPCMessage)
        }
      })
      throw new PorticoError('PORTICO_MCP_UPSTREAM_STREAM', 'the target closed its event stream')
    } catch (err) {
      this.streamEnded(err as Error)
    }
  }

  /**
   * The endpoint event: the POST URL, resolved against the target's URL; another origin is
   * refused (the target would have the gateway send its clients' messages elsewhere). A
   * later endpoint event moves the POSTs, within the origin.
   */
  private onEndpoint (data: string): void {
    let url: URL
    try {
      url = new URL(data, this.url)
    } catch {
      this.drop(new PorticoError('PORTICO_MCP_PROTOCOL', `the target named an endpoint that is not a URL: ${data.slice(0, MAX_QUOTED_CHARS)}`))
      return
    }
    if (url.origin !== this.url.origin) {
      this.drop(new PorticoError('PORTICO_MCP_PROTOCOL', `the target named an endpoint on another origin (${url.origin.slice(0, MAX_QUOTED_CHARS)}); refused`))
      return
    }
    this.endpoint = url
    const starting = this.starting
    if (starting === null) return
    this.starting = null
    clearTimeout(starting.timer)
    starting.resolve()
  }

  /** A fault of the target's: the stream is cut, the transport closes (or the start fails) saying why. */
  private drop (err: PorticoError): void {
    if (this.closed) return
    this.fault ??= err.message
    this.stream?.destroy(err)
  }

  /**
   * The stream is over: the start fails with why, or the open transport closes — an event
   * past the limit being the target's fault, a stream that ended or broke being a
   * disconnection. Either way the target connection restarts it.
   */
  private streamEnded (err: Error): void {
    if (this.closed || this.startFailed) return
    if (isPorticoError(err, MESSAGE_TOO_LARGE)) this.fault ??= err.message
    if (this.starting !== null) {
      this.failStart(err)
      return
    }
    this.onerror?.(err)
    void this.close()
  }

  /** The start fails: the stream is cut; the caller closes the transport (onclose comes then, once). */
  private failStart (err: Error): void {
    const starting = this.starting
    if (starting === null) return
    this.starting = null
    this.startFailed = true
    clearTimeout(starting.timer)
    this.stream?.destroy(err)
    starting.reject(err)
  }

  /** POSTs a message to the endpoint; resolves once the target acknowledged it (its answer, if any, comes on the stream). */
  async send (message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed')
    if (this.endpoint === null) throw new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'not connected: the target has not named its endpoint')
    const id = 'method' in message && 'id' in message ? message.id as JsonRpcId : undefined
    const ms = this.requestTimeoutMs
    const call = startRequest(this.pool, { path: this.endpoint.pathname + this.endpoint.search, method: 'POST', headers: POST_HEADERS, body: JSON.stringify(message), headersTimeoutMs: ms, idleTimeoutMs: ms })
    if (id !== undefined) this.inflight.set(id, call)
    try {
      const res = await call.head
      if (res.statusCode < 200 || res.statusCode >= 300) throw await httpStatusError(res, this.endpoint)
      await res.dump()
    } catch (err) {
      // An abandoned request or a closed transport was given up on: nobody to tell.
      const givenUp = this.closed || (id !== undefined && this.inflight.get(id) !== call)
      if (!givenUp) this.onerror?.(err as Error)
      throw err
    } finally {
      if (id !== undefined && this.inflight.get(id) === call) this.inflight.delete(id)
    }
  }

  /** Gives up on a request whose POST is not yet acknowledged: it is aborted, its connection closed. */
  abandon (id: JsonRpcId): void {
    const call = this.inflight.get(id)
    if (call === undefined) return
    this.inflight.delete(id)
    call.destroy()
  }

  /** Ends the stream (and with it the upstream session) and every POST under way. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    const err = new PorticoError('PORTICO_MCP_TRANSPORT_CLOSED', 'transport closed')
    this.failStart(err)
    this.stream?.destroy(err)
    for (const call of this.inflight.values()) call.destroy(err)
    this.inflight.clear()
    await this.pool.destroy().catch(() => {})
    this.onclose?.()
  }
}
