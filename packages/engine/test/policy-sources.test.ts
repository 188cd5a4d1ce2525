/**
 * Policies another resource attached (a PorticoPolicy in cluster mode: IR `policySources`)
 * say where they came from in the trace's `policySelection`, so a request can be followed
 * back to the object that changed it.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Engine } from '../src/engine/engine.ts'
import { configToIR } from '../src/config/to-ir.ts'
import type { TraceEvent } from '../src/trace/events.ts'

test('policySelection names the PorticoPolicy each attached policy came from', async () => {
  const { ir } = configToIR({
    gateways: { default: { port: 1 } },
    routes: [{ name: 'r', policies: { directResponse: { status: 204 }, responseHeaderModifier: { set: { 'x-a': '1' } } } }]
  }, { baseDir: '/', readFile: () => '' })
  const route = ir.binds[0]!.listeners[0]!.routes[0]!
  route.policySources = { responseHeaderModifier: 'PorticoPolicy apps/headers' }
  const engine = new Engine()
  engine.apply(ir)
  const server = http.createServer(engine.handler(ir.binds[0]!.key))
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  try {
    const events: TraceEvent[] = []
    const done = new Promise<void>(resolve => engine.hub.arm({ accepts: () => true, deliver: e => { events.push(e); if (e.message.type === 'requestFinished') resolve() } }))
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
    assert.equal(res.status, 204)
    await done
    const selections = events.map(e => e.message).filter(m => m.type === 'policySelection')
    const routePhase = selections.find(m => m.type === 'policySelection' && m.phase === 'route')
    assert.deepEqual(routePhase?.type === 'policySelection' ? routePhase.sources : undefined, { responseHeaderModifier: 'PorticoPolicy apps/headers' })
    const gatewayPhase = selections.find(m => m.type === 'policySelection' && m.phase === 'gateway')
    assert.equal(gatewayPhase?.type === 'policySelection' ? gatewayPhase.sources : 'missing', undefined, 'the resource\'s own policies carry no source')
  } finally {
    server.close()
    await engine.close()
  }
})
