/**
 * Watches the config file and reports each new version of its text. Editors save by
 * rewriting in place or by renaming a temporary file over it; watching the directory sees
 * both. Bursts of events are folded into one read (debounce), and unchanged text is skipped.
 */

import { watch, readFileSync, type FSWatcher } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'

export interface FileWatchOptions {
  path: string
  /** Called with the new text when it differs from the last text seen. */
  onChange: (text: string) => void
  /** Called when the file cannot be read (deleted, permissions). */
  onError: (err: Error) => void
  debounceMs?: number
}

export interface FileWatch {
  close(): void
  /** Sets the text currently in force (so an identical rewrite is not reported). */
  setCurrent(text: string): void
}

export function watchConfigFile (options: FileWatchOptions): FileWatch {
  const full = resolve(options.path)
  const dir = dirname(full)
  const name = basename(full)
  const debounceMs = options.debounceMs ?? 50
  let current: string | undefined
  let timer: NodeJS.Timeout | undefined
  let lastError: string | undefined

  const check = () => {
    timer = undefined
    let text: string
    try {
      text = readFileSync(full, 'utf8')
    } catch (err) {
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
    }
  }
}
