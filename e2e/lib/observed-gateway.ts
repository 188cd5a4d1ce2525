/**
 * A standalone Portico with something of everything its metrics describe — an apiKey route
 * (allowed and refused), a local rate limit (admitted and limited), a TLS backend (new
 * connections: connect and handshake), an MCP route (tool calls), an LLM route (plain and
 * streamed answers) — and a function that sends a round of such traffic. The metrics test
 * and the dashboard test (a real Prometheus scraping it) share it.
 */

import https from 'node:https'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { startLlmServer, type LlmServer } from './llm.ts'
import { connectClient, startSdkServer, type SdkServer } from './mcp.ts'

export const API_KEY = 'observed-key-1234'

export interface ObservedGateway {
  portico: PorticoProcess
  /** http://127.0.0.1:PORT of the metrics server (/metrics). */
  stats: string
  statsPort: number
  /** Sends one round of every kind of traffic. */
  traffic(): Promise<void>
  close(): Promise<void>
}

export async function startObservedGateway (): Promise<ObservedGateway> {
  const dir = makeTempDir('portico-observed-')
  const { cert, key } = selfSignedCert(dir, 'localhost')
  const tlsBackend = https.createServer({ key, cert }, (req, res) => {
    req.resume()
    req.on('end', () => res.end('tls ok'))
  })
  await new Promise<void>(resolve => tlsBackend.listen(0, '127.0.0.1', resolve))
  const tlsPort = (tlsBackend.address() as { port: number }).port
  const echo: Backend = await startEchoBackend('echo')
  const llm: LlmServer = await startLlmServer({ reply: 'one two three four' })
  const mcp: SdkServer = await startSdkServer('tools')
  const statsPort = await freePort()
  const portico = await startPortico({
    env: { LOG_LEVEL: 'info,request=warn', STATS_ADDR: `127.0.0.1:${statsPort}` },
    config: (port): ConfigFile => ({
      gateways: { default: gateway(port) },
      routes: [
        { name: 'keyed', matches: [{ path: { pathPrefix: '/keyed' } }], policies: { apiKey: { keys: [{ key: API_KEY, name: 'observer' }] } }, backends: [{ host: echo.host }] },
        { name: 'limited', matches: [{ path: { pathPrefix: '/limited' } }], policies: { localRateLimit: [{ maxTokens: 2, tokensPerFill: 2, fillInterval: '1h' }] }, backends: [{ host: echo.host }] },
        { name: 'secure', matches: [{ path: { pathPrefix: '/secure' } }], backends: [{ host: `https://127.0.0.1:${tlsPort}`, policies: { backendTLS: { insecure: true } } }] },
        { name: 'tools', matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [{ name: 'tools', mcp: { host: mcp.url } }] } }] },
        { name: 'chat', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ai: { name: 'llm', provider: { openAI: {} }, hostOverride: llm.host } }] },
        { name: 'echo', backends: [{ host: echo.host }] }
      ]
    })
  })
  const url = portico.url
  const body = async (res: Response) => { await res.arrayBuffer() }
  const chat = (stream: boolean) => fetch(`${url}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'count' }] }) }).then(body)
  return {
    portico,
    statsPort,
    stats: `http://127.0.0.1:${statsPort}`,
    async traffic () {
      await fetch(`${url}/keyed/a`, { headers: { authorization: `Bearer ${API_KEY}` } }).then(body)
      await fetch(`${url}/keyed/a`).then(body)
      for (let i = 0; i < 3; i++) await fetch(`${url}/limited/a`).then(body)
      await fetch(`${url}/secure/a`, { headers: { connection: 'close' } }).then(body)
      await fetch(`${url}/echo/upload`, { method: 'POST', body: 'x'.repeat(5000) }).then(body)
      await fetch(`${url}/nowhere-else/404`).then(body)
      await chat(false)
      await chat(true)
      const { client } = await connectClient(`${url}/mcp`)
      try {
        await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })
        await client.listTools()
      } finally {
        await client.close()
      }
    },
    async close () {
      await portico.stop()
      await Promise.all([echo.close(), llm.close(), mcp.close(), new Promise<void>(resolve => tlsBackend.close(() => resolve()))])
    }
  }
}
