/**
 * What the two HTTP transports to a target share — streamable HTTP (streamable.ts, the
 * initialize-era sessions) and stateless 2026-07-28 (stateless.ts): the keep-alive pool,
 * a JSON answer read within maxMessageBytes, an SSE answer read event by event within it,
 * and the error an unexpected status becomes. One piece, so a fix to how a target's bytes
 * are bounded or parsed reaches both revisions (and the next one).
 */

import type { Pool, Dispatcher } from 'undici'
import { undici } from '../../util/undici.ts'
import { createParser } from 'eventsource-parser'
import { messageTooLarge, readLimited, SseEventMeter } from '../protocol/message-limits.ts'
import { redactUrl } from '../../ir/redact.ts'
import { PorticoError } from '../../util/errors.ts'

/** Enough of an error page for a log line. */
const MAX_ERROR_TEXT_BYTES = 4096

type Body = AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => unknown }

/** The keep-alive pool of one target origin; no body timeout (answers stream, their callers time them). */
export function upstreamPool (url: URL): Pool {
  return new (undici().Pool)(url.origin, { connections: 64, keepAliveTimeout: 30_000, bodyTimeout: 0 })
}

/**
 * The error an answer with an unexpected status becomes: the status, the URL (credentials
 * redacted) and the start of the body, read within MAX_ERROR_TEXT_BYTES.
 */
export async function httpStatusError (res: Dispatcher.ResponseData, url: URL): Promise<Error> {
  const text = await readLimited(res.body, MAX_ERROR_TEXT_BYTES).then(b => b.toString('utf8'), () => '')
  return new PorticoError('PORTICO_MCP_UPSTREAM_HTTP', `HTTP ${res.statusCode} from ${redactUrl(url.href)}${text !== '' ? `: ${text.slice(0, 200)}` : ''}`)
}

/** A JSON answer, parsed, within `maxBytes` (a declared length past it fails before reading). */
export async function readJsonAnswer (res: Dispatcher.ResponseData, maxBytes: number): Promise<unknown> {
  const declared = Number(res.headers['content-length'] ?? NaN)
  if (declared > maxBytes) {
    res.body.destroy()
    throw messageTooLarge('an answer', maxBytes)
  }
  return JSON.parse((await readLimited(res.body, maxBytes, 'an answer')).toString('utf8')) as unknown
}

export interface SseReadOptions {
  /** Largest single event accepted; past it the body is destroyed and the read rejects. */
  maxEventBytes: number
  /** Each event's id ('' resets it), a priming event's too. */
  onId?(id: string): void
  /** A `retry` field, as the parser reads it. */
  onRetry?(ms: number): void
  /** Each `message` event (or one without a type) with data, parsed as JSON. */
  onMessage(message: unknown): void
  /** An event whose data is not JSON (the read goes on). */
  onBadMessage(err: Error): void
  /** Checked after each chunk: true ends the read here (the body is destroyed). */
  done?(): boolean
}

/** Reads an SSE body to its end (or until `done`), each event bounded by maxEventBytes. */
export async function readSse (body: Body, options: SseReadOptions): Promise<void> {
  const decoder = new TextDecoder()
  const meter = new SseEventMeter(options.maxEventBytes)
  const parser = createParser({
    onId: options.onId,
    onRetry: options.onRetry,
    onEvent: event => {
      if (event.event !== undefined && event.event !== 'message') return
      if (event.data === '') return
      let message: unknown
      try {
        message = JSON.parse(event.data)
      } catch (err) {
        options.onBadMessage(err as Error)
        return
      }
      options.onMessage(message)
    }
  })
  for await (const chunk of body) {
    if (!meter.feed(chunk)) {
      const err = messageTooLarge('an event', options.maxEventBytes)
      body.destroy?.(err)
      throw err
    }
    parser.feed(decoder.decode(chunk, { stream: true }))
    if (options.done?.() === true) {
      // A stream may be held open by the server after what was awaited: it has served its purpose.
      body.destroy?.()
      break
    }
  }
}
