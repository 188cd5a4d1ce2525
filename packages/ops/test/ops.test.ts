/**
 * @portico/ops: the log filter grammar, the admin guard's decisions, and the package's reason
 * to exist — importing it loads neither the proxy nor the engine barrel.
 */

import { mock, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { isPorticoError } from '@portico/engine/errors'
import { isoTime } from '../src/logs.ts'
import { Logs, checkAdminMessage, checkAdminRequest, formatLogFilter, parseLogFilter, requestFacts } from '@portico/ops'

test('log filters: global and per-component levels, both separators; bad input is PORTICO_BAD_LOG_LEVEL', () => {
  assert.equal(formatLogFilter(parseLogFilter('warn,config=debug,engine:off')), 'warn,config=debug,engine=off')
  assert.equal(formatLogFilter(parseLogFilter('config=debug')), 'info,config=debug')
  for (const bad of ['', 'loud', '=debug', 'config=loud']) {
    assert.throws(() => parseLogFilter(bad), (err: unknown) => isPorticoError(err, 'PORTICO_BAD_LOG_LEVEL'), bad)
  }
  const logs = new Logs({ level: 'info,config=debug', format: 'json', stream: new PassThrough() })
  assert.equal(logs.for('config').level, 'debug')
  assert.equal(logs.for('request').level, 'info')
  assert.throws(() => logs.set('nope'), (err: unknown) => isPorticoError(err, 'PORTICO_BAD_LOG_LEVEL'))
  assert.equal(logs.current, 'info,config=debug', 'a refused filter changes nothing')
  logs.set('off,request=warn')
  assert.equal(logs.for('config').level, 'silent')
  assert.equal(logs.for('request').level, 'warn')
})

test('admin guard: rebinding Hosts are refused for reads, cross-site origins for writes', () => {
  const options = { bindHost: '127.0.0.1', allowedHosts: ['admin.internal'] }
  const check = (method: string, headers: Record<string, string>) => checkAdminRequest(requestFacts(method, headers), options)
  assert.equal(check('GET', { host: '127.0.0.1:15000' }), null)
  assert.equal(check('GET', { host: 'admin.internal:15000' }), null)
  assert.match(check('GET', { host: 'evil.example' }) ?? '', /DNS rebinding/)
  assert.equal(check('POST', { host: 'localhost:15000' }), null, 'curl sends no Origin')
  assert.equal(check('POST', { host: 'localhost:15000', origin: 'http://localhost:15000' }), null)
  assert.match(check('POST', { host: 'localhost:15000', origin: 'http://evil.example' }) ?? '', /cross-origin/)
  assert.match(check('POST', { host: 'localhost:15000', 'sec-fetch-site': 'cross-site' }) ?? '', /cross-site/)
  assert.equal(check('GET', { host: 'localhost:15000', origin: 'http://evil.example' }), null, 'reads are not cross-site writes')
})

test('admin guard: the request line must have a path for its target and at most one valid Host line', () => {
  assert.equal(checkAdminMessage('/config_dump', ['Host', '127.0.0.1:15000']), null)
  assert.equal(checkAdminMessage('/', []), null, 'HTTP/1.0 without Host')
  assert.match(checkAdminMessage('http://evil.example/config_dump', ['Host', 'localhost']) ?? '', /must be a path/)
  assert.match(checkAdminMessage('*', ['Host', 'localhost']) ?? '', /must be a path/)
  assert.match(checkAdminMessage('/', ['Host', 'localhost', 'host', 'evil.example']) ?? '', /more than one Host/)
  assert.match(checkAdminMessage('/', ['Host', 'evil example']) ?? '', /not a valid host/)
})

test('importing @portico/ops loads neither @portico/proxy nor the engine barrel', () => {
  // Sync module hooks record every file the import loads.
  const script = `
    import { registerHooks } from 'node:module'
    const seen = []
    registerHooks({ load (url, context, next) { seen.push(url); return next(url, context) } })
    await import('@portico/ops')
    process.stdout.write(JSON.stringify(seen.filter(u => u.startsWith('file:') && !u.includes('/node_modules/'))))
  `
  const cwd = fileURLToPath(new URL('..', import.meta.url))
  const loaded = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd, encoding: 'utf8' })) as string[]
  const local = loaded.map(u => u.slice(u.indexOf('/packages/') + 1))
  assert.deepEqual(local.filter(p => !p.startsWith('packages/ops/')).sort(), ['packages/engine/src/http/request-target.ts', 'packages/engine/src/util/errors.ts', 'packages/engine/src/util/hex.ts'])
})

test('log line times: what pino\'s isoTime writes, the part up to the second made once a second', () => {
  mock.timers.enable({ apis: ['Date'] })
  try {
    const base = Date.UTC(2026, 10, 27, 23, 59, 58)
    for (const at of [base, base + 5, base + 50, base + 999, base + 1000, base + 1001, base + 2000 + 120, base + 86_400_000 * 40 + 7]) {
      mock.timers.setTime(at)
      assert.equal(isoTime(), `,"time":"${new Date(at).toISOString()}"`)
    }
  } finally {
    mock.timers.reset()
  }
})

test('infoLine writes the line pino writes for the same fields (the access log bypasses pino\'s formatting)', () => {
  mock.timers.enable({ apis: ['Date'] })
  try {
    mock.timers.setTime(Date.UTC(2026, 10, 27, 12, 0, 0, 42))
    const lines: string[] = []
    const stream = new PassThrough()
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(l => l !== '')))
    const logs = new Logs({ level: 'info', format: 'json', stream, bindings: { worker: 2 } })
    const fields = { gateway: 'default', route: null, backend: undefined, status: 200, path: '/a"b\\c\u2028', nested: { a: [1, 'x'] }, ok: true }
    logs.for('request').info(fields, 'request')
    logs.infoLine('request')(fields, 'request')
    logs.infoLine('request')({}, 'connection')
    assert.equal(lines.length, 3)
    assert.equal(lines[1], lines[0])
    assert.deepEqual(JSON.parse(lines[2]!), { level: 30, time: '2026-11-27T12:00:00.042Z', pid: process.pid, worker: 2, component: 'request', msg: 'connection' })
    // A lone surrogate is escaped (well-formed JSON.stringify), where pino wrote it raw and
    // the UTF-8 encoding made it U+FFFD.
    logs.infoLine('request')({ path: '/\ud800' }, 'request')
    assert.match(lines.at(-1)!, /"path":"\/\\ud800"/)
    // What JSON.stringify cannot write goes through pino.
    logs.infoLine('request')({ big: 1n }, 'request')
    assert.equal(lines.length, 5)
    assert.match(lines[4]!, /"component":"request"/)
  } finally {
    mock.timers.reset()
  }
})
