/**
 * Runs the trace TUI on the terminal until the user quits (q). The alternate screen keeps
 * the user's scrollback clean.
 */

import React from 'react'
import { render } from 'ink'
import { TraceApp } from './app.ts'
import type { TraceStore } from './store.ts'

export interface TuiHandle {
  /** Resolves when the user quit (or `stop()` was called). */
  exited: Promise<void>
  /** Closes the TUI (e.g. on an error) and restores the terminal. */
  stop(): void
}

export function startTui (store: TraceStore, options: { onQuit?: () => void } = {}): TuiHandle {
  const instance = render(React.createElement(TraceApp, { store, onQuit: options.onQuit }), {
    exitOnCtrlC: true,
    patchConsole: false,
    alternateScreen: true,
    // porticoctl only starts the TUI on a terminal; don't let ink's CI detection (CI=true)
    // turn it into a print-the-last-frame renderer.
    interactive: true
  })
  const exited = instance.waitUntilExit().then(() => {}, () => {})
  return {
    exited,
    stop: () => {
      instance.unmount()
    }
  }
}
