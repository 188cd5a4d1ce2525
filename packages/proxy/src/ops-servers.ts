/**
 * The two small servers that platforms scrape and probe: metrics (`GET /metrics` and
 * `/stats/prometheus`, default 0.0.0.0:15020) and readiness (`GET /healthz/ready`, default
 * 0.0.0.0:15021). Plain node:http — two fixed paths need no framework.
 */

import type * as Http from 'node:http'
import http from '@portico/engine/node-http'
import type { Address } from './settings.ts'
import type { ProxyMetrics } from './metrics.ts'
import { aggregatorRegistry } from './prom-client.ts'
import type { MetricObjectWithValues, MetricValue } from 'prom-client'

/** The data-plane workers' metrics, to sum with the primary's (workers/pool.ts). */
export interface WorkerMetrics {
  metrics(): Promise<Array<MetricObjectWithValues<MetricValue<string>>[]>>
}

export interface RunningServer {
  port: number
  close(): Promise<void>
}

async function listen (server: Http.Server, address: Address): Promise<RunningServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: address.host, port: address.port }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const a = server.address()
  return {
    port: typeof a === 'object' && a !== null ? a.port : address.port,
    close: () => new Promise(resolve => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}

/**
 * One exposition for the process: with data-plane workers, each series is the sum over the
 * primary and every worker (prom-client's aggregation, by metric name and label set); the
 * process-wide series (CPU, memory, build, reloads) come from the primary alone.
 */
async function render (metrics: ProxyMetrics, workers: WorkerMetrics | null): Promise<string> {
  if (workers === null) return await metrics.registry.metrics()
  const parts = [await metrics.registry.getMetricsAsJSON(), ...await workers.metrics()]
  const AggregatorRegistry = aggregatorRegistry()
  return await AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics()
}

export function startMetricsServer (address: Address, metrics: ProxyMetrics, workers: WorkerMetrics | null = null): Promise<RunningServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path !== '/metrics' && path !== '/stats/prometheus') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: use /metrics\n')
      return
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('method not allowed\n')
      return
    }
    render(metrics, workers).then(
      text => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      err => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(err as Error).message}\n`)
    )
  })
  return listen(server, address)
}

/** `pending()` lists what is not ready yet (empty = ready). */
export function startReadinessServer (address: Address, pending: () => string[]): Promise<RunningServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path !== '/healthz/ready') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: use /healthz/ready\n')
      return
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('method not allowed\n')
      return
    }
    const waiting = pending()
    if (waiting.length === 0) res.writeHead(200, { 'content-type': 'text/plain' }).end('ready\n')
    else res.writeHead(503, { 'content-type': 'text/plain' }).end(`not ready, pending: ${waiting.join(', ')}\n`)
  })
  return listen(server, address)
}
