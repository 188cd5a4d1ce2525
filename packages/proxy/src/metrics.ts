/**
 * Prometheus metrics (prom-client), names prefixed `portico_`. Label sets follow
 * agentgateway's where they overlap, so dashboards carry over. A missing label value is
 * written as `unknown`.
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { RequestContext } from '@portico/engine'
import { version } from './version.ts'

const REQUEST_LABELS = ['gateway', 'listener', 'route', 'backend', 'method', 'status', 'reason'] as const
type RequestLabels = Record<typeof REQUEST_LABELS[number], string>

/** Request latency buckets: 1 ms … 80 s. */
const DURATION_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80]

export class ProxyMetrics {
  readonly registry = new Registry()
  private readonly requests: Counter<typeof REQUEST_LABELS[number]>
  private readonly requestDuration: Histogram<typeof REQUEST_LABELS[number]>
  private readonly upstreamDuration: Histogram<'backend'>
  private readonly connections: Counter<'bind' | 'protocol'>
  private readonly openConnections: Gauge<'bind' | 'protocol'>
  private readonly reloads: Counter<'result'>
  private readonly mcpRequests: Counter<'method' | 'target' | 'tool'>
  /** Labelled children by label values: prom-client hashes labels on every call otherwise. */
  private readonly children = new Map<string, { count: Counter.Internal, duration: Histogram.Internal<typeof REQUEST_LABELS[number]> }>()

  constructor () {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'portico_' })
    // prom-client names three gauges `*_total`, which the exposition conventions (and
    // promtool) reserve for counters. Its `nodejs_active_resources{type}` gauge already
    // carries the same numbers, so the misnamed ones go.
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
      this.registry.removeSingleMetric(`portico_nodejs_${name}`)
    }
    new Gauge({ name: 'portico_build_info', help: 'Portico build information.', labelNames: ['version', 'node'], registers }).set({ version, node: process.version }, 1)
    this.requests = new Counter({ name: 'portico_requests_total', help: 'HTTP requests handled, by outcome.', labelNames: REQUEST_LABELS, registers })
    this.requestDuration = new Histogram({ name: 'portico_request_duration_seconds', help: 'Time from request arrival to the end of the response.', labelNames: REQUEST_LABELS, buckets: DURATION_BUCKETS, registers })
    this.upstreamDuration = new Histogram({ name: 'portico_upstream_call_duration_seconds', help: 'Time from the start of a backend call to its response headers.', labelNames: ['backend'], buckets: DURATION_BUCKETS, registers })
    this.connections = new Counter({ name: 'portico_downstream_connections_total', help: 'Client connections accepted.', labelNames: ['bind', 'protocol'], registers })
    this.openConnections = new Gauge({ name: 'portico_downstream_connections_open', help: 'Client connections open now.', labelNames: ['bind', 'protocol'], registers })
    this.mcpRequests = new Counter({ name: 'portico_mcp_requests_total', help: 'MCP requests by method, target and tool (or prompt/resource).', labelNames: ['method', 'target', 'tool'], registers })
    this.reloads = new Counter({ name: 'portico_config_reloads_total', help: 'Config loads and reloads, by result.', labelNames: ['result'], registers })
    this.reloads.inc({ result: 'success' }, 0)
    this.reloads.inc({ result: 'failure' }, 0)
  }

  observeRequest (ctx: RequestContext): void {
    const labels: RequestLabels = {
      gateway: ctx.listener.ir.gateway || 'unknown',
      listener: ctx.listener.ir.name || 'unknown',
      route: ctx.routeKey ?? 'unknown',
      backend: ctx.backend?.name ?? 'unknown',
      method: ctx.method,
      status: String(ctx.status),
      reason: ctx.reason
    }
    const key = `${labels.gateway}\0${labels.listener}\0${labels.route}\0${labels.backend}\0${labels.method}\0${labels.status}\0${labels.reason}`
    let child = this.children.get(key)
    if (child === undefined) {
      child = { count: this.requests.labels(labels), duration: this.requestDuration.labels(labels) }
      // Bounded: label sets come from config (routes, backends) and a few methods/statuses.
      if (this.children.size < 10_000) this.children.set(key, child)
    }
    child.count.inc()
    child.duration.observe((performance.now() - ctx.startMono) / 1000)
    if (ctx.mcp !== null) {
      this.mcpRequests.inc({ method: ctx.mcp.method, target: ctx.mcp.target === '' ? 'unknown' : ctx.mcp.target, tool: ctx.mcp.kind === 'resource' ? '' : ctx.mcp.name ?? '' })
    }
    if (ctx.upstreamHeadersAt > 0 && ctx.backend !== null && ctx.backend.kind !== 'mcp') {
      this.upstreamDuration.observe({ backend: ctx.backend.name }, (ctx.upstreamHeadersAt - ctx.upstreamStart) / 1000)
    }
  }

  connectionOpened (bind: string, protocol: string): () => void {
    this.connections.inc({ bind, protocol })
    this.openConnections.inc({ bind, protocol })
    return () => this.openConnections.dec({ bind, protocol })
  }

  configLoaded (ok: boolean): void {
    this.reloads.inc({ result: ok ? 'success' : 'failure' })
  }

  /** Forgets cached children when routes change, so removed routes stop growing the cache. */
  resetCache (): void {
    this.children.clear()
  }
}
