/**
 * Copying the bytes of one socket into another (TCP and TLS listeners, stream-proxy.ts)
 * without a new buffer per read.
 *
 * Why not `pipe()`: a socket read through the stream API gets a new 64 KiB ArrayBuffer per
 * read, and that external memory makes V8 run old-space collections over the whole heap — on
 * a bulk transfer most of Portico's extra CPU went to mark-compacts ("GC in old space
 * requested", --trace-gc), where a bare Node proxy with a 4 MB heap only scavenges. With
 * `onread` (net.Socket's documented option) a socket reads into a buffer it is given. Here
 * that is one buffer shared by all connections: a read callback runs to its end before the
 * event loop can place another read anywhere, so the bytes are copied out at once, into a
 * recycled buffer (small reads into Node's slab). A relay moving bulk data the target keeps
 * up with reads into a large buffer of its own instead and writes it as it is (no copy, and
 * fewer, larger reads and writes) — one of a bounded number (MAX_BULK_BUFFERS).
 *
 * A buffer given to `write` must not change until the write is flushed. Most writes to a
 * socket that keeps up are flushed at once (the kernel takes the bytes before `write`
 * returns: `writableLength` is back to 0); a buffer whose write waits is `held` and reused
 * only once the target's `writableLength` is 0 (tested by its next read, or 'drain').
 *
 * Backpressure is the sockets' own, as with a pipe: when the target cannot take more (write
 * returns false) the callback returns false, which stops reading the source, and the
 * target's 'drain' resumes it. A source therefore has at most one read in flight beyond the
 * target's high-water mark.
 */

import net, { type Socket } from 'node:net'

/** Every read of a relay without a buffer of its own takes up to this much (the shared buffer, and the recycled copies). */
const READ_BUFFER_BYTES = 64 * 1024
/** Reads smaller than this are copied into Node's shared 8 KiB slab rather than a recycled buffer. */
const SMALL_READ_BYTES = 4096
/** Recycled copies kept for reuse (the rest are left to the collector). */
const MAX_FREE_BUFFERS = 64
/**
 * The buffer of a relay moving bulk data. Larger reads mean fewer system calls and callbacks
 * per byte: Portico's CPU per MiB forwarded fell by a third from 64 KiB to 1 MiB
 * (bench/tcp.ts; 256 KiB was halfway).
 */
const BULK_BUFFER_BYTES = 1024 * 1024
/**
 * Bulk buffers in existence at most (owned, held by a write, or free), allocated as bulk
 * flows need them and kept: at most 16 MiB. Relays beyond them copy through the shared buffer.
 */
const MAX_BULK_BUFFERS = 16

/** Every relay reads here unless it owns a bulk buffer: its callback copies the bytes out at once. */
const shared = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES)
const free: Buffer[] = []
const freeBulk: Buffer[] = []
let bulkBuffers = 0

function take (): Buffer {
  return free.pop() ?? Buffer.allocUnsafeSlow(READ_BUFFER_BYTES)
}

/** A bulk buffer, or null when all there may be are in use. */
function takeBulk (): Buffer | null {
  const b = freeBulk.pop()
  if (b !== undefined) return b
  if (bulkBuffers >= MAX_BULK_BUFFERS) return null
  bulkBuffers++
  return Buffer.allocUnsafeSlow(BULK_BUFFER_BYTES)
}

/** Back for reuse: `buf` is no longer read into nor held by a write. */
function recycle (buf: Buffer): void {
  if (buf.length === BULK_BUFFER_BYTES) freeBulk.push(buf)
  else if (free.length < MAX_FREE_BUFFERS) free.push(buf)
}

/** A buffer that will not come back (a write of a closed socket may still hold it). */
function drop (buf: Buffer): void {
  if (buf.length === BULK_BUFFER_BYTES) bulkBuffers--
}

/**
 * One direction of a connection: what `from` reads is written to `to`. Pass it as `from`'s
 * `onread` (it has the `buffer` and `callback` Node asks for). Until `forward` is called,
 * reads go to `collect` (a TLS client hello) if set, else are kept for `to` and reading pauses.
 *
 * A relay reads into the shared buffer and copies each read out (`take`), unless it owns a
 * bulk buffer. It gets one when a read filled the shared buffer and its copy was written at
 * once (the target keeps up with a bulk flow): its next reads land in that buffer and are
 * written as they are, no copy. It gives it up when a write has to wait (the write holds it:
 * reads go back to the shared buffer and copies) and when reads become small (a trickle
 * needs no megabyte). So a slow reader holds at most a bulk buffer and a copy per direction.
 */
export class Relay {
  private from: Socket | null = null
  private to: Socket | null = null
  /** The bulk buffer this relay reads into, if it owns one. */
  private own: Buffer | null = null
  /** Buffers written to `to` and not yet flushed; all free once `to.writableLength` is 0. */
  private held: Buffer[] = []
  /** Until forwarding starts: gets a copy of each read; false pauses the source. */
  collect: ((chunk: Buffer) => boolean) | null = null
  /** Bytes read before forwarding started without `collect` (a backend that spoke at once). */
  private early: Buffer[] | null = null

  /** Node's `onread.buffer`: called after every read for the buffer of the next one. */
  readonly buffer = (): Buffer => this.own ?? shared

  /** Node's `onread.callback`: `n` bytes were read into `buf`; false stops reading. */
  readonly callback = (n: number, buf: Buffer): boolean => {
    const to = this.to
    if (to === null) {
      const chunk = Buffer.from(buf.subarray(0, n))
      if (this.collect !== null) return this.collect(chunk)
      if (this.early === null) this.early = [chunk]
      else this.early.push(chunk)
      return false
    }
    if (to.destroyed) return false
    if (this.held.length > 0 && to.writableLength === 0) this.release()
    if (buf !== shared) return this.writeOwn(to, n, buf)
    if (n < SMALL_READ_BYTES) return to.write(Buffer.from(buf.subarray(0, n)))
    const out = take()
    buf.copy(out, 0, 0, n)
    const more = to.write(n === out.length ? out : out.subarray(0, n))
    if (to.writableLength > 0) this.held.push(out)
    else {
      recycle(out)
      // A full read written at once: a bulk flow the target keeps up with.
      if (n === shared.length && this.own === null) this.own = takeBulk()
    }
    return more
  }

  /** A read that landed in this relay's own buffer: written as it is. */
  private writeOwn (to: Socket, n: number, buf: Buffer): boolean {
    const more = to.write(n === buf.length ? buf : buf.subarray(0, n))
    if (to.writableLength > 0) {
      // The write holds the buffer until it is flushed: the next reads go to the shared one.
      this.held.push(buf)
      this.own = null
    } else if (n < SMALL_READ_BYTES) {
      recycle(buf)
      this.own = null
    }
    return more
  }

  private release (): void {
    for (const b of this.held) recycle(b)
    this.held.length = 0
  }

  /** Starts writing what `from` reads into `to` (and resumes `from`), passing on its end. */
  forward (from: Socket, to: Socket): void {
    this.from = from
    this.to = to
    this.collect = null
    if (this.early !== null) for (const chunk of this.early) to.write(chunk)
    this.early = null
    to.on('drain', this.drained)
    from.once('end', () => to.end())
    from.once('close', this.closed)
    from.resume()
  }

  /** As `forward`, for a source read through the stream API ('data' events). */
  forwardStream (from: Socket, to: Socket): void {
    from.on('data', this.push)
    this.forward(from, to)
  }

  /** A chunk read through the stream API: it is the relay's to write as it is. */
  private readonly push = (chunk: Buffer): void => {
    const to = this.to
    if (to === null || to.destroyed) return
    if (!to.write(chunk)) this.from?.pause()
  }

  /** The source reads no more: its buffer goes back; those writes still hold are dropped. */
  private readonly closed = (): void => {
    if (this.own !== null) recycle(this.own)
    this.own = null
    if (this.to!.writableLength === 0) this.release()
    else {
      for (const b of this.held) drop(b)
      this.held.length = 0
    }
  }

  private readonly drained = (): void => {
    if (this.held.length > 0 && this.to!.writableLength === 0) this.release()
    this.from?.resume()
  }
}

/**
 * The socket a `net.Server` accepted, re-made to read through `onread`. Node gives accepted
 * sockets no `onread` option (net.Server builds them), so this builds one the way the server
 * does: a new net.Socket over the accepted one's handle (`_handle`, the `handle` constructor
 * option — both what net.Server itself uses). It must run before the socket has read anything
 * (in the 'connection' listener). The accepted socket stays as an empty shell until the new
 * one closes, so the server's connection count (server.close(), getConnections) holds.
 * Returns null — the caller then reads the socket through the stream API — when the socket
 * is not a plain TCP one in that state (a Node whose internals differ included).
 */
export function adoptAccepted (socket: Socket, onread: { buffer: () => Buffer, callback: (n: number, buf: Buffer) => boolean }): Socket | null {
  const shell = socket as Socket & { _handle?: { useUserBuffer?: unknown, readStart?: unknown } | null }
  const handle = shell._handle
  if (handle == null || typeof handle.useUserBuffer !== 'function' || typeof handle.readStart !== 'function' ||
    socket.readableLength > 0 || socket.destroyed || socket.connecting || socket.bytesRead > 0) return null
  shell._handle = null
  const adopted = new net.Socket({ handle, allowHalfOpen: socket.allowHalfOpen, onread } as unknown as net.SocketConstructorOpts)
  adopted.once('close', () => socket.destroy())
  carryOver(socket, adopted)
  return adopted
}

/**
 * What an accepted socket was told about itself carries over to the one re-made over its
 * handle: a connection a data-plane worker took from the primary (proxy workers/intake.ts)
 * has the client's addresses as own properties, and byte counts that leave out the intake's
 * header and acknowledgement — counted on the handle, which the new socket uses too.
 */
const CARRIED = ['remoteAddress', 'remotePort', 'remoteFamily', 'localAddress', 'localPort', 'bytesRead', 'bytesWritten'] as const

function carryOver (from: Socket, to: Socket): void {
  for (const name of CARRIED) {
    const own = Object.getOwnPropertyDescriptor(from, name)
    if (own !== undefined) Object.defineProperty(to, name, own)
  }
}
