/**
 * The size cap on what a remote MCP target sends (its `maxMessageSize`): a JSON response
 * body, or one server-sent event. Without it a target that streams an event with no end, or
 * an endless body, grows a buffer in the gateway until memory runs out — a fault of one
 * target becoming everyone's.
 */

import { PorticoError, type PorticoErrorCode } from '../../util/errors.ts'

export const MESSAGE_TOO_LARGE = 'PORTICO_MCP_MESSAGE_TOO_LARGE' satisfies PorticoErrorCode

export function messageTooLarge (what: string, limit: number): PorticoError {
  return new PorticoError(MESSAGE_TOO_LARGE, `${what} of more than ${limit} bytes (maxMessageSize)`)
}

/** A body read whole, up to `limit` bytes; past it the body is destroyed and this rejects. */
export async function readLimited (body: AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => unknown }, limit: number, what = 'an answer'): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    if (size > limit) {
      const err = messageTooLarge(what, limit)
      body.destroy?.(err)
      throw err
    }
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
  }
  return Buffer.concat(chunks, size)
}

const LF = 0x0a
const CR = 0x0d

/**
 * Counts the bytes of the event being received on an SSE stream; `feed` says false once one
 * event passes the limit. Events end at a blank line; lines end at CRLF, LF or CR (as the
 * SSE parser reads them), so a chunk boundary anywhere is fine.
 */
export class SseEventMeter {
  private readonly limit: number
  private eventBytes = 0
  private lineBytes = 0
  private afterCr = false

  constructor (limit: number) {
    this.limit = limit
  }

  feed (chunk: Uint8Array): boolean {
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!
      if (b === LF && this.afterCr) {
        // The LF of a CRLF: that line already ended at its CR.
        this.afterCr = false
        continue
      }
      this.afterCr = b === CR
      if (b === LF || b === CR) {
        if (this.lineBytes === 0) this.eventBytes = 0
        this.lineBytes = 0
        continue
      }
      this.lineBytes++
      if (++this.eventBytes > this.limit) return false
    }
    return true
  }
}

/**
 * A fetch whose response bodies keep to `limit`: per event for an event stream, whole for
 * anything else. The body errors past the limit and `onOverflow` is called (for the SDK's
 * legacy SSE client transport, which reads through fetch).
 */
export function limitedFetch (limit: number, onOverflow: (err: PorticoError) => void, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init)
    if (res.body === null || res.status < 200 || res.status >= 300) return res
    const stream = String(res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream')
    const meter = stream ? new SseEventMeter(limit) : null
    let total = 0
    const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      transform (chunk, controller) {
        total += chunk.length
        if (meter !== null ? !meter.feed(chunk) : total > limit) {
          const err = messageTooLarge(stream ? 'an event' : 'an answer', limit)
          controller.error(err)
          onOverflow(err)
          return
        }
        controller.enqueue(chunk)
      }
    }))
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
  }
}
