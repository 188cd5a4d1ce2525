/**
 * `/debug/trace` (GET or POST): arms a one-shot tap and streams, as server-sent events, every
 * event of the next request that passes the filter, then closes.
 *
 * Framing (what `porticoctl proxy trace` reads): a `: ready` comment once the tap is armed,
 * one `data: <json>` frame per event, a `: keepalive` comment every second, and the end of
 * the stream after `requestFinished`.
 *
 * Filters (all given must hold): `path` (exact, or a prefix when it ends with `*`), `route`
 * (route key), `method`, `host`, `header` (`name:value`; `porticoctl` tags the request it
 * sends with a unique header so it traces exactly that one).
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { TraceCandidate, TraceEvent, TraceHub } from '@portico/engine'

export interface TraceQuery {
  path?: string
  route?: string
  method?: string
  host?: string
  header?: string
  expression?: string
}

export type TraceFilter = (c: TraceCandidate) => boolean

/** Builds the request filter of a trace, or returns an error message for a bad query. */
export function traceFilter (q: TraceQuery): TraceFilter | string {
  if (q.expression !== undefined && q.expression !== '') {
    return 'invalid expression: CEL filters are not available yet; use path=, route=, method=, host= or header='
  }
  const tests: TraceFilter[] = []
  if (q.path !== undefined && q.path !== '') {
    const path = q.path
    tests.push(path.endsWith('*') ? c => c.path.startsWith(path.slice(0, -1)) : c => c.path === path)
  }
  if (q.route !== undefined && q.route !== '') {
    const route = q.route
    tests.push(c => c.route === route)
  }
  if (q.method !== undefined && q.method !== '') {
    const method = q.method.toUpperCase()
    tests.push(c => c.method === method)
  }
  if (q.host !== undefined && q.host !== '') {
    const host = q.host.toLowerCase()
    tests.push(c => c.host === host)
  }
  if (q.header !== undefined && q.header !== '') {
    const colon = q.header.indexOf(':')
    if (colon <= 0) return `invalid header filter "${q.header}": use name:value`
    const name = q.header.slice(0, colon).trim().toLowerCase()
    const value = q.header.slice(colon + 1).trim()
    tests.push(c => {
      const v = c.headers[name]
      return Array.isArray(v) ? v.includes(value) : v === value
    })
  }
  return c => tests.every(t => t(c))
}

export function sseFrame (event: TraceEvent): string {
  let json: string
  try {
    json = JSON.stringify(event)
  } catch (err) {
    json = JSON.stringify({ eventStart: null, eventEnd: event.eventEnd, severity: 'error', message: { type: 'serializationError', error: String(err) } })
  }
  return `data: ${json}\n\n`
}

/** Data-plane workers (workers/pool.ts): the tap is armed on each, and the first thread to take it wins. */
export interface TraceFanOut {
  armTrace(query: TraceQuery, deliver: (event: unknown) => void): Promise<{ take: () => boolean, disarm: () => void }>
}

export function registerTraceRoutes (app: FastifyInstance, hub: TraceHub, workers: TraceFanOut | null = null): void {
  const handler = async (request: FastifyRequest<{ Querystring: TraceQuery }>, reply: FastifyReply) => {
    if (!hub.enabled) return reply.code(404).type('text/plain').send('tracing is disabled (DEBUG_TRACE=off)\n')
    const filter = traceFilter(request.query)
    if (typeof filter === 'string') return reply.code(400).type('text/plain').send(filter)

    reply.hijack()
    const res = reply.raw
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no'
    })
    let closed = false
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), 1000)
    const close = () => {
      if (closed) return
      closed = true
      clearInterval(keepalive)
      disarm()
      res.end()
    }
    const deliver = (event: TraceEvent): void => {
      if (closed) return
      res.write(sseFrame(event))
      if (event.message.type === 'requestFinished') close()
    }
    let remote: { take: () => boolean, disarm: () => void } | null = null
    let disarmHere = (): void => {}
    const disarm = (): void => {
      disarmHere()
      remote?.disarm()
    }
    request.raw.socket.on('close', close)
    res.on('close', close)
    if (workers !== null) {
      try {
        remote = await workers.armTrace(request.query, event => deliver(event as TraceEvent))
      } catch (err) {
        clearInterval(keepalive)
        closed = true
        res.end(`: ${(err as Error).message}\n\n`)
        return
      }
      if (closed) {
        remote.disarm()
        return
      }
    }
    disarmHere = hub.arm({ accepts: filter, deliver, ...(remote !== null ? { take: remote.take } : {}) })
    res.write(': ready\n\n')
  }
  app.get('/debug/trace', handler)
  app.post('/debug/trace', handler)
}
