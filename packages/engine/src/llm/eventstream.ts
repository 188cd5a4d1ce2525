/**
 * The AWS event stream (`application/vnd.amazon.eventstream`), the binary framing of Bedrock's
 * ConverseStream answers: one incremental reader (provider bytes → messages) and one writer,
 * the counterpart of `sse.ts` for binary streams. Header and CRC parsing is the AWS SDK's own
 * (`@smithy/eventstream-codec`, loaded at first use so a gateway without Bedrock never loads it).
 *
 * A message is `total length (4) | headers length (4) | prelude CRC32 (4) | headers | payload |
 * message CRC32 (4)`, big-endian. The reader checks the prelude CRC as soon as its 12 bytes are
 * in, before waiting for the rest: a length that is garbage (a corrupted or hostile stream) is
 * refused at once instead of making the reader buffer up to 4 GiB. Messages larger than
 * `maxMessageBytes` are refused the same way; the codec then checks the whole message's CRC.
 */

import { crc32 } from 'node:zlib'
import type * as Codec from '@smithy/eventstream-codec'
import type * as Utf8 from '@smithy/util-utf8'
import { lazyRequire } from '../util/lazy-require.ts'

const codecModule = lazyRequire<typeof Codec>('@smithy/eventstream-codec')
const utf8Module = lazyRequire<typeof Utf8>('@smithy/util-utf8')

let codecInstance: Codec.EventStreamCodec | undefined
function codec (): Codec.EventStreamCodec {
  if (codecInstance === undefined) {
    const { toUtf8, fromUtf8 } = utf8Module()
    codecInstance = new (codecModule().EventStreamCodec)(toUtf8, fromUtf8)
  }
  return codecInstance
}

/**
 * Default bound on one message. The format allows 16 MiB; a streamed Converse event is a few
 * hundred bytes (a text delta, a fragment of tool arguments), so 4 MiB is far past any real one.
 */
export const EVENTSTREAM_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

const PRELUDE_BYTES = 12
const MIN_MESSAGE_BYTES = 16

/** One decoded message, with its string headers flattened (the only kind Bedrock sends). */
export interface EventStreamMessage {
  /** Header name → value; non-string headers are given as their string form. */
  headers: Record<string, string>
  payload: Buffer
}

export class EventStreamReader {
  private pending: Buffer[] = []
  private pendingBytes = 0
  /** Set at the first framing error: later input is ignored. */
  failed: string | null = null
  private readonly maxMessageBytes: number

  constructor (maxMessageBytes: number = EVENTSTREAM_MAX_MESSAGE_BYTES) {
    this.maxMessageBytes = maxMessageBytes
  }

  /** Whole messages completed by this chunk; a framing error sets `failed` and returns the messages before it. */
  push (chunk: Buffer): EventStreamMessage[] {
    if (this.failed !== null) return []
    if (chunk.length > 0) {
      this.pending.push(chunk)
      this.pendingBytes += chunk.length
    }
    const out: EventStreamMessage[] = []
    while (this.pendingBytes >= PRELUDE_BYTES) {
      const head = this.peek(PRELUDE_BYTES)
      const total = head.readUInt32BE(0)
      if (crc32(head.subarray(0, 8)) !== head.readUInt32BE(8)) return this.fail(out, 'event stream prelude checksum mismatch')
      if (total < MIN_MESSAGE_BYTES) return this.fail(out, `event stream message length ${total} is too small`)
      if (total > this.maxMessageBytes) return this.fail(out, `event stream message of ${total} bytes exceeds the limit of ${this.maxMessageBytes}`)
      if (this.pendingBytes < total) break
      const frame = this.take(total)
      let message: Codec.Message
      try {
        message = codec().decode(frame)
      } catch (err) {
        // The codec's own checks: the message CRC, header lengths and types.
        return this.fail(out, `malformed event stream message: ${(err as Error).message}`)
      }
      const headers: Record<string, string> = {}
      for (const [name, header] of Object.entries(message.headers)) {
        headers[name] = header.type === 'string' ? header.value : String(header.value)
      }
      out.push({ headers, payload: Buffer.from(message.body.buffer, message.body.byteOffset, message.body.byteLength) })
    }
    return out
  }

  /** The end of the stream: bytes of a message left unfinished are a cut stream (an error). */
  end (): string | null {
    if (this.failed !== null) return this.failed
    if (this.pendingBytes > 0) {
      this.failed = `event stream ended inside a message (${this.pendingBytes} bytes left over)`
      this.pending = []
      this.pendingBytes = 0
    }
    return this.failed
  }

  private fail (out: EventStreamMessage[], reason: string): EventStreamMessage[] {
    this.failed = reason
    this.pending = []
    this.pendingBytes = 0
    return out
  }

  /** All pending bytes as one buffer (joined once; the reader then keeps them joined). */
  private joined (): Buffer {
    const first = this.pending[0]
    if (this.pending.length === 1 && first !== undefined) return first
    const all = Buffer.concat(this.pending)
    this.pending = [all]
    return all
  }

  private peek (n: number): Buffer {
    const first = this.pending[0]
    if (first !== undefined && first.length >= n) return first.subarray(0, n)
    // Copies only the first n bytes: a large message arriving in many reads is joined once, when complete.
    return Buffer.concat(this.pending, n)
  }

  private take (n: number): Buffer {
    const all = this.joined()
    const frame = all.subarray(0, n)
    const rest = all.subarray(n)
    this.pending = rest.length > 0 ? [rest] : []
    this.pendingBytes = rest.length
    return frame
  }
}

/** One message in the event stream's binary form, with string headers (as Bedrock sends them). */
export function encodeEventStreamMessage (headers: Record<string, string>, payload: Buffer | string): Buffer {
  const tagged: Codec.MessageHeaders = {}
  for (const [name, value] of Object.entries(headers)) tagged[name] = { type: 'string', value }
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload
  const bytes = codec().encode({ headers: tagged, body })
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}
