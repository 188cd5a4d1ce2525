import { TraceRecorder } from './recorder.ts'
import { PorticoError } from '../util/errors.ts'
import type { TraceEvent } from './events.ts'

/** What a watcher's filter sees of a request when deciding whether to take it. */
export interface TraceCandidate {
  method: string
  host: string
  path: string
  /** Selected route key, or null (no route matched, or not selected yet). */
  route: string | null
  headers: Record<string, string | string[] | undefined>
}

export interface TraceWatcher {
  /** True when this watcher wants the request. */
  accepts(candidate: TraceCandidate): boolean
  /** Receives every event of the claimed request, `requestFinished` last. */
  deliver(event: TraceEvent): void
  /**
   * Armed on several threads at once (data-plane workers): takes the tap for this thread's
   * request, false when another thread took it first (the watcher is then dropped here).
   */
  take?(): boolean
}

/**
 * One-shot trace taps. Each armed watcher takes exactly one request -- the first whose
 * candidate it accepts -- and is then removed; concurrent watchers each get their own request.
 * `armed` is a plain field read on every request: with no watcher, nothing else runs.
 */
export class TraceHub {
  private readonly watchers: TraceWatcher[] = []
  armed = false
  /** False when tracing is switched off (DEBUG_TRACE=off): nothing can be armed. */
  readonly enabled: boolean

  constructor (enabled = true) {
    this.enabled = enabled
  }

  arm (watcher: TraceWatcher): () => void {
    if (!this.enabled) throw new PorticoError('PORTICO_TRACE_DISABLED', 'tracing is disabled (DEBUG_TRACE=off)')
    this.watchers.push(watcher)
    this.armed = true
    return () => this.remove(watcher)
  }

  get watcherCount (): number {
    return this.watchers.length
  }

  /** Called at the start of a request when `armed`: a recorder that buffers until claimed. */
  begin (): TraceRecorder {
    return new TraceRecorder()
  }

  /** Offers a request to the watchers; the first that accepts it is removed and gets its events. */
  claim (recorder: TraceRecorder, candidate: TraceCandidate): boolean {
    if (recorder.claimed) return true
    // Over a copy: a watcher another thread took is removed while the loop goes on.
    for (const watcher of [...this.watchers]) {
      let ok = false
      try {
        ok = watcher.accepts(candidate)
      } catch {
        ok = false
      }
      if (!ok) continue
      this.remove(watcher)
      if (watcher.take !== undefined && !watcher.take()) continue
      recorder.attach(event => watcher.deliver(event))
      return true
    }
    return false
  }

  private remove (watcher: TraceWatcher): void {
    const i = this.watchers.indexOf(watcher)
    if (i !== -1) this.watchers.splice(i, 1)
    this.armed = this.watchers.length > 0
  }
}
