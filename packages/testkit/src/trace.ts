/**
 * A /debug/trace client for tests: arms a trace with a real HTTP request, parses the SSE
 * stream (eventsource-parser) and hands back the comments and events it saw.
 */

import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import type { TraceEvent } from '@portico/engine/trace-events'

/**
 * An event as a test reads it off the stream: the record of TraceEvent with `message` loosely
 * typed, so a test can look an event up by `type` and assert on its fields without narrowing
 * first. What the proxy sends is TraceEvent (@portico/engine/trace-events); code that shows
 * events (trace-view, porticoctl) narrows by `type` instead.
 */
export type TraceRecord = Omit<TraceEvent, 'message'> & { message: { type: string } & Record<string, unknown> }

export interface TraceStream {
  /** Resolves once the `: ready` comment arrived (the tap is armed). */
  ready: Promise<void>
  /** Resolves with every event when the server closes the stream. */
  done: Promise<TraceRecord[]>
  comments: string[]
  status: number
  close(): void
}

export async function openTrace (adminUrl: string, query = '', method: 'GET' | 'POST' = 'POST'): Promise<TraceStream> {
  const controller = new AbortController()
  const res = await request(`${adminUrl}/debug/trace${query === '' ? '' : `?${query}`}`, { method, signal: controller.signal })
  const events: TraceRecord[] = []
  const comments: string[] = []
  let onReady!: () => void
  const ready = new Promise<void>(resolve => { onReady = resolve })
  const parser = createParser({
    onEvent: e => { events.push(JSON.parse(e.data) as TraceRecord) },
    onComment: c => {
      comments.push(c.trim())
      if (c.trim() === 'ready') onReady()
    }
  })
  const done = (async () => {
    if (res.statusCode !== 200) {
      onReady()
      await res.body.text()
      return events
    }
    try {
      for await (const chunk of res.body) parser.feed(Buffer.from(chunk as Uint8Array).toString('utf8'))
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err
    }
    return events
  })()
  return { ready, done, comments, status: res.statusCode, close: () => controller.abort() }
}

/** The `message.type` (and stage, when there is one) of each event, for sequence checks. */
export function sequence (events: TraceRecord[]): string[] {
  return events.map(e => typeof e.message.stage === 'string' ? `${e.message.type}:${e.message.stage}` : e.message.type)
}
