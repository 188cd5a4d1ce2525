/**
 * Where messages for the client go. Streamable HTTP has two kinds of stream: the response to
 * a POST (a single JSON body, or an SSE stream when the server has more to say before the
 * response — decided at the first message, so plain request/response pays no SSE framing)
 * and the standalone GET stream for messages unrelated to a request. The legacy HTTP+SSE
 * transport has one stream for everything.
 *
 * SSE events carry ids `<stream>:<seq>`; an EventLog keeps recent ones so a client can
 * resume a broken stream with `Last-Event-ID`.
 */

import type { ServerResponse } from 'node:http'
import { isResponse, type JsonRpcId, type JsonRpcMessage } from './jsonrpc.ts'
import type { RequestSpan } from '../trace/otel.ts'

/** The head to write; null when the finish step answered the request itself (the stream is over). */
export type Head = { status: number, headers: Record<string, string | string[]> } | null

/**
 * The finish step of an answer's head, passed in by mcp/http.ts (the pipeline's response
 * policies and trace, as for every other answer): given the status and the headers the
 * answer would send, returns the head to write — at once, or once an asynchronous response
 * policy (extProc) has answered; what is sent meanwhile waits.
 */
export type HeadHook = (status: number, headers: Record<string, string>) => Head | Promise<Head>

/** Writes the head as it is (a channel nobody finishes, in unit tests). */
const PLAIN_HEAD: HeadHook = (status, headers) => ({ status, headers })

/** Calls `then` with the hook's head: at once when it has it, else when it comes. */
export function withHead (res: ServerResponse, head: Head | Promise<Head>, then: (head: NonNullable<Head>) => void): void {
  if (!(head instanceof Promise)) {
    if (head !== null && !res.headersSent && !res.destroyed) then(head)
    return
  }
  head.then(h => {
    if (h !== null && !res.headersSent && !res.destroyed) then(h)
  }, (err: Error) => res.destroy(err))
}

export interface Channel {
  /** Delivers one message; returns false when the channel can no longer carry it. */
  deliver(message: JsonRpcMessage): boolean
  readonly open: boolean
  /** The OpenTelemetry span of the HTTP request this channel answers: the parent of the target calls it causes. */
  readonly span?: RequestSpan | null
  /** The session calls a target for a request this channel answers (the trace's backend call starts). */
  calling?(target: string): void
}

interface LoggedEvent {
  seq: number
  data: string
}

const MAX_EVENTS_PER_STREAM = 200
const MAX_STREAMS = 100

/** Recent SSE events per stream, for `Last-Event-ID` resumption. Bounded. */
export class EventLog {
  private readonly streams = new Map<string, { events: LoggedEvent[], seq: number, live: SseWriter | null, ended: boolean }>()
  private nextStream = 1

  newStream (): string {
    const id = `s${this.nextStream++}`
    this.streams.set(id, { events: [], seq: 0, live: null, ended: false })
    if (this.streams.size > MAX_STREAMS) {
      const oldest = this.streams.keys().next().value as string
      this.streams.delete(oldest)
    }
    return id
  }

  append (stream: string, data: string): string {
    const s = this.streams.get(stream)
    if (s === undefined) return `${stream}:0`
    const seq = ++s.seq
    s.events.push({ seq, data })
    if (s.events.length > MAX_EVENTS_PER_STREAM) s.events.shift()
    return `${stream}:${seq}`
  }

  /** Events after `lastEventId` on its stream; null when the id is unknown or too old. */
  after (lastEventId: string): { stream: string, events: Array<{ id: string, data: string }>, ended: boolean } | null {
    const colon = lastEventId.lastIndexOf(':')
    if (colon <= 0) return null
    const stream = lastEventId.slice(0, colon)
    const seq = Number(lastEventId.slice(colon + 1))
    const s = this.streams.get(stream)
    if (s === undefined || !Number.isInteger(seq)) return null
    if (s.events.length > 0 && s.events[0]!.seq > seq + 1) return null
    return { stream, events: s.events.filter(e => e.seq > seq).map(e => ({ id: `${stream}:${e.seq}`, data: e.data })), ended: s.ended }
  }

  attach (stream: string, writer: SseWriter | null): void {
    const s = this.streams.get(stream)
    if (s !== undefined) s.live = writer
  }

  live (stream: string): SseWriter | null {
    return this.streams.get(stream)?.live ?? null
  }

  end (stream: string): void {
    const s = this.streams.get(stream)
    if (s !== undefined) {
      s.ended = true
      s.live = null
    }
  }
}

/** Writes SSE frames to one HTTP response. */
export class SseWriter {
  readonly res: ServerResponse
  private keepalive: NodeJS.Timeout | undefined
  /** Frames written while the head waits for an asynchronous response policy; null once it is out. */
  private pending: string[] | null = null
  private endPending = false

  constructor (res: ServerResponse, headers: Record<string, string>, head: HeadHook = PLAIN_HEAD, keepaliveMs = 15_000) {
    this.res = res
    if (!res.headersSent) {
      const h = head(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
        ...headers
      })
      if (h instanceof Promise) this.pending = []
      withHead(res, h, ({ status, headers }) => {
        res.writeHead(status, headers)
        res.flushHeaders()
        const frames = this.pending ?? []
        this.pending = null
        for (const frame of frames) res.write(frame)
        if (this.endPending) res.end()
      })
    }
    if (keepaliveMs > 0) {
      this.keepalive = setInterval(() => { if (this.open && this.pending === null) res.write(': keepalive\n\n') }, keepaliveMs)
      this.keepalive.unref()
      res.once('close', () => clearInterval(this.keepalive))
    }
  }

  get open (): boolean {
    return !this.res.destroyed && !this.res.writableEnded
  }

  event (data: string, id?: string, event?: string): void {
    if (!this.open) return
    let frame = ''
    if (event !== undefined) frame += `event: ${event}\n`
    if (id !== undefined) frame += `id: ${id}\n`
    frame += `data: ${data}\n\n`
    if (this.pending !== null) this.pending.push(frame)
    else this.res.write(frame)
  }

  end (): void {
    clearInterval(this.keepalive)
    if (this.pending !== null) this.endPending = true
    else if (this.open) this.res.end()
  }
}

/**
 * The answer to one POST. Requests in the POST are awaited by id; once every one has its
 * response the channel ends. Until something other than a final response must be sent it
 * stays undecided, so a lone response goes out as plain JSON.
 */
export class PostChannel implements Channel {
  private readonly res: ServerResponse
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

  constructor (res: ServerResponse, options: { requestIds: JsonRpcId[], batch: boolean, headers: Record<string, string>, log: EventLog | null, head?: HeadHook, statusOf?: (message: JsonRpcMessage) => number, span?: RequestSpan | null, onCall?: (target: string) => void }) {
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

/**
 * The session's stream for messages unrelated to any request (GET in streamable HTTP; the
 * one and only stream of the legacy transport). Messages that arrive while no client is
 * listening wait in the log and are sent when one connects.
 */
export class SessionStream implements Channel {
  private readonly log: EventLog
  readonly streamId: string
  private writer: SseWriter | null = null
  private readonly backlog: string[] = []
  private readonly legacy: boolean
  /**
   * When the client's stream last closed; null while it is connected or before it ever
   * was. The gateway lets a session whose client went away go after a grace period.
   */
  disconnectedAt: number | null = null

  constructor (log: EventLog, legacy = false) {
    this.log = log
    this.streamId = log.newStream()
    this.legacy = legacy
  }

  get open (): boolean {
    return true
  }

  get connected (): boolean {
    return this.writer?.open === true
  }

  connect (writer: SseWriter, replayAfter?: number): void {
    this.writer?.end()
    this.writer = writer
    this.disconnectedAt = null
    this.log.attach(this.streamId, writer)
    if (replayAfter !== undefined) {
      const replay = this.log.after(`${this.streamId}:${replayAfter}`)
      for (const e of replay?.events ?? []) writer.event(e.data, e.id, this.legacy ? 'message' : undefined)
    }
    for (const data of this.backlog.splice(0)) this.write(data)
  }

  disconnect (writer: SseWriter): void {
    if (this.writer !== writer) return
    this.writer = null
    this.disconnectedAt = Date.now()
    this.log.attach(this.streamId, null)
  }

  deliver (message: JsonRpcMessage): boolean {
    const data = JSON.stringify(message)
    if (this.writer?.open !== true) {
      if (this.backlog.length < 1000) this.backlog.push(data)
      return true
    }
    this.write(data)
    return true
  }

  private write (data: string): void {
    const id = this.legacy ? undefined : this.log.append(this.streamId, data)
    this.writer?.event(data, id, this.legacy ? 'message' : undefined)
  }

  close (): void {
    this.writer?.end()
    this.writer = null
  }
}
