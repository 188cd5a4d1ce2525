/**
 * Where messages for the client go. Streamable HTTP has two kinds of stream: the response to
 * a POST (a single JSON body, or an SSE stream when the server has more to say before the
 * response — decided at the first message, so plain request/response pays no SSE framing)
 * and the standalone GET stream for messages unrelated to a request. The legacy HTTP+SSE
 * transport has one stream for everything.
 *
 * SSE events carry ids `<stream>:<seq>`; an EventLog keeps recent ones so a client can
 * resume a broken stream with `Last-Event-ID`.
 *
 * This room holds what a session owns: the Channel it delivers to, the event log and the
 * session's own stream. The answer to one POST is client/post-channel.ts; SSE frames are
 * written by protocol/sse-writer.ts.
 */

import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { RequestSpan } from '../../trace/otel.ts'
import type { SseWriter } from '../protocol/sse-writer.ts'

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
