/**
 * Preloaded into the test runs (`node --import ./scripts/lib/test-exit-flush.ts --test
 * --test-force-exit ...`, package.json and scripts/test). With --test-force-exit, Node's test
 * runner ends each test file's process with process.exit() as soon as the file's tests are
 * done, while the last of its report to the runner (V8-serialized events on a pipe) may still
 * be on its way; the runner then counts fewer tests than ran, and says nothing
 * (nodejs/node#64833, open: to-ir.golden.test.ts reported 138-161 of its 161 tests in five
 * runs here). A failing test still failed its file through the exit code, so no failure was
 * hidden, only passes uncounted. In a test file's process, the forced exit now waits until
 * the report has gone out (a few turns of the event loop, at most 5 s), then exits with the
 * same code.
 */

import { isMainThread } from 'node:worker_threads'

const FLUSH_LIMIT_MS = 5_000

if (isMainThread && process.env.NODE_TEST_CONTEXT === 'child-v8') {
  const exit = process.exit.bind(process)
  let exiting = false
  process.exit = ((code?: number | string | null) => {
    if (code !== undefined && code !== null) process.exitCode = code
    if (exiting) return undefined as never
    exiting = true
    const deadline = Date.now() + FLUSH_LIMIT_MS
    // Two quiet turns in a row: the reporter's stream hands its last events to stdout on one
    // turn and stdout writes them on the next.
    let quiet = 0
    const check = (): void => {
      quiet = process.stdout.writableLength === 0 ? quiet + 1 : 0
      if (quiet >= 2 || Date.now() > deadline) exit()
      else setImmediate(check)
    }
    setImmediate(check)
    return undefined as never
  }) as typeof process.exit
}
