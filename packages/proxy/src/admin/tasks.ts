/**
 * `/debug/tasks`: the live work of the process -- listeners and their connections, requests
 * in flight with their age and stage, upstream pools, child processes, and the event loop's
 * active resources. Node has no task tree like tokio's; this is the same question answered
 * from what Node can see.
 */

import type { AdminWorkers, TasksView } from './view.ts'
import { performance } from '@portico/engine/clock'

export function tasksDump (view: TasksView): Record<string, unknown> {
  const now = performance.now()
  const requests = [...view.engine.inFlight].map(ctx => ({
    method: ctx.method,
    host: ctx.host,
    path: ctx.originalPath,
    route: ctx.routeKey,
    backend: ctx.backend?.name ?? null,
    stage: ctx.upgraded ? 'tunnel' : ctx.upstreamHeadersAt > 0 ? 'streaming response' : ctx.upstreamStart > 0 ? 'waiting for backend' : 'policies',
    ageMs: Math.round(now - ctx.startMono),
    traced: ctx.tracer !== null
  })).sort((a, b) => b.ageMs - a.ageMs)
  return {
    pid: process.pid,
    uptimeSeconds: Math.round(process.uptime()),
    listeners: view.listeners.snapshot(),
    requests,
    upstreamPools: view.engine.pools.stats(),
    traceWatchers: view.engine.hub.watcherCount,
    children: view.children(),
    activeResources: countBy(process.getActiveResourcesInfo())
  }
}

function countBy (items: string[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const i of items) out[i] = (out[i] ?? 0) + 1
  return out
}

/**
 * With data-plane workers: every serving loop's requests and pools, each marked with its loop
 * (`worker`: 0 the primary -- its share of the traffic and the MCP requests workers hand it --
 * 1 to N - 1 the workers), the listeners' connections summed over the loops, and the
 * primary's child processes.
 */
export async function workersTasksDump (view: TasksView, pool: Pick<AdminWorkers, 'tasks'>): Promise<Record<string, unknown>> {
  const own: { worker: number } & Record<string, unknown> = { ...tasksDump(view), worker: 0 }
  const workers = await pool.tasks()
  const connections = new Map<string, Record<string, unknown> & { connections: number }>()
  for (const w of [own, ...workers]) {
    for (const l of w.listeners as Array<Record<string, unknown> & { key: string, connections: number }>) {
      const seen = connections.get(l.key)
      if (seen === undefined) connections.set(l.key, { ...l })
      else seen.connections += l.connections
    }
  }
  const tagged = (key: string) => [own, ...workers].flatMap(w => (w[key] as Array<Record<string, unknown>>).map(x => ({ worker: w.worker, ...x })))
  const { worker: _primary, ...rest } = own
  return {
    ...rest,
    listeners: [...connections.values()],
    requests: tagged('requests'),
    upstreamPools: tagged('upstreamPools'),
    traceWatchers: own.traceWatchers,
    workers: workers.map(w => ({ worker: w.worker, activeResources: w.activeResources }))
  }
}
