/**
 * Recovery of a target that went away: restarts with exponential backoff, and callers that
 * wait through them.
 *
 * A stdio server that crashes, or an HTTP target that drops its connection, is reconnected
 * while its session lives — but not in a tight loop (a server that dies at start would burn
 * a core): the delay starts at 0.25 s and doubles to 30 s, and is reset once a start
 * succeeds. Meanwhile a client's request waits for the target to be ready again, for a
 * bounded time, rather than failing at once on a restart that is about to succeed.
 */

const BACKOFF_START_MS = 250
const BACKOFF_MAX_MS = 30_000

/** When the next restart runs; one at a time. */
export class RestartBackoff {
  private delayMs = BACKOFF_START_MS
  private timer: NodeJS.Timeout | undefined

  /** Runs `restart` after the current delay (replacing a restart already scheduled), and doubles the delay. */
  schedule (restart: () => void): void {
    const delay = this.delayMs
    this.delayMs = Math.min(this.delayMs * 2, BACKOFF_MAX_MS)
    clearTimeout(this.timer)
    this.timer = setTimeout(restart, delay)
    // A pending restart must not keep the process alive on shutdown.
    this.timer.unref()
  }

  /** A start succeeded: the next failure is retried quickly again. */
  reset (): void {
    this.delayMs = BACKOFF_START_MS
  }

  cancel (): void {
    clearTimeout(this.timer)
  }
}

/** Callers waiting for a target to become ready (or closed), each for at most `timeoutMs`. */
export class ReadyWaiters {
  private readonly waiters = new Set<() => void>()

  /**
   * Resolves on the next `wake` for which `isReady()` holds; rejects with `closed()` on a
   * wake when it does not, and with `timedOut()` after `timeoutMs`.
   */
  wait (timeoutMs: number, isReady: () => boolean, closed: () => Error, timedOut: () => Error): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(done)
        reject(timedOut())
      }, timeoutMs)
      const done = () => {
        clearTimeout(timer)
        this.waiters.delete(done)
        if (isReady()) resolve()
        else reject(closed())
      }
      this.waiters.add(done)
    })
  }

  /** The target became ready or closed: every waiter learns which. */
  wake (): void {
    for (const w of [...this.waiters]) w()
  }
}
