/**
 * The chart's Grafana dashboard against a real Prometheus (Debian's package, from
 * scripts/test-tools) that scrapes a running Portico — one with MCP, LLM (priced, guarded,
 * failing over), auth, rate-limit, TLS-backend, InferencePool (a real ext_proc endpoint
 * picker), TCP, UDP and traced traffic (e2e/lib/observed-gateway.ts), in the mesh: its
 * certificate from a real istiod's CA on the same apiserver, a mesh route through an HBONE
 * peer — and a running controller (a real kube-apiserver, a Gateway and an HTTPRoute, its
 * proxy connected over xDS): every panel's query, with the dashboard's variables set to all,
 * returns series.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { requireKubeTools } from '../cluster/harness.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { CHART_DIR } from '../lib/chart.ts'
import { freePort } from '@portico/testkit/portico'
import { requireTool } from '@portico/testkit/tools'
import { startObservedGateway, type ObservedGateway } from '../lib/observed-gateway.ts'
import { meshGatewayEnv, requireIstio, startMesh, type Mesh } from '../lib/istio.ts'
import { startHbonePeer, type HbonePeer } from '@portico/testkit/hbone-peer'
import { waitUntil } from '@portico/testkit/wait'

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
  const kube = requireKubeTools(t)
  if (kube === null) return
  const istio = requireIstio(t)
  if (istio === null) return
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

  // The mesh CA (istiod on the same apiserver) and a mesh workload's HBONE peer, its
  // certificate from the same CA.
  const mesh: Mesh = await startMesh(kube, istio, { namespace: 'mesh', serviceAccounts: ['gateway', 'echo'], clusterId: 'portico-dashboard', cluster })
  suite.defer(() => mesh.stop())
  const peerCert = await mesh.issue('echo')
  const peer: HbonePeer = await startHbonePeer({ cert: peerCert.certChainPem, key: peerCert.keyPem, root: mesh.root })
  suite.defer(() => peer.close())
  const { file: tokenFile } = await mesh.tokenFile('gateway', 'token')

  // A standalone Portico with every kind of traffic, in the mesh.
  const gw: ObservedGateway = await startObservedGateway({ mesh: { env: meshGatewayEnv(mesh, 'gateway', tokenFile), identity: mesh.spiffeId('echo'), hbonePort: peer.port } })
  suite.defer(() => gw.close())
  await waitUntil(async () => {
    const text = await (await fetch(`${gw.stats}/metrics`)).text()
    return /^portico_mesh_certificate_expiry_timestamp_seconds [1-9]/m.test(text)
  }, 30_000, 'the gateway\'s mesh certificate from istiod', 200)

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
  assert.ok(checked >= 70, `${checked} queries`)
})

test('the data means what the panels say: connected proxies, auth denials, limited requests, LLM tokens', async t => {
  if (!ready) return t.skip('prometheus or the Kubernetes tools are missing')
  assert.equal(Number((await query('sum(portico_controller_xds_connected_proxies)'))[0]?.value[1]), 1)
  assert.ok(Number((await query('sum(portico_auth_decisions_total{decision="deny",reason="unauthenticated"})'))[0]?.value[1]) >= 8)
  assert.ok(Number((await query('sum(portico_rate_limit_decisions_total{decision="limited"})'))[0]?.value[1]) >= 8)
  assert.ok(Number((await query('sum(portico_gen_ai_client_token_usage_sum)'))[0]?.value[1]) > 0)
})

test('the new rows mean what they say: certificate time left, mesh traffic, pool fallbacks, UDP flows by reason', async t => {
  if (!ready) return t.skip('prometheus or the Kubernetes tools are missing')
  // The gateway asks istiod for a 24 h certificate (mesh.ca's default TTL); istiod may cap it.
  const left = Number((await query(expand('min(portico_mesh_certificate_expiry_timestamp_seconds{namespace=~"$namespace"} > 0) - time()')))[0]?.value[1])
  assert.ok(left > 600 && left <= 24 * 3600 + 60, `time left ${left} s`)
  assert.ok(Number((await query('sum(portico_mesh_ca_requests_total{result="ok"})'))[0]?.value[1]) >= 1)
  // One tunnel per upstream connection, which the mesh route's requests share.
  assert.ok(Number((await query('sum(portico_upstream_hbone_tunnels_total{result="ok"})'))[0]?.value[1]) >= 1)
  assert.ok(Number((await query('sum(portico_requests_total{route="mesh",status="200"})'))[0]?.value[1]) >= 8, 'every round\'s mesh request answered')
  assert.ok(Number((await query('sum(portico_inference_fallbacks_total)'))[0]?.value[1]) >= 8)
  const closed = await query('sum by (reason) (portico_udp_flows_closed_total)')
  assert.deepEqual(closed.map(r => r.metric.reason).sort(), ['IdleTimeout', 'UpstreamError', 'UpstreamUnreachable'])
})
