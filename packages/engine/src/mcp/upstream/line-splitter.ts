/**
 * Splits a byte stream into newline-terminated lines with a cap on a line's length, in time
 * linear in the bytes read: the unfinished line is kept as a list of chunks and each byte is
 * searched for a newline once. (The SDK's stdio ReadBuffer concatenates the whole buffer on
 * every chunk and searches it from the start, so a long line costs O(n²): a server writing
 * 12 MB without a newline held the event loop for seconds, then its size check threw out of
 * a stream handler.)
 */

export interface LineSplitterOptions {
  /** Longest line accepted, in bytes, without its newline. */
  maxLineBytes: number
  /** Each complete line, without its newline (a trailing CR is kept; callers trim it). */
  onLine: (line: Buffer) => void
  /**
   * The line being read passed maxLineBytes. Its bytes are dropped, and so is the rest of it
   * until the next newline; reading resumes after that.
   */
  onOverflow: (heldBytes: number) => void
}

const NEWLINE = 0x0a

export class LineSplitter {
  private readonly options: LineSplitterOptions
  private chunks: Buffer[] = []
  private held = 0
  /** After an overflow: dropping bytes until the end of the oversized line. */
  private skipping = false

  constructor (options: LineSplitterOptions) {
    this.options = options
  }

  /** Bytes of the unfinished line held so far. */
  get pending (): number {
    return this.held
  }

  push (chunk: Buffer): void {
    const max = this.options.maxLineBytes
    let start = 0
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start)
      if (nl === -1) break
      if (this.skipping) {
        this.skipping = false
      } else if (this.held + (nl - start) > max) {
        this.overflow(nl - start)
        this.skipping = false
      } else {
        const piece = chunk.subarray(start, nl)
        const line = this.chunks.length === 0 ? piece : Buffer.concat([...this.chunks, piece], this.held + piece.length)
        this.chunks = []
        this.held = 0
        this.options.onLine(line)
      }
      start = nl + 1
    }
    const rest = chunk.length - start
    if (rest === 0 || this.skipping) return
    if (this.held + rest > max) {
      this.overflow(rest)
      return
    }
    this.chunks.push(start === 0 ? chunk : chunk.subarray(start))
    this.held += rest
  }

  private overflow (more: number): void {
    const held = this.held + more
    this.chunks = []
    this.held = 0
    this.skipping = true
    this.options.onOverflow(held)
  }
}
