/**
 * What the trace TUI shows, fed from outside React: events as they arrive and a status line.
 * Components subscribe; every change publishes a new immutable state.
 */

import type { TraceEvent } from '../trace/events.ts'

export interface TraceViewState {
  events: TraceEvent[]
  status: string
  /** True once the trace is complete (or a replay was loaded). */
  complete: boolean
}

export interface TraceStore {
  get(): TraceViewState
  subscribe(listener: (state: TraceViewState) => void): () => void
  push(event: TraceEvent): void
  setStatus(status: string): void
  complete(status: string): void
}

export function createTraceStore (initial: Partial<TraceViewState> = {}): TraceStore {
  let state: TraceViewState = { events: [], status: '', complete: false, ...initial }
  const listeners = new Set<(s: TraceViewState) => void>()
  const publish = (next: TraceViewState) => {
    state = next
    for (const l of listeners) l(state)
  }
  return {
    get: () => state,
    subscribe (listener) {
      listeners.add(listener)
      return () => { listeners.delete(listener) }
    },
    push: event => publish({ ...state, events: [...state.events, event] }),
    setStatus: status => publish({ ...state, status }),
    complete: status => publish({ ...state, status, complete: true })
  }
}
