/**
 * A /debug/trace client for tests: arms a trace with a real HTTP request, parses the SSE
 * stream (eventsource-parser) and hands back the comments and events it saw.
 */

import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import type { TraceEvent } from '@portico/engine'

export interface TraceStream {
  /** Resolves once the `: ready` comment arrived (the tap is armed). */
  ready: Promise<void>
  /** Resolves with every event when the server closes the stream. */
  done: Promise<TraceEvent[]>
  comments: string[]
  status: number
  close(): void
}

export async function openTrace (adminUrl: string, query = '', method: 'GET' | 'POST' = 'POST'): Promise<TraceStream> {
  const controller = new AbortController()
  const res = await request(`${adminUrl}/debug/trace${query === '' ? '' : `?${query}`}`, { method, signal: controller.signal })
  const events: TraceEvent[] = []
  const comments: string[] = []
  let onReady!: () => void
  const ready = new Promise<void>(resolve => { onReady = resolve })
  const parser = createParser({
    onEvent: e => { events.push(JSON.parse(e.data) as TraceEvent) },
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
export function sequence (events: TraceEvent[]): string[] {
  return events.map(e => typeof e.message.stage === 'string' ? `${e.message.type}:${e.message.stage}` : e.message.type)
}
