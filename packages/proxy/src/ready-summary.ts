/**
 * What a person who just ran `portico -f FILE` in a terminal wants first: where the gateways
 * answer, where to point an MCP client, where the web UI is. Printed once after start, and
 * only to a terminal — the log lines carry the same addresses for machines.
 */

import type { ProxyIR } from '@portico/engine'

export interface ReadySummaryInput {
  ir: ProxyIR
  /** Bound ports: the bind key (`address:port` of the IR) and the port actually bound. */
  listeners: Array<{ key: string, port: number }>
  /** The admin server's host and bound port; null when it is off. */
  admin: { host: string, port: number } | null
  adminWrites: boolean
}

/** A wildcard bind is reached as localhost from the same machine. */
function urlHost (address: string): string {
  if (address === '0.0.0.0' || address === '::' || address === '') return 'localhost'
  return address.includes(':') ? `[${address}]` : address
}

export function readySummary (input: ReadySummaryInput): string {
  const rows: Array<[string, string, string]> = []
  const mcpBackends = new Set(input.ir.backends.filter(b => b.kind === 'mcp').map(b => b.key))
  for (const bind of input.ir.binds) {
    const port = input.listeners.find(l => l.key === bind.key)?.port ?? bind.port
    for (const listener of bind.listeners) {
      const named = listener.hostname !== undefined && !listener.hostname.startsWith('*.') ? listener.hostname : undefined
      const scheme = listener.protocol === 'HTTPS' ? 'https' : listener.protocol === 'HTTP' ? 'http' : listener.protocol.toLowerCase()
      const base = `${scheme}://${named ?? urlHost(bind.address)}:${port}`
      rows.push([`gateway ${listener.gateway}`, `${base}/`, ''])
      for (const route of listener.routes) {
        if (!route.backends.some(b => mcpBackends.has(b.backend))) continue
        const host = route.hostnames.find(h => !h.startsWith('*.'))
        const routeBase = host !== undefined && named === undefined ? `${scheme}://${host}:${port}` : base
        const paths = route.matches.flatMap(m => m.path.kind === 'regex' ? [] : [m.path.value.replace(/(.)\/$/, '$1')])
        const sse = paths.filter(p => p.endsWith('/sse'))
        for (const path of paths.filter(p => !p.endsWith('/sse') && !p.endsWith('/message'))) {
          rows.push([`MCP (route ${route.name})`, `${routeBase}${path}`, 'point an MCP client here (streamable HTTP)'])
        }
        for (const path of sse) rows.push([`MCP (route ${route.name})`, `${routeBase}${path}`, 'legacy HTTP+SSE clients'])
      }
    }
  }
  if (input.admin !== null) {
    const url = `http://${urlHost(input.admin.host)}:${input.admin.port}/ui/`
    rows.push(['web UI', url, input.adminWrites ? 'routes, backends, traces, MCP playground' : 'read-only (config.adminWrites: true for the MCP playground)'])
  }
  const w0 = Math.max(...rows.map(r => r[0].length))
  const w1 = Math.max(...rows.map(r => r[1].length))
  const lines = rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${c === '' ? b : `${b.padEnd(w1)}  ${c}`}`)
  return ['', 'Portico is ready:', ...lines, ''].join('\n') + '\n'
}
