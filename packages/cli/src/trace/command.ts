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
import { parseCurlArgs } from './curl-args.ts'
import { parseRawTrace, rawLine } from './events.ts'
import { runTraceSession } from './session.ts'
import type { TraceFilter } from './stream.ts'

export interface TraceCommandOptions {
  /** Where to trace; null only with `file`. */
  target: Target | null
  /** `-f FILE`: replay a saved `--raw` trace. */
  file?: string
  raw: boolean
  /** Listener port for inject mode. */
  port: number
  /** Everything after `--`: URL and curl arguments (empty = watch mode). */
  curlArgs: string[]
  timeoutMs: number | null
  filter: TraceFilter
  io: Io
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
  const base = { target: options.target, inject, port: options.port, filter: options.filter, timeoutMs: options.timeoutMs, verboseOut: io.stderr }

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
