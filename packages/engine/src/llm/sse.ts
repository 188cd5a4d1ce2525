/**
 * Server-sent events for the LLM stream translators: one incremental reader (provider bytes →
 * events) and one writer, shared by every format that streams over SSE (OpenAI chat and
 * Responses, Anthropic Messages, Gemini's `alt=sse`).
 *
 * The reader is `eventsource-parser` (the parser the MCP transports use too), with what a
 * translator adds around it: bytes are decoded as UTF-8 across pushes, so a character split
 * between two network reads is never garbled; providers are not trusted, so an event larger
 * than `maxEventBytes` (an endless line, a stream with no blank lines) is an error, not
 * memory (the parser's `maxBufferSize`); and events come back as a list per push, which the
 * decoders walk.
 */

import { StringDecoder } from 'node:string_decoder'
import { createParser, type EventSourceParser } from 'eventsource-parser'
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
  private readonly parser: EventSourceParser
  /** Events of the push under way. */
  private events: SseEvent[] = []
  /** Set once the limit was passed: later input is ignored. */
  failed: string | null = null

  constructor (maxEventBytes: number = SSE_MAX_EVENT_BYTES) {
    this.parser = createParser({
      maxBufferSize: maxEventBytes,
      onEvent: e => { this.events.push({ event: e.event ?? '', data: e.data }) },
      // Unknown fields and a bad `retry` are ignored, as the standard says; only the bound fails.
      onError: e => { if (e.type === 'max-buffer-size-exceeded') this.failed ??= `stream event larger than ${maxEventBytes} bytes` }
    })
  }

  push (chunk: Buffer | string): SseEvent[] {
    return this.feed(typeof chunk === 'string' ? chunk : this.decoder.write(chunk))
  }

  /**
   * The end of the stream: a last event without its blank line is still dispatched (the
   * standard drops it; providers cut short do send them, and the decoder decides).
   */
  end (): SseEvent[] {
    return this.feed(this.decoder.end() + '\n\n')
  }

  private feed (text: string): SseEvent[] {
    if (this.failed !== null) return []
    this.parser.feed(text)
    const out = this.events
    this.events = []
    return out
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
