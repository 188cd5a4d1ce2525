/**
 * ir/validate.ts: the semantic checks Engine.apply runs on every IR, whatever produced it.
 * The YAML front end refuses these values with positioned errors; an IR built another way
 * (the controller's translation, an xDS push) must be refused too, not served half-applied.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { goldenCases } from '../../../scripts/lib/golden.ts'
import { Engine } from '../src/engine/engine.ts'
import { validateIR, formatIrDiagnostic } from '../src/ir/validate.ts'
import { loadConfigText } from '../src/config/load.ts'
import { isPorticoError } from '../src/util/errors.ts'
import type { ProxyIR } from '../src/ir/types.ts'
import type { PolicySetIR } from '../src/ir/policy.ts'

function yamlIR (routes: string): ProxyIR {
  const result = loadConfigText(`gateways: {default: {port: 3000}}\nroutes:\n${routes}`, { baseDir: '/' })
  assert.ok(result.ok, JSON.stringify(!result.ok && result.diagnostics))
  return result.config.ir
}

const ROUTE = '  - {name: app, matches: [{path: {pathPrefix: /}}], policies: {directResponse: {status: 200, body: hi}}}\n'

/** The IR the YAML path builds, with the route's policies replaced (as another source could send them). */
function withRoutePolicies (policies: PolicySetIR): ProxyIR {
  const ir = yamlIR(ROUTE)
  ir.binds[0]!.listeners[0]!.routes[0]!.policies = policies
  return ir
}

const CORS = { allowOrigins: ['https://app.example.com'], allowMethods: ['GET'], allowHeaders: ['x-a'], exposeHeaders: [], allowCredentials: false }

test('validateIR: what the YAML front end produces passes (golden IRs included)', () => {
  assert.deepEqual(validateIR(yamlIR(ROUTE)), [])
  const files = goldenCases(new URL('./golden/config/', import.meta.url).pathname, { input: '.yaml', outputs: ['.ir.json'] })
    .map(c => c.outputs[0]!).filter(f => existsSync(f))
  assert.ok(files.length > 0)
  for (const f of files) assert.deepEqual(validateIR(JSON.parse(readFileSync(f, 'utf8')) as ProxyIR), [], f)
})

test('validateIR: what the controller translates passes (its golden IRs)', () => {
  const cases = goldenCases(new URL('../../controller/test/golden/', import.meta.url).pathname, { input: '.yaml', outputs: ['.out.json'] })
  const irs: ProxyIR[] = []
  const collect = (v: unknown): void => {
    if (v === null || typeof v !== 'object') return
    if (Array.isArray((v as ProxyIR).binds) && Array.isArray((v as ProxyIR).backends)) irs.push(v as ProxyIR)
    else for (const child of Object.values(v)) collect(child)
  }
  for (const c of cases) collect(JSON.parse(readFileSync(c.outputs[0]!, 'utf8')))
  assert.ok(irs.length > 0)
  for (const ir of irs) assert.deepEqual(validateIR(ir), [], ir.version)
})

test('validateIR: an unparsable CORS origin is refused at its IR path', () => {
  const ir = withRoutePolicies({ cors: { ...CORS, allowOrigins: ['https://ok.example.com', 'example.com', 'ftp://x.example.com'] } })
  assert.deepEqual(validateIR(ir).map(formatIrDiagnostic), [
    'binds[0].listeners[0].routes[0].policies.cors.allowOrigins[1]: "example.com" is not an origin (scheme://host[:port], or *)',
    'binds[0].listeners[0].routes[0].policies.cors.allowOrigins[2]: "ftp://x.example.com": the scheme must be http or https'
  ])
})

test('validateIR: header names and values HTTP cannot carry, regexes RE2 cannot run, negative durations', () => {
  const ir = withRoutePolicies({
    responseHeaderModifier: { set: { 'x-ok': 'v', 'x-bad': 'a\r\nset-cookie: evil=1' }, remove: ['bad name'] },
    requestHeaderModifier: { add: { 'x:colon': 'v' } },
    csrf: { additionalOrigins: ['not an origin'] }
  })
  const route = ir.binds[0]!.listeners[0]!.routes[0]!
  route.matches[0]!.path = { kind: 'regex', value: '(a)\\1' }
  route.matches[0]!.headers.push({ name: 'x-v', kind: 'regex', value: '(?=x)' })
  route.timeouts = { requestMs: -1 }
  route.retry = { attempts: 1.5, codes: [503], backoffMs: 10 }
  const paths = validateIR(ir).map(d => d.path.join('.'))
  assert.deepEqual(paths, [
    'binds.0.listeners.0.routes.0.matches.0.path.value',
    'binds.0.listeners.0.routes.0.matches.0.headers.0.value',
    'binds.0.listeners.0.routes.0.policies.requestHeaderModifier.add.x:colon',
    'binds.0.listeners.0.routes.0.policies.responseHeaderModifier.set.x-bad',
    'binds.0.listeners.0.routes.0.policies.responseHeaderModifier.remove.0',
    'binds.0.listeners.0.routes.0.policies.csrf.additionalOrigins.0',
    'binds.0.listeners.0.routes.0.timeouts.requestMs',
    'binds.0.listeners.0.routes.0.retry.attempts'
  ])
})

test('Engine.apply refuses an IR with a bad CORS origin (as the controller could send it) and keeps the config in force', async (t) => {
  const engine = new Engine({ tracing: false })
  t.after(() => engine.close())
  const good = yamlIR(ROUTE)
  engine.apply(good)
  const bad = withRoutePolicies({ cors: { ...CORS, allowOrigins: ['example.com'] } })
  bad.version = 'from-controller'
  assert.throws(() => engine.apply(bad), (err: unknown) => {
    assert.ok(isPorticoError(err, 'PORTICO_INVALID_IR'))
    assert.equal(err.message, 'config from-controller rejected: binds[0].listeners[0].routes[0].policies.cors.allowOrigins[0]: "example.com" is not an origin (scheme://host[:port], or *)')
    return true
  })
  assert.equal(engine.config?.ir.version, good.version, 'the last good config stays')
})

test('validateIR: timers Node cannot run are refused, from any source; --validate agrees with start', () => {
  const ir = yamlIR(ROUTE)
  ir.binds[0]!.listeners[0]!.routes[0]!.timeouts = { requestMs: 3_600_000_000 }
  assert.deepEqual(validateIR(ir).map(d => d.path.join('.')), ['binds.0.listeners.0.routes.0.timeouts.requestMs'])
  const yaml = loadConfigText('gateways: {default: {port: 3000}}\nroutes:\n  - {name: app, policies: {timeout: {requestTimeout: 1000h}}, backends: [{host: "127.0.0.1:1"}]}\n', { baseDir: '/' })
  assert.equal(yaml.ok, false)
  // From YAML the error names the user's field at its position, not the IR path (issue 49).
  const d = !yaml.ok ? yaml.diagnostics[0]! : undefined
  assert.deepEqual(d && { path: d.path.join('.'), line: d.line, col: d.col }, { path: 'routes.0.policies.timeout.requestTimeout', line: 3, col: 38 })
  assert.match(d?.message ?? '', /must be between 0ms and 596h/)
})

test('validateIR: an extProc response body mode where the answers are MCP is refused (listener, route, backend reference)', () => {
  const ir = yamlIR('  - name: tools\n    backends: [{mcp: {targets: [{name: a, mcp: {host: "http://127.0.0.1:9001/mcp"}}]}}]\n  - {name: app, matches: [{path: {pathPrefix: /app}}], backends: [{host: "127.0.0.1:9002"}]}\n')
  assert.deepEqual(validateIR(ir), [])
  const buffered = { extProc: { host: 'http://127.0.0.1:9000', failureMode: 'failClosed' as const, messageTimeoutMs: 1000, maxBodyBytes: 1024, processingMode: { requestHeaderMode: 'send' as const, responseHeaderMode: 'send' as const, requestBodyMode: 'none' as const, responseBodyMode: 'buffered' as const } } }
  const listener = ir.binds[0]!.listeners[0]!
  const mcp = listener.routes.findIndex(r => r.name === 'tools')
  const app = listener.routes.findIndex(r => r.name === 'app')
  listener.policies = buffered
  listener.routes[mcp]!.policies = buffered
  listener.routes[mcp]!.backends[0]!.policies = buffered
  listener.routes[app]!.policies = buffered
  const why = 'extProc responseBodyMode buffered cannot apply to MCP answers (they may be SSE streams that are never whole)'
  assert.deepEqual(validateIR(ir).map(formatIrDiagnostic).sort(), [
    `binds[0].listeners[0].policies.extProc: ${why}`,
    `binds[0].listeners[0].routes[${mcp}].backends[0].policies.extProc: ${why}`,
    `binds[0].listeners[0].routes[${mcp}].policies.extProc: ${why}`
  ].sort())
})

test('validateIR: a listener with more than 16 filters (Gateway API ListenerFilters.requests MaxItems) is refused', () => {
  const ir = yamlIR(ROUTE)
  const filter = { extAuthz: { host: 'http://127.0.0.1:9000', protocol: { grpc: {} }, failureMode: 'deny' as const, timeoutMs: 1000, includeRequestHeaders: null, includeRequestBody: null, contextExtensions: {} } }
  ir.binds[0]!.listeners[0]!.filters = { requests: Array.from({ length: 16 }, () => filter) }
  assert.deepEqual(validateIR(ir), [])
  ir.binds[0]!.listeners[0]!.filters = { requests: Array.from({ length: 17 }, () => filter) }
  assert.deepEqual(validateIR(ir).map(d => formatIrDiagnostic(d)), ['binds[0].listeners[0].filters.requests: at most 16 listener filters (Gateway API ListenerFilters.requests)'])
})
