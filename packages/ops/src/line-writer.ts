/**
 * Where JSON log lines go: a file descriptor (stdout), written in batches of whole lines,
 * one write at a time, off the event loop (libuv's fs.write).
 *
 * In place of pino's sonic-boom, which measures the UTF-8 length of the whole batch it is
 * filling on every line (`Buffer.byteLength` of a string grown by `+=` to 16 KB): with the
 * access log on, that alone was ~20,000 instructions per proxied GET, a sixth of a whole
 * untraced request (bench/tracing-instructions.ts --configs log --functions 12). Here a
 * batch is joined and encoded once, when it is complete.
 *
 * A stdout that does not drain (a stuck pipe) cannot make the proxy hold unbounded memory:
 * beyond `maxBuffered` bytes new lines are dropped and counted, and a line saying how many
 * goes out once writing resumes.
 */

import { write, writeSync } from 'node:fs'

export interface LineWriterOptions {
  fd: number
  /** Bytes gathered before a write starts (a timer or flush() writes what is there sooner). */
  minLength: number
  /**
   * Bytes per write, at most (a longer line goes alone, whole). With PIPE_BUF (4096) a write
   * of whole lines is never interleaved with another writer's on a pipe -- for threads that
   * share stdout.
   */
  maxWrite: number
  /** Bytes (about: UTF-16 units until a batch is sealed) waiting, at most, before lines are dropped (default 64 MiB). */
  maxBuffered?: number
  /** The writes (node:fs's; tests watch them). */
  io?: { write: typeof write, writeSync: typeof writeSync }
}

/** The errors a non-blocking stdout answers while full: wait and write again. */
const RETRY_CODES = new Set(['EAGAIN', 'EBUSY'])
const RETRY_MS = 20
const FLUSH_SYNC_MS = 2000
/** What flushSync sleeps on between attempts (Atomics.wait: nothing ever wakes it). */
const SLEEP = new Int32Array(new SharedArrayBuffer(4))
/** Written batches' buffers kept for the next ones (one is usually in flight while one fills). */
const SPARE_BUFFERS = 2

export class LineWriter {
  private readonly fd: number
  private readonly minLength: number
  private readonly maxWrite: number
  private readonly maxBuffered: number
  private readonly io: { write: typeof write, writeSync: typeof writeSync }
  /** Whole batches waiting (each <= maxWrite bytes, or one longer line). */
  private readonly ready: Buffer[] = []
  /** The batch being filled: its lines and their length (UTF-16 units). */
  private lines: string[] = []
  private lineBytes = 0
  /** What waits: bytes in `ready`, UTF-16 units in `lines`. */
  private buffered = 0
  private writing = false
  /** A write that stdout refused for now (EAGAIN), to be tried again: its batch and offset. */
  private retry: { timer: NodeJS.Timeout, at: number } | null = null
  private dropped = 0
  /**
   * Buffers batches are encoded into, kept for reuse once written. A new Buffer per batch
   * was a native allocation of 4-16 KB every few dozen requests with the access log on, and
   * a malloc that large makes glibc consolidate its free chunks (the sockets' reads and
   * writes keep freeing small ones) each time: ~0.25 µs a request on the request's thread
   * (bench/tracing-profile.ts; docs/tracing-cost-log.md, sixteenth session). Each holds
   * 3 × maxWrite bytes: a batch is at most maxWrite UTF-16 units (a lone longer line gets a
   * buffer of its own), and a unit is at most 3 bytes of UTF-8.
   */
  private readonly spare: Buffer[] = []
  /** The last piece of each batch encoded into a reusable buffer -> that buffer. */
  private readonly owners = new Map<Buffer, Buffer>()

  constructor (options: LineWriterOptions) {
    this.fd = options.fd
    this.minLength = options.minLength
    this.maxWrite = options.maxWrite
    this.maxBuffered = options.maxBuffered ?? 64 * 1024 * 1024
    this.io = options.io ?? { write, writeSync }
  }

  /**
   * pino's stream interface: one line (with its newline). Batches are sized by the lines'
   * lengths in UTF-16 units, not bytes (measuring UTF-8 per line cost ~3,000 instructions a
   * line: the line is a concatenation V8 must flatten first); seal() cuts a batch whose bytes
   * come out over maxWrite at line ends.
   */
  write (line: string): boolean {
    const n = line.length
    if (this.buffered + n > this.maxBuffered) {
      this.dropped++
      return false
    }
    if (this.lineBytes > 0 && this.lineBytes + n > this.maxWrite) this.seal()
    this.lines.push(line)
    this.lineBytes += n
    this.buffered += n
    if (!this.writing && this.buffered >= this.minLength) this.next()
    return true
  }

  /** Starts writing what is gathered, however little (a timer calls it). */
  flush (): void {
    if (!this.writing) this.next()
  }

  /**
   * Writes what waits now, blocking (at exit). A write in flight keeps its batch (its
   * callback may yet come); the rest goes after it -- as sonic-boom's flushSync does.
   */
  flushSync (): void {
    this.seal()
    // A write waiting to be tried again is not in flight: it goes now, from where it was.
    const first = this.writing && this.retry === null ? 1 : 0
    let at = this.retry?.at ?? 0
    if (this.retry !== null) {
      clearTimeout(this.retry.timer)
      this.retry = null
      this.writing = false
    }
    // A stdout that stays full (EAGAIN) is waited for in 1 ms sleeps, at most FLUSH_SYNC_MS:
    // the exit it holds up must still come.
    const until = Date.now() + FLUSH_SYNC_MS
    for (const batch of this.ready.splice(first)) {
      // Not reused: a piece before this one may still be in flight (the exit is near anyway).
      this.owners.delete(batch)
      while (at < batch.length) {
        try {
          at += this.io.writeSync(this.fd, batch, at, batch.length - at)
        } catch (err) {
          if (!RETRY_CODES.has((err as NodeJS.ErrnoException).code ?? '') || Date.now() > until) throw err
          Atomics.wait(SLEEP, 0, 0, 1)
        }
      }
      this.buffered -= batch.length
      at = 0
    }
  }

  /**
   * The batch being filled becomes bytes, ready to write: one buffer, or -- when characters
   * beyond ASCII made it longer than maxWrite -- several, cut after the last line end that
   * fits (a line longer than maxWrite goes alone, whole).
   */
  private seal (): void {
    if (this.lines.length === 0) return
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join('')
    let owner: Buffer | undefined
    let bytes: Buffer
    if (this.lineBytes <= this.maxWrite) {
      owner = this.spare.pop() ?? Buffer.allocUnsafeSlow(3 * this.maxWrite)
      bytes = owner.subarray(0, owner.write(text, 0, 'utf8'))
    } else {
      bytes = Buffer.from(text, 'utf8')
    }
    // `buffered` counted the batch in UTF-16 units; from here it counts its bytes.
    this.buffered += bytes.length - this.lineBytes
    this.lines = []
    this.lineBytes = 0
    let rest = bytes
    while (rest.length > this.maxWrite) {
      const cut = rest.lastIndexOf(10, this.maxWrite - 1)
      const end = cut >= 0 ? cut + 1 : rest.indexOf(10) + 1 || rest.length
      this.ready.push(rest.subarray(0, end))
      rest = rest.subarray(end)
    }
    if (rest.length > 0) this.ready.push(rest)
    // The buffer comes back when its last piece is written (pieces go in order, one at a time).
    if (owner !== undefined) this.owners.set(this.ready.at(-1)!, owner)
  }

  /** A written piece: the last of its buffer's gives the buffer back for reuse. */
  private release (piece: Buffer): void {
    const owner = this.owners.get(piece)
    if (owner === undefined) return
    this.owners.delete(piece)
    if (this.spare.length < SPARE_BUFFERS) this.spare.push(owner)
  }

  private next (): void {
    if (this.ready.length === 0) this.seal()
    const batch = this.ready[0]
    if (batch === undefined) {
      this.writing = false
      return
    }
    this.writing = true
    this.send(batch, 0)
  }

  private send (batch: Buffer, at: number): void {
    this.io.write(this.fd, batch, at, batch.length - at, null, (err, n) => {
      if (err !== null) {
        if (RETRY_CODES.has(err.code ?? '')) {
          // Held like a write in flight: the process waits for it (the exit path writes it
          // with flushSync instead).
          this.retry = {
            at,
            timer: setTimeout(() => {
              this.retry = null
              this.send(batch, at)
            }, RETRY_MS)
          }
          return
        }
        // stdout is gone (EPIPE, closed): nothing to log to; what waits is dropped.
        this.ready.length = 0
        this.owners.clear()
        this.lines = []
        this.lineBytes = 0
        this.buffered = 0
        this.writing = false
        return
      }
      if (at + n < batch.length) return this.send(batch, at + n)
      this.ready.shift()
      this.release(batch)
      this.buffered -= batch.length
      if (this.dropped > 0) this.reportDropped()
      if (this.buffered >= this.minLength || this.ready.length > 0) this.next()
      else this.writing = false
    })
  }

  private reportDropped (): void {
    const line = `${JSON.stringify({ level: 40, time: new Date().toISOString(), pid: process.pid, component: 'logs', dropped: this.dropped, msg: 'log lines dropped: stdout did not keep up' })}\n`
    this.dropped = 0
    this.seal()
    const bytes = Buffer.from(line, 'utf8')
    this.ready.push(bytes)
    this.buffered += bytes.length
  }
}
