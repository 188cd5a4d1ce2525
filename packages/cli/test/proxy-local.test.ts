/**
 * porticoctl against a real standalone portico process (started as the e2e suite does, with
 * its admin server on a free port): inject and watch traces with --raw, replay, config and
 * log commands, and the error exit codes.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { IncomingHttpHeaders } from 'node:http'
import { request } from 'undici'
import { parse as parseYaml } from 'yaml'
import { freePort, startPortico, type PorticoProcess } from '@portico/testkit/portico'
import { startBackend, type Backend } from '@portico/testkit/backends'
import { ctl, CtlProcess, jsonLines } from '@portico/testkit/porticoctl'

interface Seen {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
}

let backend: Backend
let portico: PorticoProcess
let adminAddr: string
let local: string[]
let deadPort: number
let dir: string
const seen: Seen[] = []

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'porticoctl-test-'))
  backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() })
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end(`hello ${req.url}`)
    })
  })
  deadPort = await freePort()
  const adminPort = await freePort()
  adminAddr = `127.0.0.1:${adminPort}`
  local = ['--local', '--admin-addr', adminAddr]
  portico = await startPortico({
    env: { ADMIN_ADDR: adminAddr },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'dead', matches: [{ path: { pathPrefix: '/dead' } }], backends: [{ host: `127.0.0.1:${deadPort}` }] },
        {
          name: 'app',
          matches: [{ path: { pathPrefix: '/app' } }],
          policies: { requestHeaderModifier: { set: { 'x-route': 'app' } } },
          backends: [{ host: backend.host }]
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
  rmSync(dir, { recursive: true, force: true })
})

function lastSeen (path: string): Seen {
  const found = seen.filter(s => s.url === path).at(-1)
  assert.ok(found !== undefined, `the backend never saw ${path}: ${seen.map(s => s.url).join(', ')}`)
  return found
}

test('inject mode without --port: sent to the URL\'s own port, traced', async () => {
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--', `http://localhost:${portico.port}/app/by-url-port`])
  assert.equal(r.code, 0, r.stderr)
  const events = jsonLines(r.stdout)
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
  const initial = events.find(e => e.message.stage === 'initial request')!.message.requestState as { request: { host: string, path: string } }
  assert.equal(initial.request.path, '/app/by-url-port')
  assert.equal(initial.request.host, `localhost:${portico.port}`)
})

test('inject mode --raw: JSON Lines, requestStarted first, requestFinished last, Host from the URL', async () => {
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'http://example.test/app/path?x=1', '-H', 'x: y'])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stderr, '')
  assert.ok(r.stdout.endsWith('\n'))
  const events = jsonLines(r.stdout)
  for (const [i, line] of r.stdout.trimEnd().split('\n').entries()) {
    assert.ok(!line.includes('\n') && line.startsWith('{"eventStart":'), `line ${i + 1} is one event record`)
  }
  assert.equal(events[0]!.message.type, 'requestStarted')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
  const types = events.map(e => e.message.type)
  for (const t of ['requestSnapshot', 'policySelection', 'routeSelection', 'backendCallStart', 'backendCallResult', 'responseSnapshot', 'bodySnapshot']) {
    assert.ok(types.includes(t), `${t} in ${types.join(', ')}`)
  }
  const initial = events.find(e => e.message.stage === 'initial request')!.message.requestState as { request: { host: string, path: string, headers: Record<string, string> } }
  assert.equal(initial.request.host, 'example.test')
  assert.equal(initial.request.path, '/app/path')
  assert.equal(initial.request.headers.x, 'y')
  assert.equal(events.find(e => e.message.type === 'routeSelection')!.message.selectedRoute, 'app')
  assert.equal(events.find(e => e.message.type === 'backendCallResult')!.message.status, 200)
  // The real backend saw the request as the proxy forwarded it.
  const got = lastSeen('/app/path?x=1')
  assert.equal(got.headers.host, 'example.test')
  assert.equal(got.headers.x, 'y')
  assert.equal(got.headers['x-route'], 'app')
  assert.match(String(got.headers['x-porticoctl-trace']), /^[0-9a-f-]{36}$/)
  assert.equal(initial.request.headers['x-porticoctl-trace'], got.headers['x-porticoctl-trace'], 'the trace is of exactly the request porticoctl sent')
  writeFileSync(join(dir, 'saved.jsonl'), r.stdout)
})

test('inject mode sends the method, body and headers curl would', async () => {
  const file = join(dir, 'payload.bin')
  writeFileSync(file, 'bin\r\nary')
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'example.test/app/upload', '-X', 'PUT', '--data-binary', `@${file}`, '-H', 'Content-Type: application/octet-stream'])
  assert.equal(r.code, 0, r.stderr)
  const got = lastSeen('/app/upload')
  assert.equal(got.method, 'PUT')
  assert.equal(got.body, 'bin\r\nary')
  assert.equal(got.headers['content-type'], 'application/octet-stream')
  const body = jsonLines(r.stdout).find(e => e.message.type === 'bodySnapshot' && e.message.stage === 'final request')
  assert.equal(Buffer.from(String(body?.message.body), 'base64').toString(), 'bin\r\nary')

  const form = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'http://example.test/app/form', '-d', 'a=1', '-d', 'b=2', '-v'])
  assert.equal(form.code, 0, form.stderr)
  assert.equal(lastSeen('/app/form').body, 'a=1&b=2')
  assert.equal(lastSeen('/app/form').method, 'POST')
  assert.match(form.stderr, /^> POST \/app\/form HTTP\/1\.1$/m, '-v prints the request on stderr')
  assert.match(form.stderr, /^> Host: example\.test$/m)
  assert.match(form.stderr, /^< HTTP\/1\.1 200$/m)
})

test('inject mode: a refused backend is a complete trace, not an error', async () => {
  const r = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', 'http://example.test/dead/x'])
  assert.equal(r.code, 0, r.stderr)
  const result = jsonLines(r.stdout).find(e => e.message.type === 'backendCallResult')!
  assert.equal(result.message.status, null)
  assert.match(String(result.message.error), /ECONNREFUSED/)
  assert.equal(result.severity, 'error')
})

test('watch mode: catches the next request another client sends (with a --path filter)', async () => {
  const watcher = new CtlProcess(['proxy', 'trace', ...local, '--raw', '--path', '/app/watched*'])
  // The watcher arms its trace at some point after start: keep sending until it catches one.
  let n = 0
  const deadline = Date.now() + 10_000
  while (watcher.child.exitCode === null && Date.now() < deadline) {
    n++
    await request(`${portico.url}/app/other-${n}`).then(r => r.body.text())
    await request(`${portico.url}/app/watched-${n}`, { headers: { 'x-client': 'other' } }).then(r => r.body.text())
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  const r = await watcher.done
  assert.equal(r.code, 0, r.stderr)
  const events = jsonLines(r.stdout)
  assert.equal(events[0]!.message.type, 'requestStarted')
  assert.equal(events.at(-1)!.message.type, 'requestFinished')
  const initial = events.find(e => e.message.stage === 'initial request')!.message.requestState as { request: { path: string, headers: Record<string, string> } }
  assert.match(initial.request.path, /^\/app\/watched-\d+$/)
  assert.equal(initial.request.headers['x-client'], 'other')
  assert.equal(events.filter(e => e.message.type === 'requestStarted').length, 1, 'one request per trace')
})

test('-f replays a saved --raw trace (as JSON Lines when stdout is not a terminal)', async () => {
  const saved = readFileSync(join(dir, 'saved.jsonl'), 'utf8')
  const r = await ctl(['proxy', 'trace', '-f', join(dir, 'saved.jsonl')])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, saved)
  writeFileSync(join(dir, 'broken.jsonl'), saved.split('\n').slice(0, 2).join('\n') + '\n{"not":"an event"}\n')
  const bad = await ctl(['proxy', 'trace', '-f', join(dir, 'broken.jsonl')])
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /^porticoctl: .*broken\.jsonl:3: not a trace event: no message\.type\n$/)
  const missing = await ctl(['proxy', 'trace', '-f', join(dir, 'missing.jsonl')])
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /cannot read .*missing\.jsonl: ENOENT/)
})

test('proxy config all -o json|yaml|short', async () => {
  const json = await ctl(['proxy', 'config', 'all', ...local, '-o', 'json'])
  assert.equal(json.code, 0, json.stderr)
  const doc = JSON.parse(json.stdout) as { routes: Array<{ name: string }>, backends: Array<{ kind: string, target: string }>, policies: Array<{ target: string }> }
  assert.deepEqual(Object.keys(doc), ['routes', 'backends', 'policies'])
  assert.deepEqual(doc.routes.map(r => r.name), ['dead', 'app'])
  assert.deepEqual(doc.backends.map(b => b.target).sort(), [backend.host, `127.0.0.1:${deadPort}`].sort())
  assert.deepEqual(doc.policies.map(p => p.target), ['route/app'])

  const yaml = await ctl(['proxy', 'config', 'all', ...local, '-o', 'yaml'])
  assert.equal(yaml.code, 0, yaml.stderr)
  assert.deepEqual(parseYaml(yaml.stdout).routes.map((r: { name: string }) => r.name), ['dead', 'app'])

  const short = await ctl(['proxy', 'config', 'all', ...local])
  assert.equal(short.code, 0, short.stderr)
  const lines = short.stdout.split('\n')
  assert.equal(lines[0], 'ROUTES')
  assert.match(lines[1]!, /^NAME +NAMESPACE +LISTENER +HOSTNAMES +MATCHES +BACKENDS +POLICIES$/)
  assert.match(lines[2]!, new RegExp(`^dead +- +default +\\* +prefix /dead +127\\.0\\.0\\.1:${deadPort} +-$`))
  assert.match(lines[3]!, /^app +- +default +\* +prefix \/app +127\.0\.0\.1:\d+ +requestHeaderModifier$/)
  assert.match(short.stdout, /\nBACKENDS\nTYPE +NAME/)
  assert.match(short.stdout, /\nPOLICIES\nTARGET +PHASE +POLICIES\nroute\/app +route +requestHeaderModifier\n$/)

  const bad = await ctl(['proxy', 'config', 'all', ...local, '-o', 'xml'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /porticoctl: option '-o, --output <format>' argument 'xml' is invalid/)
})

test('proxy config backends: the table, with live stats', async () => {
  // At least one call to the dead backend, which fails: its HEALTH must say so.
  await request(`${portico.url}/dead/health-check`).then(r => r.body.text())
  const r = await ctl(['proxy', 'config', 'backends', ...local])
  assert.equal(r.code, 0, r.stderr)
  const lines = r.stdout.trimEnd().split('\n')
  assert.match(lines[0]!, /^TYPE +NAME +NAMESPACE +ENDPOINT +HEALTH +REQUESTS +LATENCY$/)
  const app = lines.find(l => l.includes(backend.host))!
  const cells = app.split(/ {3,}/)
  assert.equal(cells[0], 'Backend')
  assert.equal(cells[1], backend.host)
  assert.equal(cells[2], '-')
  assert.equal(cells[3], backend.host)
  assert.equal(cells[4], '1.00')
  assert.ok(Number(cells[5]) >= 3, `requests: ${cells[5]}`)
  assert.match(cells[6]!, /^\d+(\.\d+)?ms$/)
  const dead = lines.find(l => l.includes(`127.0.0.1:${deadPort}`))!
  // Every call failed: 0.00 (a moving average that started at 1 used to say 0.90 after one failure).
  assert.match(dead, /^Backend .* 0\.00 +[1-9]\d* +-$/, 'a backend that never answered: health 0.00, no latency')
  // Not on a terminal: no colour codes.
  assert.doesNotMatch(r.stdout, /\x1b/)
})

test('proxy log: show, set with --level, refuse a bad level', async () => {
  const show = await ctl(['proxy', 'log', ...local])
  assert.equal(show.code, 0, show.stderr)
  assert.equal(show.stdout, 'current log level is info\n')
  const set = await ctl(['proxy', 'log', ...local, '--level', 'debug'])
  assert.equal(set.code, 0, set.stderr)
  assert.equal(set.stdout, 'current log level is debug\n')
  assert.equal((await ctl(['proxy', 'log', ...local])).stdout, 'current log level is debug\n')
  const filter = await ctl(['proxy', 'log', ...local, '--level', 'info,engine=debug'])
  assert.equal(filter.stdout, 'current log level is info,engine=debug\n')
  const bad = await ctl(['proxy', 'log', ...local, '--level', 'loud'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /^porticoctl: --level: invalid log level "loud": unknown level "loud"/)
  await ctl(['proxy', 'log', ...local, '--level', 'info'])
})

test('proxy mesh: a gateway without a mesh says so, exit 0', async () => {
  const r = await ctl(['proxy', 'mesh', ...local])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, 'STATE:  not configured (no config.mesh, MESH_ENABLED not set)\n')
})

test('errors: admin port closed, bad curl arguments, trace timeout, unreachable listener, usage', async () => {
  const closed = `127.0.0.1:${await freePort()}`
  for (const args of [['proxy', 'log'], ['proxy', 'config', 'backends'], ['proxy', 'config', 'all'], ['proxy', 'trace', '--raw']]) {
    const r = await ctl([...args, '--local', '--admin-addr', closed])
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stderr, `porticoctl: cannot reach the admin server at ${closed} (is portico running? use --admin-addr)\n`)
    assert.equal(r.stdout, '')
  }

  const curl = await ctl(['proxy', 'trace', ...local, '--raw', '--', 'http://example.test/', '--no-such-option'])
  assert.equal(curl.code, 2)
  assert.match(curl.stderr, /^porticoctl: bad curl arguments: unknown option --no-such-option/)
  const missing = await ctl(['proxy', 'trace', ...local, '--raw', '--', 'http://example.test/', '--data-binary', '@/nonexistent/file'])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /^porticoctl: bad curl arguments: --data-binary @\/nonexistent\/file: cannot read \/nonexistent\/file: ENOENT/)

  const started = Date.now()
  const timeout = await ctl(['proxy', 'trace', ...local, '--raw', '--timeout', '500ms', '--path', '/never'])
  assert.equal(timeout.code, 1)
  assert.equal(timeout.stderr, 'porticoctl: trace timed out after 500ms: no matching request reached the proxy\n')
  assert.ok(Date.now() - started < 5000)

  const refused = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(await freePort()), '--', 'http://example.test/app/x'])
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /^porticoctl: the request to http:\/\/127\.0\.0\.1:\d+\/app\/x \(Host: example\.test\) failed: connection refused \(is --port \d+ a listener port of this proxy\?\)\n$/)

  // --port pointing at something that is not this proxy: answered, but never traced.
  const elsewhere = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(backend.port), '--', 'http://example.test/app/x'])
  assert.equal(elsewhere.code, 1)
  assert.equal(elsewhere.stderr, `porticoctl: port ${backend.port} answered 200, but the proxy at ${adminAddr} traced no request: is --port ${backend.port} a listener port of this proxy?\n`)

  // No --port: the URL's own port says where (the quick start's 3000 only when it names none).
  const dead = await freePort()
  const fromUrl = await ctl(['proxy', 'trace', ...local, '--raw', '--', `http://localhost:${dead}/app/x`])
  assert.equal(fromUrl.code, 1)
  assert.equal(fromUrl.stderr, `porticoctl: the request to http://127.0.0.1:${dead}/app/x (Host: localhost:${dead}) failed: connection refused (is ${dead} (the URL's port) a listener port of this proxy? --port names another)\n`)

  const neither = await ctl(['proxy', 'log'])
  assert.equal(neither.code, 2)
  assert.match(neither.stderr, /which proxy\? give gateway\/NAME/)
  const unknown = await ctl(['proxy', 'log', '--local', '--bogus'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /^porticoctl: unknown option '--bogus'/)
  const stray = await ctl(['proxy', 'log', '--local', '--', 'http://x/'])
  assert.equal(stray.code, 2)
  assert.match(stray.stderr, /proxy log takes no arguments after --/)
  const none = await ctl([])
  assert.equal(none.code, 2)
  assert.match(none.stderr, /Usage: porticoctl/)
})
