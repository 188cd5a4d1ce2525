/**
 * HTTP/2 as an attacker writes it: raw frames (RFC 9113 §4) and HPACK blocks (RFC 7541)
 * built by hand on a plain TCP socket with prior knowledge (h2c), so tests can send what no
 * well-behaved client library would — a flood of reset streams, endless CONTINUATION frames,
 * a header block that decompresses to megabytes.
 */

import { connect, type Socket } from 'node:net'

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

export function frame (type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(streamId & 0x7fffffff, 5)
  return Buffer.concat([head, payload])
}

/** An HPACK integer with an N-bit prefix (RFC 7541 §5.1), the prefix's high bits set to `mask`. */
function integer (value: number, prefixBits: number, mask: number): Buffer {
  const max = (1 << prefixBits) - 1
  if (value < max) return Buffer.from([mask | value])
  const bytes = [mask | max]
  value -= max
  while (value >= 128) {
    bytes.push((value % 128) + 128)
    value = Math.floor(value / 128)
  }
  bytes.push(value)
  return Buffer.from(bytes)
}

function string (s: string | Buffer): Buffer {
  const b = typeof s === 'string' ? Buffer.from(s, 'latin1') : s
  return Buffer.concat([integer(b.length, 7, 0), b])
}

/** Header field representations (no Huffman coding). */
export const hpack = {
  /** An entry of the static or dynamic table by index (§6.1). */
  indexed: (index: number) => integer(index, 7, 0x80),
  /** A literal that is added to the dynamic table (§6.2.1, new name). */
  incremental: (name: string, value: string | Buffer) => Buffer.concat([Buffer.from([0x40]), string(name), string(value)]),
  /** A literal not added to the table (§6.2.2, new name). */
  literal: (name: string, value: string) => Buffer.concat([Buffer.from([0x00]), string(name), string(value)]),
  /** A literal whose name is a table entry (§6.2.2, indexed name). */
  literalIndexedName: (index: number, value: string) => Buffer.concat([integer(index, 4, 0x00), string(value)])
}

/** A GET request's header block: :method GET, :scheme http, :path, :authority, then `extra`. */
export function getRequest (path: string, authority: string, extra: Buffer[] = []): Buffer {
  return Buffer.concat([hpack.indexed(2), hpack.indexed(6), hpack.literalIndexedName(4, path), hpack.literalIndexedName(1, authority), ...extra])
}

export interface RawH2 {
  socket: Socket
  /** Frames received so far (type, flags, stream, payload). */
  frames: Array<{ type: number, flags: number, stream: number, payload: Buffer }>
  closed: Promise<void>
  isClosed(): boolean
  /** Writes, resolving when the socket accepted it (false once the socket is gone). */
  write(data: Buffer): Promise<boolean>
  goaway(): { errorCode: number } | null
}

/** Opens an h2c connection: preface and an empty SETTINGS sent, frames parsed as they come. */
export async function openRawH2 (port: number): Promise<RawH2> {
  const socket = connect({ host: '127.0.0.1', port })
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  const frames: RawH2['frames'] = []
  let buffered = Buffer.alloc(0)
  let closed = false
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk])
    while (buffered.length >= 9) {
      const length = buffered.readUIntBE(0, 3)
      if (buffered.length < 9 + length) break
      const f = { type: buffered[3]!, flags: buffered[4]!, stream: buffered.readUInt32BE(5) & 0x7fffffff, payload: buffered.subarray(9, 9 + length) }
      frames.push(f)
      // Settle the connection the way a client must: acknowledge the server's SETTINGS.
      if (f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0 && !socket.destroyed) socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0))
      buffered = buffered.subarray(9 + length)
    }
  })
  socket.on('error', () => {})
  const closedPromise = new Promise<void>(resolve => socket.once('close', () => { closed = true; resolve() }))
  socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]))
  return {
    socket,
    frames,
    closed: closedPromise,
    isClosed: () => closed,
    write: data => new Promise(resolve => {
      if (socket.destroyed) return resolve(false)
      socket.write(data, err => resolve(err == null))
    }),
    goaway: () => {
      const g = frames.find(f => f.type === FRAME.GOAWAY)
      return g === undefined ? null : { errorCode: g.payload.readUInt32BE(4) }
    }
  }
}
