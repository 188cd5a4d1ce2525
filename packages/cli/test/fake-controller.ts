/**
 * A stand-in for the controller's admin `/logging` endpoint (the protocol porticoctl expects,
 * see packages/cli/README.md), until the controller exists.
 */

import http from 'node:http'
import type { AddressInfo } from 'node:net'

export const COMPONENTS = ['portico/syncer', 'portico/translator', 'gateway-controller', 'deployer', 'default']
const LEVELS = ['error', 'warn', 'info', 'debug', 'trace', 'off']

export interface FakeController {
  addr: string
  levels: Map<string, string>
  close(): Promise<void>
}

export async function startFakeController (): Promise<FakeController> {
  const levels = new Map(COMPONENTS.map(c => [c, 'info']))
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x')
    const reply = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'text/plain' })
      res.end(text)
    }
    if (url.pathname !== '/logging') return reply(404, 'not found\n')
    if (req.method === 'POST') {
      const level = url.searchParams.get('level')
      const set = url.searchParams.get('set')
      if (level !== null) {
        if (!LEVELS.includes(level)) return reply(400, `unknown level "${level}"\n`)
        for (const c of COMPONENTS) levels.set(c, level)
      }
      if (set !== null) {
        const eq = set.lastIndexOf('=')
        const component = set.slice(0, eq)
        const value = set.slice(eq + 1)
        if (!levels.has(component)) return reply(400, `unknown component "${component}"\n`)
        if (!LEVELS.includes(value)) return reply(400, `unknown level "${value}"\n`)
        levels.set(component, value)
      }
    }
    reply(200, [...levels].map(([c, l]) => `${c}=${l}\n`).join(''))
  })
  await new Promise<void>(resolve => server.listen({ host: '127.0.0.1', port: 0 }, () => resolve()))
  const port = (server.address() as AddressInfo).port
  return {
    addr: `127.0.0.1:${port}`,
    levels,
    close: () => new Promise<void>(resolve => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}
