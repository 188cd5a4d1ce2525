/**
 * The controller's small HTTP servers: health (`/readyz`, `/healthz`; port 9093), metrics
 * (`/metrics`, prom-client, `portico_controller_*`; port 9092), and admin on localhost
 * (9095): `/logging` with per-component levels, as `porticoctl controller log` uses it —
 * GET lists `component=level` lines; POST `?level=L` sets every component, `?set=c=L`
 * (or `c:L`) one. The admin server refuses cross-site writes and DNS-rebinding Hosts exactly
 * as the proxy's admin does (one guard, packages/ops/src/admin-guard.ts).
 */

import type * as Http from 'node:http'
import http from '@portico/engine/node-http'
import type { Registry } from 'prom-client'
import { checkAdminMessage, checkAdminRequest, requestFacts, type Logs } from '@portico/ops'

export const COMPONENTS = ['portico/syncer', 'portico/translator', 'gateway-controller', 'deployer', 'default'] as const
const LEVELS = ['error', 'warn', 'info', 'debug', 'trace', 'off']

export interface RunningServer {
  port: number
  close(): Promise<void>
}

function listen (server: Http.Server, host: string, port: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host, port }, () => {
      const a = server.address()
      resolve({
        port: typeof a === 'object' && a !== null ? a.port : port,
        close: () => new Promise(r => {
          server.close(() => r())
          server.closeAllConnections()
        })
      })
    })
  })
}

function send (res: Http.ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) }).end(body)
}

export function startHealthServer (port: number, pending: () => string[]): Promise<RunningServer> {
  return listen(http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path === '/healthz') return send(res, 200, 'ok\n')
    if (path !== '/readyz') return send(res, 404, 'not found: use /readyz or /healthz\n')
    const waiting = pending()
    return waiting.length === 0 ? send(res, 200, 'ready\n') : send(res, 503, `not ready, pending: ${waiting.join(', ')}\n`)
  }), '0.0.0.0', port)
}

export function startMetricsServer (port: number, registry: Registry): Promise<RunningServer> {
  return listen(http.createServer((req, res) => {
    if ((req.url ?? '/').split('?')[0] !== '/metrics') return send(res, 404, 'not found: use /metrics\n')
    registry.metrics().then(text => send(res, 200, text, registry.contentType), err => send(res, 500, String(err)))
  }), '0.0.0.0', port)
}

export function startAdminServer (host: string, port: number, logs: Logs): Promise<RunningServer> {
  const current = () => COMPONENTS.map(c => `${c}=${logs.levelOf(c)}`).join('\n') + '\n'
  const guard = { bindHost: host, allowedHosts: [] }
  return listen(http.createServer((req, res) => {
    const bad = checkAdminMessage(req.url ?? '/', req.rawHeaders)
    if (bad !== null) {
      res.shouldKeepAlive = false
      return send(res, 400, `bad request: ${bad}\n`)
    }
    const refused = checkAdminRequest(requestFacts(req.method ?? 'GET', req.headers), guard)
    if (refused !== null) return send(res, 403, `${refused}\n`)
    const url = new URL(req.url ?? '/', 'http://admin')
    if (url.pathname !== '/logging') return send(res, 404, 'not found: use /logging\n')
    if (req.method === 'POST' || req.method === 'PUT') {
      const level = url.searchParams.get('level')
      const set = url.searchParams.getAll('set')
      const filter = logs.current.split(',')
      const modules = new Map<string, string>(filter.slice(1).map(d => d.split('=') as [string, string]))
      let global = filter[0]!
      if (level !== null) {
        if (!LEVELS.includes(level)) return send(res, 400, `invalid level "${level}": use one of ${LEVELS.join(', ')}\n`)
        global = level
        modules.clear()
      }
      for (const directive of set) {
        const [component, lvl] = directive.split(/[=:]/) as [string, string | undefined]
        if (!(COMPONENTS as readonly string[]).includes(component)) return send(res, 400, `unknown component "${component}": one of ${COMPONENTS.join(', ')}\n`)
        if (lvl === undefined || !LEVELS.includes(lvl)) return send(res, 400, `invalid level "${lvl ?? ''}" for ${component}: use one of ${LEVELS.join(', ')}\n`)
        modules.set(component, lvl)
      }
      logs.set([global, ...[...modules].map(([c, l]) => `${c}=${l}`)].join(','))
    }
    return send(res, 200, current())
  }), host, port)
}
