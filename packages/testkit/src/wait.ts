/**
 * Waits on conditions instead of fixed sleeps: poll a check, race a promise against a
 * deadline, or hand a resolve function to whatever signals the event. `sleep` stays for
 * tests whose point is time passing (trickled bytes, idle timeouts).
 */

export const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

/** A promise plus its resolve function. */
export function deferred<T = void> (): { promise: Promise<T>, resolve: (value: T) => void, reject: (err: Error) => void } {
  let resolve!: (value: T) => void
  let reject!: (err: Error) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/** Resolves with `promise`, or rejects with `message` after `ms`. */
export async function withTimeout<T> (promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} (after ${ms} ms)`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Polls `check` every `intervalMs` until it returns true; rejects after `timeoutMs`. `what`
 * may be a function, called only on the timeout: the message then carries the logs or state
 * of that moment rather than of the start.
 */
export async function waitUntil (check: () => boolean | Promise<boolean>, timeoutMs: number, what: string | (() => string), intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`)
    await new Promise(resolve => setTimeout(resolve, intervalMs))
  }
}
