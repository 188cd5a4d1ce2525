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
 * With data-plane workers: the primary's own dump (MCP requests, child processes) with each
 * worker's requests and pools added (marked with the worker's number), and listeners' connections
 * summed over the workers.
 */
export async function workersTasksDump (view: TasksView, pool: Pick<AdminWorkers, 'tasks'>): Promise<Record<string, unknown>> {
  const own = tasksDump(view)
  const workers = await pool.tasks()
  const connections = new Map<string, Record<string, unknown> & { connections: number }>()
  for (const w of workers) {
    for (const l of w.listeners as Array<Record<string, unknown> & { key: string, connections: number }>) {
      const seen = connections.get(l.key)
      if (seen === undefined) connections.set(l.key, { ...l })
      else seen.connections += l.connections
    }
  }
  const tagged = (key: string) => workers.flatMap(w => (w[key] as Array<Record<string, unknown>>).map(x => ({ worker: w.worker, ...x })))
  return {
    ...own,
    listeners: [...connections.values()],
    requests: [...tagged('requests'), ...(own.requests as unknown[])],
    upstreamPools: tagged('upstreamPools'),
    traceWatchers: own.traceWatchers,
    workers: workers.map(w => ({ worker: w.worker, activeResources: w.activeResources }))
  }
}
