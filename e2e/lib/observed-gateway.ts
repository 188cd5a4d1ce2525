/**
 * A standalone Portico with something of everything its metrics describe — an apiKey route
 * (allowed and refused), a local rate limit (admitted and limited), a TLS backend (new
 * connections: connect and handshake), an MCP route (tool calls), an LLM route (plain and
 * streamed answers, priced, behind a regex guard) and one failing over from a provider that
 * is down, an InferencePool behind a real ext_proc endpoint picker (e2e/lib/inference-picker.ts)
 * whose first pick is a dead pod, a TCP route and UDP routes (answered, refused, unresolvable:
 * flows closed by reason, datagrams dropped), every request traced to a loopback OTLP/HTTP
 * sink, and — when the caller brings a mesh CA and an HBONE peer — a mesh route — and a
 * function that sends a round of such traffic. The metrics test and the dashboard test (a real
 * Prometheus scraping it) share it.
 */

import dgram from 'node:dgram'
import http from 'node:http'
import https from 'node:https'
import net, { type AddressInfo } from 'node:net'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { startLlmServer, type LlmServer } from './llm.ts'
import { connectClient, startSdkServer, type SdkServer } from './mcp.ts'
import { startTestPicker, type TestPicker } from './inference-picker.ts'

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

/** A gateway in the mesh: its pod env (e2e/lib/istio.ts meshGatewayEnv) and a peer to reach. */
export interface ObservedMesh {
  env: Record<string, string>
  /** The peer's SPIFFE ID and HBONE port (a testkit hbone-peer with a certificate of the same CA). */
  identity: string
  hbonePort: number
}

/** A server on loopback that takes any request (an OTLP/HTTP export) and answers 200. */
async function startSink (): Promise<http.Server> {
  const server = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end()) })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return server
}

/** One datagram to a UDP listener, and its answer (null after 500 ms). */
async function udpAsk (port: number, message: string): Promise<string | null> {
  const socket = dgram.createSocket('udp4')
  try {
    return await new Promise<string | null>(resolve => {
      const timer = setTimeout(() => resolve(null), 500)
      socket.once('message', m => { clearTimeout(timer); resolve(m.toString()) })
      socket.once('error', () => { clearTimeout(timer); resolve(null) })
      socket.send(message, port, '127.0.0.1')
    })
  } finally {
    socket.close()
  }
}

export async function startObservedGateway (options: { mesh?: ObservedMesh } = {}): Promise<ObservedGateway> {
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
  // TCP and UDP backends on loopback: they echo.
  const tcpEcho = net.createServer(socket => socket.pipe(socket))
  await new Promise<void>(resolve => tcpEcho.listen(0, '127.0.0.1', resolve))
  const udpEcho = dgram.createSocket('udp4')
  udpEcho.on('message', (m, rinfo) => udpEcho.send(m, rinfo.port, rinfo.address))
  await new Promise<void>(resolve => udpEcho.bind(0, '127.0.0.1', resolve))
  const pod: Backend = await startEchoBackend('pod')
  const deadPod = `127.0.0.1:${await freePort()}`
  const picker: TestPicker = await startTestPicker([deadPod, pod.host])
  const sink = await startSink()
  const [statsPort, tcpPort, udpPort, udpRefusedPort, udpUnresolvablePort, deadPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort()])
  const ai = (name: string, more: Record<string, unknown>) => ({ ai: { name, provider: { openAI: {} }, hostOverride: llm.host, ...more } })
  const closeServers = async (): Promise<void> => {
    udpEcho.close()
    await Promise.all([echo.close(), llm.close(), mcp.close(), pod.close(), picker.close(), ...[tlsBackend, tcpEcho, sink].map(s => new Promise<void>(resolve => s.close(() => resolve())))])
  }
  // A config the gateway refuses must not leave the servers holding the test process open.
  const portico = await startPortico({
    env: { LOG_LEVEL: 'info,request=warn,tracing=error', STATS_ADDR: `127.0.0.1:${statsPort}`, ...options.mesh?.env },
    config: (port): ConfigFile => ({
      config: { tracing: { otlpEndpoint: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`, otlpProtocol: 'http', randomSampling: true } },
      gateways: {
        default: gateway(port),
        tcp: { port: tcpPort, address: '127.0.0.1', protocol: 'TCP' },
        udp: { port: udpPort, address: '127.0.0.1', protocol: 'UDP', udp: { idleTimeout: '300ms' } },
        'udp-refused': { port: udpRefusedPort, address: '127.0.0.1', protocol: 'UDP' },
        'udp-unresolvable': { port: udpUnresolvablePort, address: '127.0.0.1', protocol: 'UDP' }
      },
      tcpRoutes: [{ name: 'stream', gateways: 'tcp', backends: [{ host: `127.0.0.1:${(tcpEcho.address() as AddressInfo).port}` }] }],
      udpRoutes: [
        { name: 'datagrams', gateways: 'udp', backends: [{ host: `127.0.0.1:${(udpEcho.address() as AddressInfo).port}` }] },
        { name: 'refused', gateways: 'udp-refused', backends: [{ host: `127.0.0.1:${deadPort}` }] },
        // The name fails to resolve: the datagrams queued meanwhile are dropped.
        { name: 'unresolvable', gateways: 'udp-unresolvable', backends: [{ host: 'backend.invalid:53' }] }
      ],
      routes: [
        { name: 'pool', matches: [{ path: { pathPrefix: '/pool' } }], backends: [{ inferencePool: { name: 'pool', endpoints: [deadPod, pod.host], endpointPicker: { host: picker.host, tls: false } } } as never] },
        { name: 'failover', matches: [{ path: { pathPrefix: '/failover' } }], backends: [{ ai: { name: 'failover-llm', groups: [{ providers: [{ name: 'down', provider: { openAI: {} }, hostOverride: `127.0.0.1:${deadPort}` }] }, { providers: [{ name: 'up', provider: { openAI: {} }, hostOverride: llm.host }] }] } }] },
        ...(options.mesh !== undefined ? [{ name: 'mesh', matches: [{ path: { pathPrefix: '/mesh' } }], backends: [{ host: echo.host, mesh: { identity: options.mesh.identity, hbonePort: options.mesh.hbonePort } }] }] : []),
        { name: 'keyed', matches: [{ path: { pathPrefix: '/keyed' } }], policies: { apiKey: { keys: [{ key: API_KEY, name: 'observer' }] } }, backends: [{ host: echo.host }] },
        { name: 'limited', matches: [{ path: { pathPrefix: '/limited' } }], policies: { localRateLimit: [{ maxTokens: 2, tokensPerFill: 2, fillInterval: '1h' }] }, backends: [{ host: echo.host }] },
        { name: 'secure', matches: [{ path: { pathPrefix: '/secure' } }], backends: [{ host: `https://127.0.0.1:${tlsPort}`, policies: { backendTLS: { insecure: true } } }] },
        { name: 'tools', matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [{ name: 'tools', mcp: { host: mcp.url } }] } }] },
        { name: 'chat', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ...ai('llm', { pricing: { currency: 'USD', input: '1', output: '2' } }), policies: { promptGuard: { request: [{ regex: { action: 'mask', rules: [{ builtin: 'Email' }] } }] } } }] },
        { name: 'echo', backends: [{ host: echo.host }] }
      ]
    })
  }).catch(async (err: unknown) => { await closeServers(); throw err })
  const url = portico.url
  const body = async (res: Response) => { await res.arrayBuffer() }
  const chat = (stream: boolean, prefix = '/openai') => fetch(`${url}${prefix}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'count' }] }) }).then(body)
  const tcpRound = async (): Promise<void> => {
    const socket = net.connect(tcpPort, '127.0.0.1')
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.once('data', () => socket.end())
      socket.once('close', () => resolve())
      socket.write('ping')
    })
  }
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
      await chat(false, '/failover')
      // The picker's list starts with a dead pod: the pool falls back to the next endpoint.
      await fetch(`${url}/pool/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'test-epp-endpoint-selection': `${deadPod},${pod.host}`, 'test-picker-mode': 'verbatim' }, body: '{"model":"m","prompt":"p"}' }).then(body)
      if (options.mesh !== undefined) await fetch(`${url}/mesh/a`).then(body)
      await tcpRound()
      await udpAsk(udpPort, 'ping')
      await udpAsk(udpRefusedPort, 'ping')
      const udp = dgram.createSocket('udp4')
      for (let i = 0; i < 3; i++) udp.send('queued', udpUnresolvablePort, '127.0.0.1')
      await new Promise(resolve => setTimeout(resolve, 50))
      udp.close()
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
      await closeServers()
    }
  }
}
