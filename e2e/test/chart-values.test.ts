/**
 * The chart's values, without helm: every key of the seed's "Control-plane chart values" table
 * (e2e/fixtures/seed-chart-values.json) is in values.yaml with that type and default; every
 * key is documented and covered by values.schema.json; the README's values table is what
 * scripts/chart-docs.ts generates; the Grafana dashboard is valid and queries only metrics
 * the proxy and the controller really export (promtool parses every query), and every metric
 * the proxy exports is in docs/observability.md's table and on a panel.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { KubeConfig } from '@kubernetes/client-node'
import { parse } from 'yaml'
import { parseValuesDocs, undocumentedKeys, inferType, renderValuesTable, withValuesTable } from '../lib/chart-docs.ts'
import { CHART_DIR, REPO_ROOT, run } from '../lib/chart.ts'
import { requireTool } from '@portico/testkit/tools'
import { renderReadme, README_PATH, staleness } from '../../scripts/chart-docs.ts'
import { ProxyMetrics } from '@portico/proxy/metrics'
import { Controller } from '@portico/controller/controller'
import { resolveControllerSettings } from '@portico/controller/settings'

interface SeedKey {
  key: string
  type: string
  default: { value?: unknown, seeSubKeys?: true, nonEmptyString?: true }
  substitution?: string
}

const valuesText = readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')
const values = parse(valuesText) as Record<string, unknown>
const docs = parseValuesDocs(valuesText)
const docByKey = new Map(docs.map(d => [d.key, d]))
const seed = JSON.parse(readFileSync(join(REPO_ROOT, 'e2e/fixtures/seed-chart-values.json'), 'utf8')) as { keys: SeedKey[] }
const schema = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as Schema

interface Schema {
  type?: string | string[]
  properties?: Record<string, Schema>
  additionalProperties?: boolean | Schema
  enum?: unknown[]
}

function valueAt (path: string): { found: boolean, value: unknown } {
  let cur: unknown = values
  for (const segment of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, segment)) return { found: false, value: undefined }
    cur = (cur as Record<string, unknown>)[segment]
  }
  return { found: true, value: cur }
}

test('every key of the seed table is in values.yaml with its type and default', () => {
  assert.equal(seed.keys.length, 90, 'the fixture holds the seed table\'s 90 rows')
  const problems: string[] = []
  for (const s of seed.keys) {
    const { found, value } = valueAt(s.key)
    if (!found) {
      problems.push(`${s.key}: missing`)
      continue
    }
    const doc = docByKey.get(s.key)
    if (doc === undefined) problems.push(`${s.key}: no "# --" comment`)
    else if (doc.type !== s.type) problems.push(`${s.key}: documented type ${doc.type}, the seed says ${s.type}`)
    // The value itself has that type (null-default keys are documented `(string)`, as helm-docs infers).
    if (value !== null && inferType(value) !== s.type) problems.push(`${s.key}: value ${JSON.stringify(value)} is a ${inferType(value)}, the seed says ${s.type}`)
    if (s.default.seeSubKeys === true) {
      if (inferType(value) !== 'object') problems.push(`${s.key}: should be an object with sub-keys`)
    } else if (s.default.nonEmptyString === true) {
      if (typeof value !== 'string' || value === '') problems.push(`${s.key}: should be a non-empty string, is ${JSON.stringify(value)}`)
    } else {
      try {
        assert.deepStrictEqual(value, s.default.value)
      } catch {
        problems.push(`${s.key}: default ${JSON.stringify(value)}, the seed says ${JSON.stringify(s.default.value)}${s.substitution !== undefined ? ` (${s.substitution})` : ''}`)
      }
    }
  }
  assert.deepEqual(problems, [])
})

test('the seed\'s neutral word is replaced by the product\'s names', () => {
  assert.equal(valueAt('controller.image.repository').value, 'controller')
  assert.equal(valueAt('proxy.image.repository').value, 'portico')
  assert.deepEqual(valueAt('monitoring.proxy.gatewayClassNames').value, ['portico'])
  assert.equal(valueAt('gatewayClassName').value, 'portico')
  assert.match(String(valueAt('image.registry').value), /^[a-z0-9.-]+\.[a-z]+(\/[a-z0-9._-]+)*$/)
})

test('every key of values.yaml has a "# --" comment', () => {
  assert.deepEqual(undocumentedKeys(valuesText, docs), [])
  for (const d of docs) assert.ok(d.description.length > 3, `${d.key}: description`)
})

test('values.schema.json covers every documented key, and its types agree', () => {
  const problems: string[] = []
  for (const d of docs) {
    let node: Schema | undefined = schema
    for (const segment of d.key.split('.')) {
      const next: Schema | undefined = node?.properties?.[segment] ?? (typeof node?.additionalProperties === 'object' ? node.additionalProperties : undefined)
      node = next
    }
    if (node === undefined) {
      problems.push(`${d.key}: not in the schema`)
      continue
    }
    const types = node.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type]
    const expected = { bool: 'boolean', int: 'integer', float: 'number', string: 'string', list: 'array', object: 'object' }[d.type]
    if (expected === undefined) problems.push(`${d.key}: unknown documented type ${d.type}`)
    else if (!types.includes(expected)) problems.push(`${d.key}: schema type ${JSON.stringify(node.type)}, documented ${d.type}`)
    if (node.enum !== undefined && !node.enum.some(v => JSON.stringify(v) === JSON.stringify(d.value))) problems.push(`${d.key}: default ${JSON.stringify(d.value)} is not in the schema's enum`)
  }
  assert.deepEqual(problems, [])
  assert.equal(schema.additionalProperties, false, 'unknown top-level keys are rejected')
  assert.deepEqual(schema.properties?.controller?.properties?.xds?.properties?.mode?.enum, ['plaintext', 'tls', 'either'])
})

test('the README\'s values table is generated from values.yaml and current', async () => {
  const { text, undocumented } = renderReadme()
  assert.deepEqual(undocumented, [])
  assert.equal(readFileSync(README_PATH, 'utf8'), text, 'charts/portico/README.md is stale: run node scripts/chart-docs.ts')
  // The script's own --check agrees.
  const r = await run(process.execPath, [join(REPO_ROOT, 'scripts/chart-docs.ts'), '--check'])
  assert.equal(r.code, 0, r.stderr)
  for (const s of seed.keys) assert.ok(text.includes(`| \`${s.key}\` | ${s.type} |`), `README row for ${s.key}`)
})

test('a stale README is reported with its first differing line', () => {
  const readme = readFileSync(README_PATH, 'utf8')
  // A values.yaml edit (a description changed) that was not regenerated.
  const edited = docs.map(d => d.key === 'affinity' ? { ...d, description: 'Changed.' } : d)
  const generated = withValuesTable(readme, renderValuesTable(edited))
  assert.equal(staleness(readme, readme), null)
  const message = staleness(readme, generated)
  assert.ok(message !== null)
  assert.match(message, /out of date \(first difference at line \d+\)/)
  assert.match(message, /README: {4}\| `affinity` \| object \| `\{\}` \| Pod scheduling affinity rules\. \|/)
  assert.match(message, /generated: \| `affinity` \| object \| `\{\}` \| Changed\. \|/)
  assert.throws(() => withValuesTable('no markers', ''), /markers/)
})

test('the vendored InferencePool CRD is the Inference Extension v1.6.2 module\'s file, under its header', (t) => {
  const vendored = readFileSync(join(CHART_DIR, 'files/inference.networking.k8s.io_inferencepools.yaml'), 'utf8')
  // The header names its source, version and licence; below it, the module's bytes.
  const header = vendored.slice(0, vendored.indexOf('\napiVersion:') + 1)
  assert.match(header, /gateway-api-inference-extension v1\.6\.2/)
  assert.match(header, /config\/crd\/bases\/inference\.networking\.k8s\.io_inferencepools\.yaml/)
  assert.match(header, /Apache License 2\.0/)
  assert.ok(header.split('\n').filter(l => l !== '').every(l => l.startsWith('#')), 'the header is comments only')
  assert.equal(parse(vendored).metadata.annotations['inference.networking.k8s.io/bundle-version'], 'v1.6.2')
  // scripts/test-tools' copy of the module's config/crd/bases (lwepp-v1.6.2/crds), when built.
  const dir = process.env.INFERENCE_EXTENSION_CRDS ?? ''
  const moduleFile = join(dir, 'inference.networking.k8s.io_inferencepools.yaml')
  if (dir === '' || !existsSync(moduleFile)) {
    const why = `the module's CRD is not cached (INFERENCE_EXTENSION_CRDS=${JSON.stringify(dir)}): run ./scripts/test-tools and export the lines it prints`
    if (process.env.CI === 'true') throw new Error(why)
    t.skip(why)
    return
  }
  assert.ok(dir.includes('v1.6.2'), `INFERENCE_EXTENSION_CRDS is the v1.6.2 build (${dir})`)
  assert.equal(vendored.slice(header.length), readFileSync(moduleFile, 'utf8'), 'charts/portico/files/inference.networking.k8s.io_inferencepools.yaml differs from the module\'s: copy it again below the header')
})

// ---------------------------------------------------------------------------------------------
// The dashboard

interface Panel { type: string, title: string, targets?: Array<{ expr: string }>, gridPos: { x: number, y: number, w: number, h: number } }

const dashboard = JSON.parse(readFileSync(join(CHART_DIR, 'files/portico-dashboard.json'), 'utf8')) as { title: string, uid: string, panels: Panel[], templating: { list: Array<{ name: string }> } }
const exprs = dashboard.panels.flatMap(p => (p.targets ?? []).map(t => ({ panel: p.title, expr: t.expr })))

/** Every metric a proxy can export: the mesh CA's and the workers' exist only where configured. */
async function proxyMetricNames (): Promise<Set<string>> {
  const names = new Set<string>()
  const text = await new ProxyMetrics({ meshCa: true, workers: 2 }).registry.metrics()
  for (const line of text.split('\n')) if (line.startsWith('# TYPE ')) names.add(line.split(' ')[2]!)
  return names
}

async function exportedMetricNames (): Promise<Set<string>> {
  const names = await proxyMetricNames()
  const add = (text: string) => {
    for (const line of text.split('\n')) if (line.startsWith('# TYPE ')) names.add(line.split(' ')[2]!)
  }
  const kc = new KubeConfig()
  kc.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' })
  const log = { info () {}, warn () {}, debug () {}, error () {}, trace () {}, fatal () {}, child () { return log } }
  const controller = new Controller(kc, { ...resolveControllerSettings({}, 'test'), controllerName: 'test' }, { syncer: log, translator: log, gatewayController: log, deployer: log } as never)
  add(await controller.metrics.metrics())
  return names
}

test('the dashboard is a Grafana dashboard of Portico\'s proxy and controller metrics', async () => {
  assert.equal(dashboard.title, 'Portico')
  assert.ok(dashboard.uid.length > 0 && dashboard.uid.length <= 40)
  assert.deepEqual(dashboard.templating.list.map(v => v.name), ['datasource', 'namespace', 'gateway'])
  assert.ok(exprs.length >= 20, `${exprs.length} queries`)
  // Panels do not overlap on the 24-column grid.
  const cells = new Set<string>()
  for (const p of dashboard.panels) {
    assert.ok(p.gridPos.x + p.gridPos.w <= 24, `${p.title} fits the grid`)
    for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
      for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
        assert.ok(!cells.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`)
        cells.add(`${x},${y}`)
      }
    }
  }
  const exported = await exportedMetricNames()
  const used = new Set<string>()
  for (const { panel, expr } of exprs) {
    for (const m of expr.matchAll(/\b(portico_[a-z0-9_]+)\b/g)) {
      const name = m[1]!.replace(/_(bucket|sum|count)$/, '')
      assert.ok(exported.has(name), `panel "${panel}": ${m[1]} is not a metric Portico exports`)
      used.add(name)
    }
  }
  for (const name of ['portico_requests_total', 'portico_request_duration_seconds', 'portico_upstream_call_duration_seconds', 'portico_mcp_requests_total', 'portico_downstream_connections_open', 'portico_downstream_connections_total', 'portico_config_reloads_total', 'portico_controller_reconciles_total', 'portico_controller_xds_connected_proxies', 'portico_controller_xds_rejects_total']) {
    assert.ok(used.has(name), `the dashboard shows ${name}`)
  }
})

test('every metric the proxy exports is in docs/observability.md\'s table and on a dashboard panel', async () => {
  // The table's first column: one or more `portico_…` names (prom-client's process_* and
  // nodejs_* families are one row of wildcards, and on the dashboard as memory and event loop).
  const documented = new Set<string>()
  for (const line of readFileSync(join(REPO_ROOT, 'docs/observability.md'), 'utf8').split('\n')) {
    if (!line.startsWith('| `portico_')) continue
    for (const m of line.split('|')[1]!.matchAll(/`(portico_[a-z0-9_]+)`/g)) documented.add(m[1]!)
  }
  const used = new Set(exprs.flatMap(e => [...e.expr.matchAll(/\b(portico_[a-z0-9_]+)\b/g)].map(m => m[1]!.replace(/_(bucket|sum|count)$/, ''))))
  const own = [...await proxyMetricNames()].filter(n => !n.startsWith('portico_process_') && !n.startsWith('portico_nodejs_'))
  assert.deepEqual(own.filter(n => !documented.has(n)), [], 'exported by the proxy, not in docs/observability.md\'s metrics table')
  assert.deepEqual(own.filter(n => !used.has(n)), [], 'exported by the proxy, on no dashboard panel')
  assert.deepEqual([...documented].filter(n => !own.includes(n)), [], 'in docs/observability.md\'s table, not exported by the proxy')
})

test('every dashboard query is valid PromQL (promtool)', async (t) => {
  const promtool = requireTool(t, 'PROMTOOL', 'promtool')
  if (promtool === null) return
  const dir = mkdtempSync(join(tmpdir(), 'portico-dashboard-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // Grafana's variables, as Grafana substitutes them.
  const concrete = (expr: string) => expr.replaceAll('$__rate_interval', '1m').replaceAll('$namespace', '.*').replaceAll('$gateway', '.*')
  const rules = { groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `portico:dashboard_query:${i}`, expr: concrete(e.expr) })) }] }
  writeFileSync(join(dir, 'rules.yaml'), JSON.stringify(rules))
  const r = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')])
  assert.equal(r.code, 0, `promtool check rules:\n${r.stdout}\n${r.stderr}`)
  assert.match(r.stdout, new RegExp(`SUCCESS: ${exprs.length} rules found`))
})
