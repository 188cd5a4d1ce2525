/**
 * State data-plane workers share (config.workers > 1), in one thread: two engines standing
 * for the primary and a worker compile the same config into the same shared memory. A
 * localRateLimit bucket admits maxTokens in all, whichever engine serves; a config compiled
 * to another shape is refused rather than read at the wrong place; a staged config goes
 * live when the shared switch says so. (Passive health across real workers:
 * e2e/test/workers.test.ts.)
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Engine, loadConfigText, sharedBackendKeys, Records, RECORD_BYTES, initSharedRecord, TraceHub } from '../src/index.ts'

function config (buckets = '[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h }]') {
  const loaded = loadConfigText(`
gateways:
  default:
    port: 1
    address: 127.0.0.1
    policies:
      localRateLimit: ${buckets}
routes:
  - name: hello
    policies:
      directResponse: { status: 200, body: hi }
`, { baseDir: process.cwd() })
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.diagnostics))
  return loaded.config.ir
}

/** The primary's slot table, in miniature. */
function slotsFor (ir: ReturnType<typeof config>, buffer: SharedArrayBuffer): Record<string, number> {
  const records = new Records(buffer)
  const slots: Record<string, number> = {}
  sharedBackendKeys(ir).forEach((key, i) => { initSharedRecord(records, i, key); slots[key] = i })
  return slots
}

async function serve (engine: Engine, bindKey: string): Promise<{ url: string, close: () => void }> {
  const server = http.createServer(engine.handler(bindKey))
  await new Promise<void>(resolve => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() }
}

test('rate-limit buckets in shared memory: two engines admit maxTokens in all; another shape is refused', async () => {
  const backends = new SharedArrayBuffer(16 * RECORD_BYTES)
  const ir = config()
  const primary = new Engine({ tracing: false, shared: { backends } })
  const worker = new Engine({ tracing: false, shared: { backends } })
  const slots = slotsFor(ir, backends)
  const made = primary.prepare(ir, { slots })
  assert.ok(made.buckets instanceof SharedArrayBuffer)
  primary.install(made)
  worker.install(worker.prepare(ir, { buckets: made.buckets!, slots }))
  const a = await serve(primary, ir.binds[0]!.key)
  const b = await serve(worker, ir.binds[0]!.key)
  const statuses: number[] = []
  for (let i = 0; i < 12; i++) statuses.push((await fetch(i % 2 === 0 ? a.url : b.url)).status)
  a.close()
  b.close()
  assert.equal(statuses.filter(s => s === 200).length, 5)
  // A config whose compile takes other records cannot adopt this memory.
  const other = config('[{ maxTokens: 5, tokensPerFill: 1, fillInterval: 1h }, { maxTokens: 9, tokensPerFill: 1, fillInterval: 1m }]')
  assert.throws(() => worker.prepare(other, { buckets: made.buckets!, slots }), /shared state mismatch/)
  await Promise.all([primary.close(), worker.close()])
})

test('records past where a growable buffer first ended: used once the engine takes the config\'s slots', async () => {
  const upstream = http.createServer((_, res) => res.end('ok'))
  await new Promise<void>(resolve => upstream.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const loaded = loadConfigText(`
gateways:
  default: { port: 1, address: 127.0.0.1 }
routes:
  - name: up
    backends:
      - host: 127.0.0.1:${(upstream.address() as AddressInfo).port}
`, { baseDir: process.cwd() })
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.diagnostics))
  const ir = loaded.config.ir
  // The worker's engine makes its views of the buffer while it holds one record...
  const backends = new SharedArrayBuffer(RECORD_BYTES, { maxByteLength: 16 * RECORD_BYTES })
  const worker = new Engine({ tracing: false, shared: { backends } })
  // ...then the primary grows it and gives the backend's stats record 5.
  backends.grow(8 * RECORD_BYTES)
  const records = new Records(backends)
  const slots: Record<string, number> = {}
  sharedBackendKeys(ir).forEach((key, i) => { initSharedRecord(records, 5 + i, key); slots[key] = 5 + i })
  worker.install(worker.prepare(ir, { slots }))
  const a = await serve(worker, ir.binds[0]!.key)
  for (let i = 0; i < 3; i++) assert.equal((await fetch(a.url)).status, 200)
  a.close()
  upstream.close()
  const backendKey = ir.backends[0]!.key
  assert.equal(worker.backendStats.get(backendKey).requests, 3)
  assert.equal(records.f64[Records.float(slots[`stats\0${backendKey}`]!, 1)], 3, 'in the shared record, where other threads read it')
  await worker.close()
})

test('a staged config goes live at the first request after the shared switch', () => {
  const backends = new SharedArrayBuffer(16 * RECORD_BYTES)
  const ir = config()
  const engine = new Engine({ tracing: false, shared: { backends } })
  engine.install(engine.prepare(ir, { slots: slotsFor(ir, backends) }))
  const next = { ...ir, version: 'next' }
  let flipped = false
  engine.stage(engine.prepare(next, { slots: slotsFor(next, backends) }), () => flipped)
  assert.equal(engine.config?.ir.version, ir.version)
  flipped = true
  assert.equal(engine.config?.ir.version, 'next')
})

test('a trace tap another thread took is skipped, and the next watcher still gets the request', () => {
  const hub = new TraceHub()
  const got: string[] = []
  const candidate = { method: 'GET', host: 'h', path: '/app/x', route: null, headers: {} }
  hub.arm({ accepts: () => true, take: () => false, deliver: () => got.push('a') })
  hub.arm({ accepts: () => true, take: () => true, deliver: () => got.push('b') })
  const recorder = hub.begin()
  assert.equal(hub.claim(recorder, candidate), true, 'the second watcher takes it')
  recorder.emit({ type: 'requestStarted' })
  assert.deepEqual(got, ['b'])
  assert.equal(hub.watcherCount, 0, 'both are gone here: one taken elsewhere, one here')
})
