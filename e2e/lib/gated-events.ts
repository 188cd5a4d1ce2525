/**
 * An SSE answer whose pace the client sets, so that a test asserts the ORDER in which events
 * crossed a gateway rather than wall-clock times (which fail on a loaded machine). Gated, the
 * backend writes event n + 1 (and ends the answer after the last) only once the client has
 * received event n, and both sides log what they did: a gateway that streams gives
 * `wrote 1, got 1, wrote 2, got 2, …, ended`; one that holds events back leaves the backend
 * waiting until GIVE_UP_MS, after which it goes on and the log shows the wrong order.
 * One gated answer at a time per instance.
 */

import { setTimeout as sleep } from 'node:timers/promises'

const GIVE_UP_MS = 10_000

export interface GatedEvents {
  /** What happened, in order: `backend wrote N`, `client got N`, `backend ended` (or `backend gave up waiting for event N`). */
  readonly log: string[]
  /** The backend's side: `count` events `data: event N`; gated, each after the client got the one before, else `gapMs` apart. */
  write (res: { write (chunk: string): unknown, end (): unknown }, gated: boolean): Promise<void>
  /** The client's side: each piece of the answer as it arrives. */
  received (piece: string): void
  /** Before a gated request. */
  reset (): void
}

export function gatedEvents (options: { count?: number, gapMs?: number } = {}): GatedEvents {
  const count = options.count ?? 3
  const gapMs = options.gapMs ?? 200
  const log: string[] = []
  let text = ''
  let got = 0
  const waiters = new Set<() => void>()

  const clientHas = (n: number): Promise<void> => new Promise(resolve => {
    const check = (): void => {
      if (got < n) return
      clearTimeout(timer)
      waiters.delete(check)
      resolve()
    }
    const timer = setTimeout(() => {
      waiters.delete(check)
      log.push(`backend gave up waiting for event ${n}`)
      resolve()
    }, GIVE_UP_MS)
    waiters.add(check)
    check()
  })

  return {
    log,
    async write (res, gated) {
      for (let n = 1; n <= count; n++) {
        res.write(`data: event ${n}\n\n`)
        if (!gated) {
          await sleep(gapMs)
          continue
        }
        log.push(`backend wrote ${n}`)
        await clientHas(n)
      }
      if (gated) log.push('backend ended')
      res.end()
    },
    received (piece) {
      text += piece
      const events = text.split('\n\n').length - 1
      while (got < events) log.push(`client got ${++got}`)
      for (const check of [...waiters]) check()
    },
    reset () {
      log.length = 0
      text = ''
      got = 0
    }
  }
}

/** The log of a gated answer of `count` events that streamed through: each event reached the client before the next was written. */
export function inOrder (count = 3): string[] {
  const out: string[] = []
  for (let n = 1; n <= count; n++) out.push(`backend wrote ${n}`, `client got ${n}`)
  out.push('backend ended')
  return out
}
