/**
 * `porticoctl proxy trace`: watch mode, inject mode (`-- URL [curl args]`) and replay
 * (`-f FILE`). Output is JSON Lines with `--raw` or when stdout (or stdin) is not a terminal,
 * otherwise the TUI.
 */

import { readFileSync } from 'node:fs'
import { cliError, usageError } from '../errors.ts'
import type { Io } from '../io.ts'
import type { Target } from '../targets/types.ts'
import { createTraceStore } from '../tui/store.ts'
import { parseCurlArgs, type CurlRequest } from './curl-args.ts'
import { parseRawTrace, rawLine } from './events.ts'
import { runTraceSession, type PortSource } from './session.ts'
import type { TraceFilter } from './stream.ts'

export interface TraceCommandOptions {
  /** Where to trace; null only with `file`. */
  target: Target | null
  /** `-f FILE`: replay a saved `--raw` trace. */
  file?: string
  raw: boolean
  /** Listener port for inject mode (--port); default the URL's own port, else DEFAULT_LISTENER_PORT. */
  port: number | undefined
  /** Everything after `--`: URL and curl arguments (empty = watch mode). */
  curlArgs: string[]
  timeoutMs: number | null
  filter: TraceFilter
  io: Io
}

/** Inject mode's listener port when neither --port nor the URL names one: the quick start's. */
export const DEFAULT_LISTENER_PORT = 3000

/**
 * Where inject mode sends: --port, else the port the URL names (`http://localhost:8080/x` is
 * meant for 8080), else the quick start's listener. A URL without a port only names the Host.
 */
export function listenerPort (flag: number | undefined, inject: CurlRequest | null): { port: number, portFrom: PortSource } {
  if (flag !== undefined) return { port: flag, portFrom: '--port' }
  if (inject !== null && inject.url.port !== '') return { port: Number(inject.url.port), portFrom: 'the URL' }
  return { port: DEFAULT_LISTENER_PORT, portFrom: 'the default' }
}

export async function traceCommand (options: TraceCommandOptions): Promise<void> {
  const { io } = options
  const interactive = !options.raw && io.stdout.isTTY === true && io.stdin.isTTY === true
  if (options.file !== undefined) {
    if (options.curlArgs.length > 0) throw usageError('-f replays a saved trace: it takes no URL')
    await replay(options.file, interactive, io)
    return
  }
  if (options.target === null) throw usageError('which proxy? give gateway/NAME, --local or -f FILE')
  const inject = options.curlArgs.length > 0 ? parseCurlArgs(options.curlArgs) : null
  const base = { target: options.target, inject, ...listenerPort(options.port, inject), filter: options.filter, timeoutMs: options.timeoutMs, verboseOut: io.stderr }

  if (!interactive) {
    await runTraceSession({
      ...base,
      sink: {
        event: e => { io.stdout.write(rawLine(e) + '\n') },
        status: text => { if (io.stderr.isTTY === true) io.stderr.write(`porticoctl: ${text}\n`) }
      }
    })
    return
  }

  const store = createTraceStore({ status: `connecting to ${options.target.description}…` })
  const quit = new AbortController()
  // ink and React load only for the interactive view.
  const { startTui } = await import('../tui/run.ts')
  const tui = startTui(store, { onQuit: () => quit.abort() })
  void tui.exited.then(() => quit.abort())
  try {
    await runTraceSession({
      ...base,
      signal: quit.signal,
      sink: {
        event: e => store.push(e),
        status: text => store.setStatus(text)
      }
    })
  } catch (err) {
    tui.stop()
    await tui.exited
    throw err
  }
  if (!quit.signal.aborted) store.complete(`trace complete: ${store.get().events.length} events (${options.target.description}) · q to quit`)
  await tui.exited
}

async function replay (file: string, interactive: boolean, io: Io): Promise<void> {
  let text: string
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8')
  } catch (err) {
    throw cliError('PORTICOCTL_TRACE_FILE', `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, err)
  }
  const events = parseRawTrace(text, file)
  if (!interactive) {
    for (const e of events) io.stdout.write(rawLine(e) + '\n')
    return
  }
  const store = createTraceStore({ events, status: `replay of ${file}: ${events.length} events · q to quit`, complete: true })
  const { startTui } = await import('../tui/run.ts')
  await startTui(store).exited
}
