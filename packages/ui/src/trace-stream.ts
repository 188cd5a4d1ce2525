/**
 * Arms `/debug/trace` from the browser: POST with the filters, read the server-sent events
 * with fetch's stream (EventSource only GETs, and would reconnect — re-arming — when the
 * stream ends), parsed by eventsource-parser as porticoctl does. `: ready` means the tap is
 * armed; the stream ends after `requestFinished`.
 */

import { createParser } from 'eventsource-parser'
import type { TraceEvent } from '@portico/trace-view'

export interface TraceFilters {
  path?: string
  route?: string
  method?: string
  host?: string
  /** `name:value` */
  header?: string
}

export interface ArmedTrace {
  /** Resolves when the tap is armed on the proxy. */
  ready: Promise<void>
  /** Resolves after `requestFinished` (or when stopped); rejects when the stream fails. */
  finished: Promise<void>
  stop(): void
}

export function armTrace (filters: TraceFilters, onEvent: (e: TraceEvent) => void): ArmedTrace {
  const controller = new AbortController()
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(filters)) if (v !== undefined && v.trim() !== '') params.set(k, v.trim())
  let onReady!: () => void
  let failReady!: (err: Error) => void
  const ready = new Promise<void>((resolve, reject) => { onReady = resolve; failReady = reject })
  ready.catch(() => {})
  let stopped = false
  const finished = (async () => {
    let res: Response
    try {
      res = await fetch(`/debug/trace${params.size === 0 ? '' : `?${params.toString()}`}`, { method: 'POST', signal: controller.signal, headers: { accept: 'text/event-stream' } })
    } catch (err) {
      if (stopped) { onReady(); return }
      const e = new Error(`cannot reach the admin server: ${(err as Error).message}`)
      failReady(e)
      throw e
    }
    if (res.status !== 200 || res.body === null) {
      const e = new Error(`POST /debug/trace answered ${res.status}: ${(await res.text()).trim()}`)
      failReady(e)
      throw e
    }
    let done = false
    const parser = createParser({
      onComment: c => { if (c.trim() === 'ready') onReady() },
      onEvent: m => {
        const event = JSON.parse(m.data) as TraceEvent
        onEvent(event)
        if (event.message.type === 'requestFinished') done = true
      }
    })
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
    try {
      while (!done) {
        const { value, done: end } = await reader.read()
        if (end) break
        parser.feed(value)
      }
    } catch (err) {
      if (stopped) return
      throw new Error(`the trace stream broke: ${(err as Error).message}`)
    } finally {
      onReady()
      if (done) controller.abort()
    }
    if (!done && !stopped) throw new Error('the trace stream ended before the request finished (did the proxy restart?)')
  })()
  finished.catch(() => {})
  return {
    ready,
    finished,
    stop: () => {
      stopped = true
      controller.abort()
    }
  }
}

/** A trace as JSON Lines, the format of `porticoctl proxy trace --raw` (and `-f FILE`). */
export function toJsonLines (events: TraceEvent[]): string {
  return events.map(e => JSON.stringify(e)).join('\n') + '\n'
}

/** Reads JSON Lines back (blank lines skipped); throws naming the first bad line. */
export function fromJsonLines (text: string): TraceEvent[] {
  const out: TraceEvent[] = []
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return
    let v: unknown
    try {
      v = JSON.parse(line)
    } catch {
      throw new Error(`line ${i + 1}: not JSON`)
    }
    const e = v as Partial<TraceEvent>
    if (typeof e !== 'object' || e === null || typeof e.message?.type !== 'string' || typeof e.eventEnd !== 'number') throw new Error(`line ${i + 1}: not a trace event`)
    out.push(v as TraceEvent)
  })
  return out
}
