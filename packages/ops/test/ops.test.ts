/**
 * @portico/ops: the log filter grammar, the admin guard's decisions, and the package's reason
 * to exist — importing it loads neither the proxy nor the engine barrel.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { isPorticoError } from '@portico/engine/errors'
import { Logs, checkAdminRequest, formatLogFilter, parseLogFilter, requestFacts } from '@portico/ops'

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
  assert.deepEqual(local.filter(p => !p.startsWith('packages/ops/')), ['packages/engine/src/util/errors.ts'])
})
