/**
 * Watches the config file and reports each new version of its text. Editors save by
 * rewriting in place or by renaming a temporary file over it; watching the directory sees
 * both.
 *
 * A text is reported only once it has settled: after the last change event, the file is
 * read, read again `debounceMs` later, and reported only if both reads agree (otherwise the
 * second read becomes the one to confirm). A non-atomic save (truncate, then write, maybe in
 * several pieces) is therefore seen as one change, and a change event that arrives late or
 * not at all for some write still cannot get a half-written file reported. Unchanged text is
 * skipped. What is reported can still be incomplete if the writer pauses longer than the
 * window; the loader refuses what that produces (no gateways, a syntax error) and the
 * running config stays.
 */

import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import { DEFAULT_MAX_CONFIG_BYTES, isPorticoError, readConfigText } from '@portico/engine'

export interface FileWatchOptions {
  path: string
  /** Called with the new text when it differs from the last text seen. */
  onChange: (text: string) => void
  /** Called when the file cannot be read (deleted, permissions, over the size limit). */
  onError: (err: Error) => void
  /** How long the file must stay unchanged before it is reported. Default 100 ms. */
  debounceMs?: number
  /** Files larger than this are reported as errors without being read whole. */
  maxBytes?: number
}

export interface FileWatch {
  close(): void
  /** Sets the text currently in force (so an identical rewrite is not reported). */
  setCurrent(text: string): void
}

export const DEFAULT_SETTLE_MS = 100

export function watchConfigFile (options: FileWatchOptions): FileWatch {
  const full = resolve(options.path)
  const dir = dirname(full)
  const name = basename(full)
  const debounceMs = options.debounceMs ?? DEFAULT_SETTLE_MS
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_CONFIG_BYTES
  let current: string | undefined
  /** The text read last, waiting to be confirmed by an identical read one window later. */
  let candidate: string | undefined
  let timer: NodeJS.Timeout | undefined
  let lastError: string | undefined

  const check = () => {
    timer = undefined
    let text: string
    try {
      text = readConfigText(full, maxBytes, { regularOnly: true })
    } catch (err) {
      candidate = undefined
      // Over the size limit: each new version of the file is a refused reload of its own.
      if (isPorticoError(err, 'PORTICO_CONFIG_TOO_LARGE')) {
        lastError = undefined
        options.onError(err)
        return
      }
      const code = (err as NodeJS.ErrnoException).code ?? String(err)
      // A rename-over-save briefly removes the file; report only errors that persist.
      if (code === 'ENOENT' && lastError !== 'ENOENT') {
        lastError = code
        timer = setTimeout(check, 250)
        return
      }
      if (lastError !== code + ':reported') options.onError(err as Error)
      lastError = code + ':reported'
      return
    }
    lastError = undefined
    if (text !== candidate) {
      // First sight of this text (or it changed since the last read): confirm it later.
      candidate = text
      timer = setTimeout(check, debounceMs)
      return
    }
    if (text === current) return
    current = text
    options.onChange(text)
  }

  const schedule = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = setTimeout(check, debounceMs)
  }

  const watcher: FSWatcher = watch(dir, { persistent: false }, (_event, filename) => {
    if (filename === null || filename === name) schedule()
  })
  watcher.on('error', err => options.onError(err))

  return {
    close () {
      watcher.close()
      if (timer !== undefined) clearTimeout(timer)
    },
    setCurrent (text: string) {
      current = text
      candidate = text
    }
  }
}
