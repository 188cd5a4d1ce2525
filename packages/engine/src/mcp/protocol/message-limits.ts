/**
 * The size cap on what an MCP target sends (its `maxMessageSize`): a JSON response body or
 * one server-sent event (counted here, read by upstream/http-shared.ts and
 * stateless-forward.ts), a stdout line (upstream/line-splitter.ts). Without it a target
 * that streams an event with no end, or an endless body, grows a buffer in the gateway
 * until memory runs out — a fault of one target becoming everyone's.
 */

import { PorticoError, type PorticoErrorCode } from '../../util/errors.ts'

export const MESSAGE_TOO_LARGE = 'PORTICO_MCP_MESSAGE_TOO_LARGE' satisfies PorticoErrorCode

export function messageTooLarge (what: string, limit: number): PorticoError {
  return new PorticoError(MESSAGE_TOO_LARGE, `${what} of more than ${limit} bytes (maxMessageSize)`)
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
