/**
 * Server-sent events for the LLM stream translators: one incremental reader (provider bytes →
 * events) and one writer, shared by every format that streams over SSE (OpenAI chat and
 * Responses, Anthropic Messages, Gemini's `alt=sse`).
 *
 * The reader follows the HTML standard's parsing rules (LF, CRLF or CR line ends; `:` lines
 * are comments; `data` lines of one event are joined with LF; one leading space after the
 * colon is dropped). Bytes are decoded as UTF-8 across pushes, so a character split between
 * two network reads is never garbled. Providers are not trusted: an event larger than
 * `maxEventBytes` (an endless line, a stream with no blank lines) is an error, not memory.
 */

import { StringDecoder } from 'node:string_decoder'
import type { StreamDecoder, StreamEvent, TranslationError } from './canonical.ts'

export interface SseEvent {
  /** The `event:` field, or '' when the event has none (the type is then "message"). */
  event: string
  data: string
}

/** Default bound on one event: a single streamed chunk is small; 4 MiB is far past any. */
export const SSE_MAX_EVENT_BYTES = 4 * 1024 * 1024

export class SseReader {
  private readonly decoder = new StringDecoder('utf8')
  private buffer = ''
  private event = ''
  private data: string[] = []
  private dataSize = 0
  /** Set once the limit was passed: later input is ignored. */
  failed: string | null = null

  private readonly maxEventBytes: number

  constructor (maxEventBytes: number = SSE_MAX_EVENT_BYTES) {
    this.maxEventBytes = maxEventBytes
  }

  push (chunk: Buffer | string): SseEvent[] {
    if (this.failed !== null) return []
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.write(chunk)
    return this.drain(false)
  }

  /** The end of the stream: a last event without its blank line is still dispatched (as browsers do not, but providers cut short do send them). */
  end (): SseEvent[] {
    if (this.failed !== null) return []
    this.buffer += this.decoder.end()
    return this.drain(true)
  }

  private drain (atEnd: boolean): SseEvent[] {
    const out: SseEvent[] = []
    let start = 0
    const buf = this.buffer
    for (;;) {
      let i = start
      while (i < buf.length && buf.charCodeAt(i) !== 10 && buf.charCodeAt(i) !== 13) i++
      if (i === buf.length) break
      // A CR at the very end may be the first half of a CRLF: wait for the next byte.
      if (buf.charCodeAt(i) === 13 && i + 1 === buf.length && !atEnd) break
      this.line(buf.slice(start, i), out)
      start = buf.charCodeAt(i) === 13 && buf.charCodeAt(i + 1) === 10 ? i + 2 : i + 1
      if (this.failed !== null) return out
    }
    this.buffer = buf.slice(start)
    if (this.buffer.length + this.dataSize > this.maxEventBytes) {
      this.failed = `stream event larger than ${this.maxEventBytes} bytes`
      this.buffer = ''
      return out
    }
    if (atEnd) {
      if (this.buffer.length > 0) this.line(this.buffer, out)
      this.buffer = ''
      this.line('', out)
    }
    return out
  }

  private line (line: string, out: SseEvent[]): void {
    if (line === '') {
      if (this.data.length > 0) out.push({ event: this.event, data: this.data.join('\n') })
      this.event = ''
      this.data = []
      this.dataSize = 0
      return
    }
    if (line.charCodeAt(0) === 58) return // ':' comment (keep-alives)
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.charCodeAt(0) === 32) value = value.slice(1)
    if (field === 'data') {
      this.data.push(value)
      this.dataSize += value.length + 1
      if (this.dataSize > this.maxEventBytes) this.failed = `stream event larger than ${this.maxEventBytes} bytes`
    } else if (field === 'event') {
      this.event = value
    }
    // `id` and `retry` mean nothing to a translator.
  }
}

/** One event in SSE wire form. `data` must not contain CR or LF (JSON.stringify output never does). */
export function sseEvent (data: string, event?: string): string {
  return event === undefined ? `data: ${data}\n\n` : `event: ${event}\ndata: ${data}\n\n`
}

/**
 * The skeleton every SSE-backed stream decoder shares (OpenAI chat and Responses, Anthropic
 * Messages, Gemini): provider bytes → SSE events → the format's `event()`, which pushes
 * neutral events. The first error (the format's own, or the reader's: an event past the size
 * bound) ends the stream with one `error` event; nothing is decoded after it, nor after the
 * format says the stream is over (`done`). At the end of the bytes, a stream not yet done is
 * the format's to close (`ended()`): a finish, or an error when it was cut short.
 */
export abstract class SseStreamDecoder implements StreamDecoder {
  protected readonly reader = new SseReader()
  /** Set once the stream failed or finished: later input is ignored. */
  protected done = false

  push (chunk: Buffer): StreamEvent[] {
    if (this.done) return []
    const out: StreamEvent[] = []
    this.read(this.reader.push(chunk), out)
    return out
  }

  end (): StreamEvent[] {
    if (this.done) return []
    const out: StreamEvent[] = []
    this.read(this.reader.end(), out)
    if (!this.done) this.ended(out)
    return out
  }

  private read (events: SseEvent[], out: StreamEvent[]): void {
    for (const event of events) {
      this.event(event, out)
      if (this.done) return
    }
    if (this.reader.failed !== null) this.fail(out, this.invalidStream(this.reader.failed))
  }

  /** Ends the stream with `error` (once: `done` is set). */
  protected fail (out: StreamEvent[], error: TranslationError): void {
    this.done = true
    out.push({ type: 'error', error })
  }

  /** One SSE event: push what it means to `out`; set `done` (or `fail`) when the stream is over. */
  protected abstract event (event: SseEvent, out: StreamEvent[]): void
  /** The bytes ended and the stream is not done: finish it, or fail it as cut short. Must set `done`. */
  protected abstract ended (out: StreamEvent[]): void
  /** The error for a stream the SSE reader refused (`message` says why), in the format's words. */
  protected abstract invalidStream (message: string): TranslationError
}
