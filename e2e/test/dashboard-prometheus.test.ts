/**
 * The chart's Grafana dashboard against a real Prometheus (Debian's package, from
 * scripts/test-tools) that scrapes a running Portico — one with MCP, LLM, auth, rate-limit
 * and TLS-backend traffic (e2e/lib/observed-gateway.ts) — and a running controller (a real
 * kube-apiserver, a Gateway and an HTTPRoute, its proxy connected over xDS): every panel's
 * query, with the dashboard's variables set to all, returns series.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { CHART_DIR } from '../lib/chart.ts'
import { freePort } from '@portico/testkit/portico'
import { requireTool } from '@portico/testkit/tools'
import { startObservedGateway, type ObservedGateway } from '../lib/observed-gateway.ts'

interface Panel { type: string, title: string, targets?: Array<{ expr: string }> }
const dashboard = JSON.parse(readFileSync(join(CHART_DIR, 'files/portico-dashboard.json'), 'utf8')) as { panels: Panel[] }

let suite: ClusterGateway | null = null
after(async () => await suite?.stop())

let prometheus = ''
let ready = false

/** The dashboard's variables as "All" (Grafana's allValue .*), and a rate window a short test can fill. */
function expand (expr: string): string {
  return expr.replaceAll('$namespace', '.*').replaceAll('$gateway', '.*').replaceAll('$__rate_interval', '1m')
}

async function query (expr: string): Promise<Array<{ metric: Record<string, string>, value: [number, string] }>> {
  const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`)
  const body = await res.json() as { status: string, error?: string, data?: { result: Array<{ metric: Record<string, string>, value: [number, string] }> } }
  assert.equal(body.status, 'success', `${expr}: ${body.error ?? ''}`)
  return body.data!.result
}

before(async s => {
  const t = s as TestContext
  const binary = requireTool(t, 'PROMETHEUS', 'prometheus')
  if (binary === null) return
  // The controller, with a Gateway, an HTTPRoute and the Gateway's proxy connected.
  suite = await startClusterGateway(t, { dir: 'portico-dashboard-', namespaces: ['portico-system', 'apps'] })
  if (suite === null) return
  const { cluster, dir } = suite
  const controller = await suite.startController()
  await cluster.apply(`${gatewayYaml('apps', 'web', await freePort())}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r1, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules: [{ backendRefs: [{ name: nothing, port: 80 }] }]
`)
  await suite.startProxy('apps', 'web')

  // A standalone Portico with every kind of traffic.
  const gw: ObservedGateway = await startObservedGateway()
  suite.defer(() => gw.close())

  const port = await freePort()
  writeFileSync(join(dir, 'prometheus.yml'), `global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: portico
    static_configs: [{ targets: ['127.0.0.1:${gw.statsPort}'] }]
  - job_name: portico-controller
    static_configs: [{ targets: ['127.0.0.1:${controller.metrics}'] }]
`)
  const child: ChildProcess = spawn(binary, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (b: Buffer) => { output += b.toString() })
  child.stderr!.on('data', (b: Buffer) => { output += b.toString() })
  const exited = new Promise<void>(resolve => child.once('close', () => resolve()))
  suite.defer(async () => { child.kill('SIGTERM'); await exited })
  prometheus = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 30_000
  for (;;) {
    const ok = await fetch(`${prometheus}/-/ready`).then(r => r.ok, () => false)
    if (ok) break
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`prometheus did not start:\n${output}`)
    await new Promise(resolve => setTimeout(resolve, 200))
  }

  // Rounds of traffic while Prometheus scrapes every second: rates need two samples apart.
  for (let i = 0; i < 8; i++) {
    await gw.traffic()
    await new Promise(resolve => setTimeout(resolve, 700))
  }
  // Both targets up, with a few scrapes each.
  const until = Date.now() + 20_000
  for (;;) {
    const up = await query('sum_over_time(up[1m])')
    if (up.length === 2 && up.every(r => Number(r.value[1]) >= 5)) break
    if (Date.now() > until) throw new Error(`targets not scraped: ${JSON.stringify(up)}\n${output.slice(-2000)}`)
    await new Promise(resolve => setTimeout(resolve, 500))
  }
  ready = true
})

test('every query of every dashboard panel returns series from the scraped proxy and controller', async t => {
  if (!ready) return t.skip('prometheus or the Kubernetes tools are missing')
  const empty: string[] = []
  let checked = 0
  for (const panel of dashboard.panels) {
    for (const target of panel.targets ?? []) {
      const expr = expand(target.expr)
      const result = await query(expr)
      checked++
      if (result.length === 0) empty.push(`${panel.title}: ${expr}`)
    }
  }
  assert.deepEqual(empty, [], `${empty.length} of ${checked} queries returned nothing`)
  assert.ok(checked >= 40, `${checked} queries`)
})

test('the data means what the panels say: connected proxies, auth denials, limited requests, LLM tokens', async t => {
  if (!ready) return t.skip('prometheus or the Kubernetes tools are missing')
  assert.equal(Number((await query('sum(portico_controller_xds_connected_proxies)'))[0]?.value[1]), 1)
  assert.ok(Number((await query('sum(portico_auth_decisions_total{decision="deny",reason="unauthenticated"})'))[0]?.value[1]) >= 8)
  assert.ok(Number((await query('sum(portico_rate_limit_decisions_total{decision="limited"})'))[0]?.value[1]) >= 8)
  assert.ok(Number((await query('sum(portico_gen_ai_client_token_usage_sum)'))[0]?.value[1]) > 0)
})
