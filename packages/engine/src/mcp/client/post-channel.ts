/**
 * The answer to one client POST (streamable HTTP, and 2026-07-28 requests): a Channel that
 * writes a single JSON body, or switches to SSE when more than the final responses must be
 * sent. Events of an SSE answer go to the session's EventLog, so a client can resume it.
 */

import type { InboundResponse } from '../../http/inbound.ts'
import { isResponse, type JsonRpcId, type JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { RequestSpan } from '../../trace/otel.ts'
import { PLAIN_HEAD, SseWriter, withHead, type HeadHook } from '../protocol/sse-writer.ts'
import type { Channel, EventLog } from '../session/channels.ts'

/**
 * The answer to one POST. Requests in the POST are awaited by id; once every one has its
 * response the channel ends. Until something other than a final response must be sent it
 * stays undecided, so a lone response goes out as plain JSON.
 */
export class PostChannel implements Channel {
  private readonly res: InboundResponse
  private readonly awaiting: Set<JsonRpcId>
  private readonly batch: boolean
  private readonly collected: JsonRpcMessage[] = []
  private readonly headers: Record<string, string>
  private readonly log: EventLog | null
  private sse: SseWriter | null = null
  private stream: string | null = null
  private finished = false
  private readonly head: HeadHook
  /** Called with the error of each final error response, before it is written. */
  onError: ((error: { code: number, message: string }) => void) | null = null
  private readonly onCall: ((target: string) => void) | null

  /** The HTTP status of a JSON answer (2026-07-28 gives some errors their own; default 200). */
  private readonly statusOf: (message: JsonRpcMessage) => number
  readonly span: RequestSpan | null

  constructor (res: InboundResponse, options: { requestIds: JsonRpcId[], batch: boolean, headers: Record<string, string>, log: EventLog | null, head?: HeadHook, statusOf?: (message: JsonRpcMessage) => number, span?: RequestSpan | null, onCall?: (target: string) => void }) {
    this.res = res
    this.onCall = options.onCall ?? null
    this.span = options.span ?? null
    this.statusOf = options.statusOf ?? (() => 200)
    this.head = options.head ?? PLAIN_HEAD
    this.awaiting = new Set(options.requestIds)
    this.batch = options.batch
    this.headers = options.headers
    this.log = options.log
  }

  get open (): boolean {
    return !this.finished && !this.res.destroyed
  }

  calling (target: string): void {
    this.onCall?.(target)
  }

  /** True while this POST still waits for the response to `id`. */
  awaits (id: JsonRpcId): boolean {
    return this.awaiting.has(id)
  }

  deliver (message: JsonRpcMessage): boolean {
    if (this.finished) return false
    const final = isResponse(message) && message.id !== null && this.awaiting.delete(message.id)
    if (final && 'error' in message) this.onError?.(message.error)
    if (this.sse === null && final) {
      this.collected.push(message)
      if (this.awaiting.size === 0) this.sendJson()
      return true
    }
    this.switchToSse()
    this.writeEvent(message)
    if (this.awaiting.size === 0) this.finish()
    return true
  }

  private sendJson (): void {
    this.finished = true
    if (this.res.destroyed) return
    const body = JSON.stringify(this.batch ? this.collected : this.collected[0])
    this.sendWhole(this.batch ? 200 : this.statusOf(this.collected[0]!), body)
  }

  /** A whole JSON answer, its head through the finish step. */
  private sendWhole (status: number, body: string): void {
    withHead(this.res, this.head(status, { 'content-type': 'application/json', ...this.headers }), head => {
      this.res.writeHead(head.status, { ...head.headers, 'content-length': String(Buffer.byteLength(body)) })
      this.res.end(body)
    })
  }

  private switchToSse (): void {
    if (this.sse !== null) return
    this.sse = new SseWriter(this.res, this.headers, this.head)
    if (this.log !== null) {
      const stream = this.log.newStream()
      this.stream = stream
      this.log.attach(stream, this.sse)
      const sse = this.sse
      this.res.once('close', () => {
        if (this.log!.live(stream) === sse) this.log!.attach(stream, null)
      })
    }
    // Responses collected before the switch (batches) go out first.
    for (const m of this.collected.splice(0)) this.writeEvent(m)
  }

  private writeEvent (message: JsonRpcMessage): void {
    const data = JSON.stringify(message)
    const id = this.stream !== null && this.log !== null ? this.log.append(this.stream, data) : undefined
    // After a disconnect the event stays in the log for a resuming GET.
    const writer = this.stream !== null && this.log !== null ? this.log.live(this.stream) : this.sse
    writer?.event(data, id)
  }

  private finish (): void {
    this.finished = true
    if (this.stream !== null) {
      const writer = this.log?.live(this.stream)
      this.log?.end(this.stream)
      writer?.end()
    }
    this.sse?.end()
  }

  /** Ends the POST with an HTTP error before anything was sent. */
  fail (status: number, body: JsonRpcMessage): void {
    if (this.finished) return
    this.finished = true
    // An SSE head may still wait for a response policy: the stream is ended, not answered again.
    if (this.sse !== null || this.res.headersSent) {
      this.sse?.end()
      return
    }
    this.sendWhole(status, JSON.stringify(body))
  }
}
