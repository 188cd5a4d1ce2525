/**
 * MCP routes validate Origin by default, as the MCP spec asks of servers (DNS rebinding: a
 * page on evil.example whose name resolves to 127.0.0.1 makes the browser call a local
 * gateway with `Host: evil.example` and `Origin: http://evil.example`). Accepted: no Origin
 * (non-browser clients), localhost origins, the listener's hostname, origins the route's
 * cors allows, allowedOrigins. Over loopback the Host must be local or the listener's.
 * `dnsRebindingProtection: false` turns it off. (What the official MCP conformance
 * scenario `dns-rebinding-protection` checks; before, the default was off and it failed.)
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { startSdkServer, type SdkServer } from '../lib/mcp.ts'

const INIT = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }

let portico: PorticoProcess
let sdk: SdkServer

before(async () => {
  sdk = await startSdkServer('sdk')
  const target = { name: 'sdk', mcp: { host: sdk.url } }
  portico = await startPortico({
    config: port => ({
      gateways: {
        default: { port, address: '127.0.0.1' },
        named: { port, address: '127.0.0.1', hostname: 'mcp.example.com' }
      },
      routes: [
        { name: 'default', gateways: ['default'], matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [target] } }] },
        { name: 'cors', gateways: ['default'], matches: [{ path: { pathPrefix: '/cors' } }], policies: { cors: { allowOrigins: ['https://app.example.org'] } }, backends: [{ mcp: { targets: [target] } }] },
        { name: 'listed', gateways: ['default'], matches: [{ path: { pathPrefix: '/listed' } }], backends: [{ mcp: { targets: [target], allowedOrigins: ['https://tool.example.net'] } }] },
        { name: 'off', gateways: ['default'], matches: [{ path: { pathPrefix: '/off' } }], backends: [{ mcp: { targets: [target], dnsRebindingProtection: false } }] },
        { name: 'named', gateways: ['named'], matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [target] } }] }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await sdk?.close()
})

async function init (path: string, headers: Record<string, string>): Promise<number> {
  const res = await request(`${portico.url}${path}`, {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
    body: JSON.stringify(INIT)
  })
  await res.body.text()
  return res.statusCode
}

const local = (): string => `127.0.0.1:${portico.port}`

test('a rebinding page (foreign Host and Origin over loopback) is refused with 403', async () => {
  assert.equal(await init('/mcp', { host: 'evil.example.com', origin: 'http://evil.example.com' }), 403)
  // Either one alone is enough to refuse.
  assert.equal(await init('/mcp', { host: 'evil.example.com' }), 403)
  assert.equal(await init('/mcp', { host: local(), origin: 'http://evil.example.com' }), 403)
})

test('localhost Host and Origin, and clients without Origin, are served', async () => {
  assert.equal(await init('/mcp', { host: `localhost:${portico.port}`, origin: `http://localhost:${portico.port}` }), 200)
  assert.equal(await init('/mcp', { host: local(), origin: `http://${local()}` }), 200)
  assert.equal(await init('/mcp', { host: local() }), 200)
})

test('origins the route\'s cors allows, allowedOrigins and the listener\'s hostname are served', async () => {
  assert.equal(await init('/cors', { host: local(), origin: 'https://app.example.org' }), 200)
  assert.equal(await init('/cors', { host: local(), origin: 'https://other.example.org' }), 403)
  assert.equal(await init('/listed', { host: local(), origin: 'https://tool.example.net' }), 200)
  assert.equal(await init('/mcp', { host: 'mcp.example.com', origin: 'https://mcp.example.com' }), 200)
  assert.equal(await init('/mcp', { host: 'mcp.example.com', origin: 'https://evil.example.com' }), 403)
})

test('dnsRebindingProtection: false serves any Host and Origin', async () => {
  assert.equal(await init('/off', { host: 'evil.example.com', origin: 'http://evil.example.com' }), 200)
})
