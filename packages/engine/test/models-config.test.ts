/**
 * The model API's `models:` at load (config/models-to-ir.ts) and its selection ranking
 * (llm/model-match.ts): what is refused, with the file position and the field, and which
 * model serves a requested name. SSRF refusals (util/ssrf.ts) of every IPv4 spelling.
 */

import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, type LoadOptions } from '../src/config/load.ts'
import { formatDiagnostic } from '../src/config/diagnostics.ts'
import { ModelMatcher, matchProblem, tiesWith } from '../src/llm/model-match.ts'
import { ssrfRefusal } from '../src/util/ssrf.ts'
import type { ModelIR, ProxyIR } from '../src/ir/types.ts'

const HEAD = 'gateways:\n  default: {port: 8080}\n  other: {port: 8081}\nmodels:\n'

function errors (yaml: string, options: Partial<LoadOptions> = {}): string[] {
  const r = loadConfigText(yaml, { baseDir: '/tmp', ...options })
  return r.ok ? [] : r.diagnostics.map(d => formatDiagnostic('portico.yaml', d))
}

function load (yaml: string): ProxyIR {
  const r = loadConfigText(yaml, { baseDir: '/tmp' })
  assert.ok(r.ok, r.ok ? '' : r.diagnostics.map(d => formatDiagnostic('portico.yaml', d)).join('\n'))
  return r.config.ir
}

function routeModels (ir: ProxyIR, routeKey: string): ModelIR[] {
  for (const b of ir.binds) for (const l of b.listeners) for (const r of l.routes) if (r.key === routeKey) return r.models ?? []
  return []
}

describe('model patterns and selection', () => {
  test('only *, x-* and *-x are wildcards', () => {
    for (const ok of ['*', 'gpt-*', '*-latest', 'gpt-4o', 'anthropic.claude-v2:1']) assert.equal(matchProblem(ok), null, ok)
    for (const bad of ['a*b', '**', 'g*pt*', '*a*']) assert.match(matchProblem(bad)!, /a wildcard is \* alone, a prefix \(x-\*\) or a suffix \(\*-x\)/, bad)
  })

  test('exact beats wildcards, the longer literal part wins, * is last', () => {
    const m = new ModelMatcher([
      { pattern: '*', item: 'any' },
      { pattern: 'gpt-*', item: 'gpt' },
      { pattern: 'gpt-4o-*', item: 'gpt-4o family' },
      { pattern: '*-latest', item: 'latest' },
      { pattern: 'gpt-4o', item: 'exact' }
    ])
    assert.equal(m.select('gpt-4o'), 'exact')
    assert.equal(m.select('gpt-4o-mini'), 'gpt-4o family')
    assert.equal(m.select('gpt-3.5'), 'gpt')
    // gpt-* (4 characters) against *-latest (7): the longer literal part wins.
    assert.equal(m.select('gpt-latest'), 'latest')
    assert.equal(m.select('claude'), 'any')
    assert.equal(new ModelMatcher([{ pattern: 'a', item: 1 }]).select('b'), null)
  })

  test('ties: equal patterns, and a prefix and a suffix of one length; disjoint prefixes do not tie', () => {
    assert.equal(tiesWith('gpt-*', 'gpt-*'), true)
    assert.equal(tiesWith('abc*', '*xyz'), true)
    assert.equal(tiesWith('*', '*'), true)
    assert.equal(tiesWith('gpt4*', 'gpt5*'), false)
    assert.equal(tiesWith('gpt-*', '*-latest'), false)
    assert.equal(tiesWith('a', 'b'), false)
  })
})

describe('models: config → IR', () => {
  test('concrete models are ai backends on the gateway\'s models route; virtual models and their internal targets are in the table', () => {
    const ir = load(`${HEAD}  - name: gpt-4o
    provider: {openAI: {}}
    baseURL: http://api.example.test:8443/custom/v1
  - name: hidden
    visibility: Internal
    provider: {anthropic: {model: claude-haiku-4-5}}
  - name: smart
    virtualModel: {weighted: [{model: gpt-4o, weight: 1}, {model: hidden, weight: 3}]}
`)
    const models = routeModels(ir, 'models:default')
    assert.deepEqual(models.map(m => [m.name, m.attached, m.visibility]), [['gpt-4o', true, 'Public'], ['smart', true, 'Public'], ['hidden', false, 'Internal']])
    const backend = ir.backends.find(b => b.key === models[0]!.backend!.backend)!
    assert.equal(backend.kind, 'ai')
    assert.equal(backend.target, 'api.example.test:8443')
    // The base URL's path is the provider's base path; the exact match the model sent.
    assert.equal(backend.ai!.pathPrefix, '/custom/v1')
    assert.equal(backend.ai!.model, 'gpt-4o')
    assert.equal(ir.backends.find(b => b.key === models[2]!.backend!.backend)!.ai!.model, 'claude-haiku-4-5')
  })

  test('a route parent: the route serves the models; one with backends is refused', () => {
    const ir = load(`gateways:
  default: {port: 8080}
routes:
  - name: llm
    matches: [{path: {pathPrefix: /llm}}]
models:
  - name: m
    parentRefs: [{kind: HTTPRoute, name: llm}]
    provider: {openAI: {}}
`)
    assert.deepEqual(routeModels(ir, 'llm').map(m => m.name), ['m'])
    assert.deepEqual(errors(`gateways:
  default: {port: 8080}
routes:
  - name: web
    backends: [{host: 127.0.0.1:1}]
models:
  - name: m
    parentRefs: [{kind: HTTPRoute, name: web}, {kind: HTTPRoute, name: nope}, {kind: ListenerSet, name: x}, {name: default, sectionName: http}]
    provider: {openAI: {}}
`), [
      'portico.yaml:8:36: models[0].parentRefs[0].name: route "web" has backends: a route models attach to has none (its requests go to the models)',
      'portico.yaml:8:66: models[0].parentRefs[1].name: no route named "nope"',
      'portico.yaml:8:80: models[0].parentRefs[2].kind: ListenerSet parents exist in cluster mode only',
      'portico.yaml:8:125: models[0].parentRefs[3].sectionName: applies in cluster mode (in the file a gateway is one listener and a route one rule)'
    ])
  })

  test('exactly one of provider or virtualModel; virtual models are public and carry no policies', () => {
    assert.deepEqual(errors(`${HEAD}  - name: neither
  - name: both
    provider: {openAI: {}}
    virtualModel: {weighted: [{model: neither, weight: 1}]}
  - name: v
    visibility: Internal
    baseURL: https://x.test
    policies: {backendAuth: {key: sk-test-portico}}
    virtualModel: {weighted: [{model: c, weight: 0}]}
  - name: c
    provider: {openAI: {}}
`), [
      'portico.yaml:5:5: models[0]: needs exactly one of provider (a concrete model) or virtualModel',
      'portico.yaml:6:5: models[1]: needs exactly one of provider (a concrete model) or virtualModel',
      'portico.yaml:10:5: models[2].visibility: a virtual model is Public (internal models are reached through one)',
      'portico.yaml:11:5: models[2].baseURL: applies to concrete models (with provider), not to a virtual model',
      'portico.yaml:12:5: models[2].policies: a virtual model carries no policies: set them on its concrete models',
      'portico.yaml:13:20: models[2].virtualModel.weighted: needs a target with a weight above 0'
    ])
  })

  test('wildcards, ties on one parent (not across parents), a model name of 100 KB', () => {
    assert.deepEqual(errors(`${HEAD}  - name: a
    match: {model: "g*t"}
    provider: {openAI: {}}
  - name: b
    match: {model: "abc*"}
    provider: {openAI: {}}
  - name: c
    match: {model: "*xyz"}
    provider: {openAI: {}}
  - name: d
    match: {model: "*xyz"}
    parentRefs: [{name: other}]
    provider: {openAI: {}}
`), [
      // The schema's pattern says which forms there are; the position is the field's.
      'portico.yaml:6:13: models[0].match.model: invalid value "g*t": The model clients ask for: exact (gpt-4o), a prefix (gpt-*), a suffix (*-latest) or * (any). Exact beats prefix and suffix (the longer literal part first) beats *.',
    ])
    assert.deepEqual(errors(`${HEAD}  - name: b
    match: {model: "abc*"}
    provider: {openAI: {}}
  - name: c
    match: {model: "*xyz"}
    provider: {openAI: {}}
  - name: d
    match: {model: "*xyz"}
    parentRefs: [{name: other}]
    provider: {openAI: {}}
`), ['portico.yaml:9:13: models[1].match.model: "*xyz" ties with model "b" ("abc*") on gateway "default": equally specific patterns that can match the same model'])
    const huge = 'm'.repeat(100 * 1024)
    const started = Date.now()
    const out = errors(`${HEAD}  - name: ${huge}\n    provider: {openAI: {}}\n`)
    assert.equal(out.length, 1)
    assert.match(out[0]!, /^portico\.yaml:5:5: models\[0\]\.name: must NOT have more than 253 characters$/)
    assert.ok(out[0]!.length < 1000, 'the error does not repeat the name')
    assert.ok(Date.now() - started < 2000)
  })

  test('targets exist, failover lists concrete models, cycles are reported with their path', () => {
    assert.deepEqual(errors(`${HEAD}  - name: a
    virtualModel: {weighted: [{model: b, weight: 1}]}
  - name: b
    virtualModel: {conditional: {rules: [{when: 'request.headers["x"] == "1"', model: c}], fallback: a}}
  - name: c
    virtualModel: {failover: {groups: [{models: [a]}, {models: [nope]}]}}
  - name: w
    match: {model: "w-*"}
    provider: {openAI: {}}
  - name: x
    virtualModel: {weighted: [{model: w, weight: 1}]}
`), [
      'portico.yaml:8:92: models[1].virtualModel.conditional.fallback: virtual models form a cycle: a → b → a',
      'portico.yaml:10:50: models[2].virtualModel.failover.groups[0].models[0]: "a" is a virtual model: failover groups list concrete models',
      'portico.yaml:10:50: models[2].virtualModel.failover.groups[0].models[0]: virtual models form a cycle: a → b → c → a',
      'portico.yaml:10:65: models[2].virtualModel.failover.groups[1].models[0]: no model named "nope" (models: a, b, c, w, x)',
      'portico.yaml:15:32: models[4].virtualModel.weighted[0].model: "w" matches "w-*": as a virtual model\'s target it needs provider.<name>.model (which model to ask the provider for)'
    ])
  })

  test('conditional rules are CEL checked at load', () => {
    assert.deepEqual(errors(`${HEAD}  - name: c
    provider: {openAI: {}}
  - name: r
    virtualModel: {conditional: {rules: [{when: 'llm.request.messageCount >', model: c}, {when: 'nope == 1', model: c}], fallback: c}}
`).map(e => e.replace(/: invalid CEL expression.*$/, ': invalid CEL')), [
      'portico.yaml:8:43: models[1].virtualModel.conditional.rules[0].when: invalid CEL',
      'portico.yaml:8:91: models[1].virtualModel.conditional.rules[1].when: invalid CEL'
    ])
  })

  test('transformations: CEL checked at load, prototype keys refused; the IR carries them on the model\'s backend', () => {
    assert.deepEqual(errors(`${HEAD}  - name: m
    provider: {openAI: {}}
    policies:
      transformations:
        request:
          beforeConversion: {set: {max_tokens: 'nope +', __proto__.x: '1'}, remove: [constructor]}
`).map(e => e.replace(/: invalid CEL expression.*$/, ': invalid CEL')), [
      'portico.yaml:10:36: models[0].policies.transformations.request.beforeConversion.set.max_tokens: invalid CEL',
      'portico.yaml:10:58: models[0].policies.transformations.request.beforeConversion.set["__proto__.x"]: names a field no body edit may write (__proto__, constructor, prototype)',
      'portico.yaml:10:86: models[0].policies.transformations.request.beforeConversion.remove[0]: names a field no body edit may write (__proto__, constructor, prototype)'
    ])
    const ir = load(`${HEAD}  - name: m
    provider: {openAI: {}}
    policies:
      transformations:
        request:
          afterConversion: {set: {metadata.user: 'jwt.sub'}, remove: [temperature]}
`)
    const ref = routeModels(ir, 'models:default')[0]!.backend!
    assert.deepEqual(ir.backends.find(b => b.key === ref.backend)!.ai!.transformations, { afterConversion: { set: [{ field: 'metadata.user', expression: 'jwt.sub' }], remove: ['temperature'] } })
  })

  test('baseURL: absolute http(s) with a host; SSRF addresses refused only with refuseLocalBaseURL', () => {
    const yaml = (url: string) => `${HEAD}  - name: m\n    provider: {openAI: {}}\n    baseURL: "${url}"\n`
    assert.equal(errors(yaml('ftp://x.test')).length, 1)
    assert.match(errors(yaml('http://user:pw@x.test'))[0]!, /models\[0\]\.baseURL: /)
    assert.deepEqual(errors(yaml('http://169.254.169.254')), [], 'standalone: a local model is fine')
    for (const url of ['http://169.254.169.254', 'http://[::1]', 'http://localhost.', 'http://127.1', 'http://2130706433', 'http://0x7f000001', 'http://0xa9.0xfe.0xa9.0xfe', 'http://[::ffff:127.0.0.1]:8080', 'http://metadata.google.internal/v1']) {
      const out = errors(yaml(url), { refuseLocalBaseURL: true })
      assert.equal(out.length, 1, url)
      assert.match(out[0]!, /^portico\.yaml:7:5: models\[0\]\.baseURL: points at .*: refused in cluster mode$/, url)
    }
    assert.deepEqual(errors(yaml('http://10.0.0.7:8080/v1'), { refuseLocalBaseURL: true }), [], 'a model in the cluster network is fine')
  })
})

describe('ssrfRefusal', () => {
  test('loopback, link-local, metadata and unspecified addresses in every spelling; others pass', () => {
    for (const url of ['http://169.254.169.254', 'http://[::1]', 'http://localhost.', 'http://LOCALHOST', 'http://127.1', 'http://127.0.0.1.', 'http://2130706433', 'http://0x7f.1', 'http://0177.0.0.1', 'http://2852039166', 'http://[fe80::1]', 'http://[fd00:ec2::254]', 'http://[::ffff:169.254.169.254]', 'http://0', 'http://[::]', 'http://a.localhost']) {
      assert.notEqual(ssrfRefusal(url), null, url)
    }
    for (const url of ['https://api.openai.com', 'http://10.1.2.3:8000', 'http://[2001:db8::1]', 'http://ollama.default.svc.cluster.local:11434']) {
      assert.equal(ssrfRefusal(url), null, url)
    }
  })
})

describe('docs/models.md', () => {
  test('the worked example and the file form load', async () => {
    const { readFileSync } = await import('node:fs')
    const text = readFileSync(new URL('../../../docs/models.md', import.meta.url), 'utf8')
    const blocks = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map(m => m[1]!).filter(b => b.startsWith('gateways:'))
    // Every whole config of the page (e2e/test/docs-yaml.test.ts runs them through the
    // binary too); the worked example is the one with four models or more.
    assert.ok(blocks.length >= 2)
    let largest = 0
    for (const yaml of blocks) {
      const r = loadConfigText(yaml, { baseDir: '/tmp', readFile: () => 'sk-test-portico' })
      assert.ok(r.ok, r.ok ? '' : r.diagnostics.map(d => formatDiagnostic('models.md', d)).join('\n'))
      largest = Math.max(largest, routeModels(r.config.ir, 'models:default').length)
    }
    assert.ok(largest >= 4)
  })
})
