import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parse } from 'yaml'
import { backendsTable, formatConfigAll, formatLatency, modelsTable } from '../src/config/format.ts'
import { healthText } from '@portico/trace-view'
import type { ConfigDump } from '../src/config/dump.ts'
import { formatTable } from '../src/util/table.ts'

const dump: ConfigDump = {
  version: { version: '0.1.0' },
  routes: [
    {
      key: 'api', name: 'api', listener: 'default', hostnames: ['api.example.com'],
      matches: [{ path: { kind: 'prefix', value: '/api' }, method: 'GET', headers: [{ name: 'x', kind: 'exact', value: '1' }], query: [] }],
      policies: { requestHeaderModifier: { set: { a: 'b' } } },
      backends: [{ backend: 'http://127.0.0.1:8080', weight: 3 }, { backend: 'svc/apps/web:80', weight: 1 }]
    },
    { key: 'apps/hello', name: 'hello', namespace: 'apps', listener: 'default', hostnames: [], matches: [{ path: { kind: 'exact', value: '/hello' }, headers: [], query: [] }], policies: { directResponse: { status: 200 } }, backends: [] }
  ],
  backends: [
    { key: 'http://127.0.0.1:8080', kind: 'static', name: '127.0.0.1:8080', target: '127.0.0.1:8080', stats: { requests: 12, failures: 0, health: 1, latencyMs: 0.42 } },
    { key: 'svc/apps/web:80', kind: 'service', name: 'web', namespace: 'apps', target: 'web.apps:80', stats: { requests: 4, failures: 2, health: 0.5, latencyMs: null } },
    { key: 'http://127.0.0.1:9', kind: 'static', name: '127.0.0.1:9', target: '127.0.0.1:9', stats: { requests: 0, failures: 0, health: 1, latencyMs: null } },
    { key: 'bad', kind: 'invalid', name: 'bad', target: '', invalidReason: 'no such service' }
  ],
  policies: [
    { target: 'route/api', phase: 'route', policies: { requestHeaderModifier: { set: { a: 'b' } } } }
  ],
  listeners: [{ key: 'default' }]
}

test('health as a decimal (- before the first call), latency in ms', () => {
  assert.equal(healthText({ requests: 3, health: 1 }), '1.00')
  assert.equal(healthText({ requests: 2, health: 0.5 }), '0.50')
  assert.equal(healthText({ requests: 0, health: 1 }), '-')
  assert.equal(healthText(undefined), '-')
  assert.equal(formatLatency(0.42), '0.42ms')
  assert.equal(formatLatency(12.3456), '12.346ms')
  assert.equal(formatLatency(null), '-')
})

test('the backends table: TYPE NAME NAMESPACE ENDPOINT HEALTH REQUESTS LATENCY', () => {
  assert.equal(backendsTable(dump), [
    'TYPE      NAME             NAMESPACE   ENDPOINT          HEALTH   REQUESTS   LATENCY',
    'Backend   127.0.0.1:8080   -           127.0.0.1:8080    1.00     12         0.42ms',
    'Service   web              apps        web.apps:80       0.50     4          -',
    'Backend   127.0.0.1:9      -           127.0.0.1:9       -        0          -',
    // An invalid backend's ENDPOINT says why (as the web UI's Target does).
    'Invalid   bad              -           no such service   -        -          -',
    ''
  ].join('\n'))
})

test('on a terminal HEALTH is green, yellow or red by threshold; the columns stay aligned', () => {
  const colour = backendsTable(dump, { colour: true })
  assert.equal(colour.replace(/\x1b\[\d+m/g, ''), backendsTable(dump))
  const lines = colour.split('\n')
  assert.match(lines[1]!, /\x1b\[32m1\.00\x1b\[39m {5}12/, 'green, padding outside the colour')
  assert.match(lines[2]!, /\x1b\[31m0\.50\x1b\[39m/, 'red')
  assert.doesNotMatch(lines[3]!, /\x1b/, 'no colour before the first call')
  const one = (health: number) => backendsTable({ ...dump, backends: [{ key: 'k', kind: 'static', name: 'n', target: 't', stats: { requests: 10, failures: 1, health, latencyMs: 1 } }] }, { colour: true })
  assert.match(one(0.95), /\x1b\[32m0\.95/)
  assert.match(one(0.9), /\x1b\[33m0\.90/)
  assert.match(one(0.75), /\x1b\[33m0\.75/)
  assert.match(one(0.74), /\x1b\[31m0\.74/)
})

test('config all -o json and -o yaml: routes, backends and policies only', () => {
  const json = JSON.parse(formatConfigAll(dump, 'json')) as Record<string, unknown>
  assert.deepEqual(Object.keys(json), ['routes', 'backends', 'policies'])
  assert.deepEqual(json.routes, dump.routes)
  assert.deepEqual(parse(formatConfigAll(dump, 'yaml')), json)
})

test('config all -o short: three tables, backends by name', () => {
  const out = formatConfigAll(dump, 'short')
  const lines = out.split('\n')
  assert.equal(lines[0], 'ROUTES')
  assert.match(lines[1]!, /^NAME +NAMESPACE +LISTENER +HOSTNAMES +MATCHES +BACKENDS +POLICIES$/)
  assert.match(lines[2]!, /^api +- +default +api\.example\.com +GET prefix \/api \+1 header +127\.0\.0\.1:8080 \(weight 3\), apps\/web \(weight 1\) +requestHeaderModifier$/)
  assert.match(lines[3]!, /^hello +apps +default +\* +exact \/hello +- +directResponse$/)
  assert.ok(out.includes('\nBACKENDS\nTYPE      NAME'))
  assert.match(out, /\nPOLICIES\nTARGET +PHASE +POLICIES\nroute\/api +route +requestHeaderModifier\n$/)
})

test('tables pad with three spaces and trim trailing blanks', () => {
  assert.equal(formatTable(['A', 'BB'], [['xxx', ''], ['y', 'z']]), 'A     BB\nxxx\ny     z\n')
})

test('a TCP or TLS listener\'s route shows its kind instead of matches', () => {
  const out = formatConfigAll({ ...dump, routes: [{ key: 'tls:shop', name: 'shop', kind: 'tls', listener: 'edge', hostnames: ['shop.example.com'], matches: [], policies: {}, backends: [{ backend: 'tcp://10.0.0.5:443', weight: 1 }] }] }, 'short')
  assert.match(out, /shop\s+-\s+edge\s+shop\.example\.com\s+\(tls connections\)\s+tcp:\/\/10\.0\.0\.5:443/)
})

test('a policy a PorticoPolicy attached names it in the policies table', () => {
  const out = formatConfigAll({ ...dump, policies: [{ target: 'route/apps/mcp', phase: 'route', policies: { cors: {}, timeout: {} }, sources: { cors: 'PorticoPolicy apps/web-cors' } }] }, 'short')
  assert.match(out, /route\/apps\/mcp\s+route\s+cors\(PorticoPolicy apps\/web-cors\),timeout/)
})

test('an ai backend\'s failover groups: providers of a group by |, groups in priority order by >', () => {
  const backends = [
    { key: 'ai:llm/openai', kind: 'ai', name: 'llm/openai', target: 'api.openai.com:443', stats: { requests: 3, failures: 3, health: 0, latencyMs: 1 } },
    { key: 'ai:llm/azure', kind: 'ai', name: 'llm/azure', target: 'res.openai.azure.com:443', stats: { requests: 0, failures: 0, health: 1, latencyMs: null } },
    { key: 'ai:llm/claude', kind: 'ai', name: 'llm/claude', target: 'api.anthropic.com:443', stats: { requests: 3, failures: 0, health: 1, latencyMs: 2 } }
  ]
  const out = formatConfigAll({ ...dump, backends, routes: [{ key: 'chat', name: 'chat', listener: 'default', hostnames: [], matches: [{ path: { kind: 'prefix', value: '/llm' }, headers: [], query: [] }], policies: {}, backends: [{ backend: 'ai:llm/openai', weight: 1, failover: [[{ backend: 'ai:llm/openai' }, { backend: 'ai:llm/azure' }], [{ backend: 'ai:llm/claude' }]] }] }] }, 'short')
  assert.match(out, /chat\s+-\s+default\s+\*\s+prefix \/llm\s+llm\/openai\|llm\/azure > llm\/claude\s+-/)
})

test('proxy config models: one row per model and route; virtual models say how they choose; targets marked', () => {
  const models: ConfigDump = {
    backends: [{ key: 'ai:model:gpt-4o', kind: 'ai', name: 'model:gpt-4o', target: 'api.openai.com:443' }],
    models: [
      { listener: 'default', route: 'models:default', name: 'gpt-4o', match: 'gpt-4o', visibility: 'Public', attached: true, kind: 'concrete', backend: 'ai:model:gpt-4o' },
      { listener: 'default', route: 'models:default', name: 'mix', match: 'mix', visibility: 'Public', attached: true, kind: 'virtual', virtual: { kind: 'weighted', targets: [{ model: 'gpt-4o', weight: 1 }, { model: 'local', weight: 3 }] } },
      { listener: 'default', route: 'models:default', name: 'safe', match: 'safe', visibility: 'Public', attached: true, kind: 'virtual', virtual: { kind: 'failover', groups: [['a', 'b'], ['c']] } },
      { listener: 'default', route: 'models:default', name: 'router', match: 'router', visibility: 'Public', attached: true, kind: 'virtual', virtual: { kind: 'conditional', rules: [{ when: 'jwt.tier == "premium"', model: 'gpt-4o' }], fallback: 'local' } },
      { listener: 'default', route: 'models:default', name: 'local', match: 'local', visibility: 'Internal', attached: false, kind: 'concrete', backend: 'ai:model:local' }
    ]
  }
  assert.equal(modelsTable(models), formatTable(['NAME', 'MATCH', 'VISIBILITY', 'SERVES', 'LISTENER', 'ROUTE'], [
    ['gpt-4o', 'gpt-4o', 'Public', 'model:gpt-4o', 'default', 'models:default'],
    ['mix', 'mix', 'Public', 'weighted gpt-4o=1 local=3', 'default', 'models:default'],
    ['safe', 'safe', 'Public', 'failover a|b > c', 'default', 'models:default'],
    ['router', 'router', 'Public', 'conditional gpt-4o; else local', 'default', 'models:default'],
    ['local', 'local (target)', 'Internal', 'ai:model:local', 'default', 'models:default']
  ]))
  assert.match(formatConfigAll({ ...models, routes: [{ key: 'models:default', name: 'models:default', listener: 'default', matches: [{ path: { kind: 'prefix', value: '/' } }], backends: [], models: models.models }] }, 'short'), /MODELS\n.*NAME +MATCH/s)
  assert.match(formatConfigAll({ ...models, routes: [{ key: 'models:default', name: 'models:default', listener: 'default', matches: [{ path: { kind: 'prefix', value: '/' } }], backends: [], models: models.models }] }, 'short'), /\(models: gpt-4o, mix, safe, router\)/)
})

test('an InferencePool backend: TYPE InferencePool, ENDPOINT its picker and how many endpoints it picks among', () => {
  const pool = { key: 'inferencepool://llama@10.0.0.20:9002/…', kind: 'static', name: 'llama', target: 'llama', endpoints: [{ host: '10.0.0.11', port: 8000 }, { host: '10.0.0.12', port: 8000 }], inferencePool: { name: 'llama', picker: { target: '10.0.0.20:9002' } } }
  assert.equal(backendsTable({ ...dump, backends: [pool] }).split('\n')[1], 'InferencePool   llama   -           picker 10.0.0.20:9002, 2 endpoints   -        -          -')
})
