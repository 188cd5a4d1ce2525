/**
 * The admin server of a real portico process: endpoint list, /config_dump (with secrets
 * redacted), /logging, /memory, /debug/tasks, pprof profiles (parsed back, and read by
 * `go tool pprof` when Go is here), /quitquitquit.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { gunzipSync } from 'node:zlib'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { Profile } from 'pprof-format'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { selfSignedCert } from '@portico/testkit/test-ca'

let backend: Backend
let portico: PorticoProcess
let admin: string
let dir: string
let release: () => void = () => {}

before(async () => {
  dir = makeTempDir()
  selfSignedCert(dir, 'localhost', { key: 'rsa', files: { cert: 'cert.pem', key: 'key.pem' } })
  backend = await startBackend((req, res) => {
    if (req.url === '/slow') {
      release = () => res.end('slow done')
      res.writeHead(200)
      res.write('started')
      return
    }
    res.end('ok')
  })
  const adminPort = await freePort()
  const tlsPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info' },
    config: port => ({
      gateways: {
        default: { port, address: '127.0.0.1' },
        secure: { port: tlsPort, address: '127.0.0.1', protocol: 'HTTPS', tls: { cert: 'cert.pem', key: 'key.pem' } }
      },
      routes: [
        { name: 'app', policies: { requestHeaderModifier: { add: { 'x-a': '1' }, set: { Authorization: 'Bearer sk-provider-key' } } }, backends: [{ host: backend.host }] },
        { name: 'tls', gateways: ['secure'], backends: [{ host: backend.host }] }
      ]
    })
  })
})

after(async () => {
  release()
  await portico?.stop()
  await backend?.close()
  rmSync(dir, { recursive: true, force: true })
})

async function adminGet (path: string, method: 'GET' | 'POST' = 'GET') {
  const res = await request(`${admin}${path}`, { method })
  const body = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, body, text: body.toString() }
}

test('GET / lists the endpoints', async () => {
  const { status, text } = await adminGet('/')
  assert.equal(status, 200)
  for (const path of ['/config_dump', '/debug/trace', '/logging', '/memory', '/debug/pprof/profile', '/debug/pprof/heap', '/debug/tasks', '/quitquitquit']) {
    assert.ok(text.includes(path), `missing ${path}`)
  }
})

test('/config_dump shows what is loaded, with live backend stats and secrets redacted', async () => {
  await request(`${portico.url}/x`).then(r => r.body.text())
  // With data-plane workers the request's stats land when the worker sees it end, which may
  // be a moment after the client has the answer.
  let status = 0
  let text = ''
  await waitUntil(async () => {
    ({ status, text } = await adminGet('/config_dump'))
    return status === 200 && JSON.parse(text).backends[0]?.stats.requests >= 1
  }, 5_000, 'the request in the backend stats')
  const dump = JSON.parse(text)
  for (const key of ['binds', 'listeners', 'routes', 'backends', 'workloads', 'services', 'policies', 'version', 'config']) assert.ok(key in dump, `missing ${key}`)
  assert.deepEqual(dump.routes.map((r: { key: string }) => r.key).sort(), ['app', 'tls'])
  assert.equal(dump.backends.length, 1)
  assert.equal(dump.backends[0].stats.requests >= 1, true)
  assert.equal(dump.backends[0].stats.health, 1)
  assert.equal(typeof dump.backends[0].stats.latencyMs, 'number')
  // A credential a policy sets (a provider's key) is shown redacted; so is any request header
  // value a policy sets that is not a public header (ir/redact.ts).
  assert.deepEqual(dump.policies, [{ target: 'route/app', phase: 'route', policies: { requestHeaderModifier: { add: { 'x-a': '<redacted>' }, set: { Authorization: '<redacted>' } } } }])
  assert.ok(!text.includes('sk-provider-key'), 'the key appears nowhere in the dump')
  assert.match(dump.version.configVersion, /^[0-9a-f]{12}$/)
  assert.equal(dump.config.adminAddr, admin.replace('http://', ''))
  const tlsBind = dump.binds.find((b: { protocol: string }) => b.protocol === 'HTTPS')
  assert.equal(tlsBind.tls.key, '<redacted>')
  assert.match(tlsBind.tls.cert, /BEGIN CERTIFICATE/)
  assert.ok(!text.includes('PRIVATE KEY'), 'no private key anywhere in the dump')
})

test('/logging shows and sets the level; bad values are a 400 listing what is allowed', async () => {
  assert.equal((await adminGet('/logging')).text, 'current log level is info\n')
  assert.equal((await adminGet('/logging?level=debug,engine=trace', 'POST')).text, 'current log level is debug,engine=trace\n')
  assert.equal((await adminGet('/logging?level=warn,request:info', 'POST')).text, 'current log level is warn,request=info\n')
  const bad = await adminGet('/logging?level=verbose', 'POST')
  assert.equal(bad.status, 400)
  assert.match(bad.text, /unknown level "verbose".*error, warn, info, debug, trace, off/)
  assert.equal((await adminGet('/logging')).text, 'current log level is warn,request=info\n', 'a bad value changes nothing')
  await adminGet('/logging?level=info', 'POST')
})

test('/memory and /debug/tasks (a request in flight shows with its age)', async () => {
  const memory = JSON.parse((await adminGet('/memory')).text)
  assert.ok(memory.process.rss > 0 && memory.heap.used_heap_size > 0)

  const slow = await request(`${portico.url}/slow`)
  const reader = slow.body[Symbol.asyncIterator]()
  await reader.next()
  const tasks = JSON.parse((await adminGet('/debug/tasks')).text)
  const inFlight = tasks.requests.find((r: { path: string }) => r.path === '/slow')
  assert.ok(inFlight, JSON.stringify(tasks))
  assert.equal(inFlight.stage, 'streaming response')
  assert.equal(inFlight.route, 'app')
  assert.ok(tasks.listeners.length === 2 && tasks.listeners.some((l: { connections: number }) => l.connections >= 1))
  assert.ok(tasks.upstreamPools.some((p: { connected: number }) => p.connected >= 1))
  release()
  for await (const _ of { [Symbol.asyncIterator]: () => reader }) { /* drain */ }
})

function parseProfile (body: Buffer): Profile {
  return Profile.decode(gunzipSync(body))
}

test('/debug/pprof/profile: a CPU profile in pprof format; seconds is validated', async () => {
  for (const bad of ['0', '301', 'abc', '1.5']) {
    const res = await adminGet(`/debug/pprof/profile?seconds=${bad}`)
    assert.equal(res.status, 400, `seconds=${bad}`)
    assert.match(res.text, /1 to 300/)
  }
  const load = setInterval(() => { void request(`${portico.url}/x`).then(r => r.body.text(), () => {}) }, 5)
  const res = await adminGet('/debug/pprof/profile?seconds=1')
  clearInterval(load)
  assert.equal(res.status, 200)
  const profile = parseProfile(res.body)
  const strings = profile.stringTable.strings
  assert.deepEqual(profile.sampleType.map(t => [strings[Number(t.type)], strings[Number(t.unit)]]), [['samples', 'count'], ['cpu', 'nanoseconds']])
  assert.ok(profile.sample.length > 0 && profile.location.length > 0 && profile.function.length > 0)
  assert.ok(Number(profile.durationNanos) >= 900_000_000)
  goToolPprof(res.body, 'cpu')
})

test('/debug/pprof/heap: a heap profile in pprof format', async () => {
  const res = await adminGet('/debug/pprof/heap')
  assert.equal(res.status, 200)
  const profile = parseProfile(res.body)
  const strings = profile.stringTable.strings
  assert.deepEqual(profile.sampleType.map(t => strings[Number(t.type)]), ['inuse_space'])
  assert.ok(profile.sample.length > 0)
  goToolPprof(res.body, 'heap')
})

/** When Go is installed, `go tool pprof -top` must read the profile as well. */
function goToolPprof (body: Buffer, name: string): void {
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).error !== undefined) return
  const file = join(dir, `${name}.pb.gz`)
  writeFileSync(file, body)
  const out = spawnSync('go', ['tool', 'pprof', '-top', file], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' } })
  assert.equal(out.status, 0, out.stderr)
  assert.match(out.stdout, /flat%/)
}

test('POST /quitquitquit drains and exits 0', async () => {
  const res = await adminGet('/quitquitquit', 'POST')
  assert.equal(res.status, 200)
  assert.equal(res.text, 'shutdown now\n')
  const exit = await portico.waitForExit(15_000)
  assert.equal(exit.code, 0)
})
