/**
 * Convergence benchmark: from creating an HTTPRoute to the first 200 through the proxy, in
 * cluster mode with real parts — kube-apiserver + etcd (the e2e cluster harness, built by
 * scripts/kube-tools), the portico controller and the Gateway's proxy as local processes,
 * and an echo backend on a network-namespace test host (needs root, like the cluster tests).
 *
 * Measured twice: with 1 route loaded, then with --routes (1,000) loaded, each time --samples
 * new routes one after another. For each: t0 just before the create request; then GET the
 * new path every millisecond until it answers 200. Printed: median / p90 / max per load,
 * and the same for `kubectl apply` (a kubectl process per route, which is what a user
 * waits on). Target: median ≤ 100 ms with 1,000 routes loaded.
 *
 * Run: node bench/convergence.ts [--routes 1000] [--samples 20]
 */

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { Agent, request } from 'undici'
import { startCluster, type Cluster } from '../e2e/cluster/harness.ts'
import { backendService, gatewayYaml, startController, startGatewayProxy, type ControllerProcess } from '../e2e/cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { createTestHost, startEcho } from '../e2e/lib/test-host.ts'
import { readOptions } from './lib/options.ts'
import { fmt, rounded, table } from './lib/report.ts'

const opts = readOptions({
  routes: { flag: 'routes', default: 1000, help: 'HTTPRoutes loaded for the second measurement' },
  samples: { flag: 'samples', default: 20, help: 'routes created (and timed) per measurement' },
  kubectlSamples: { flag: 'kubectl-samples', default: 5, help: 'of which also timed through `kubectl apply`' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)
const NS = 'bench'
const agent = new Agent({ connections: 4, keepAliveTimeout: 30_000 })

function routeObject (name: string, path: string): object {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, namespace: NS },
    spec: {
      parentRefs: [{ name: 'web' }],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: path } }], backendRefs: [{ name: 'echo', port: 80 }] }]
    }
  }
}

function routeYaml (name: string, path: string): string {
  return JSON.stringify(routeObject(name, path)) // JSON is YAML
}

async function status (url: string): Promise<number> {
  try {
    const res = await request(url, { dispatcher: agent })
    await res.body.dump()
    return res.statusCode
  } catch {
    return 0
  }
}

/** Milliseconds from `create()` starting to the first 200 on `url`. */
async function converge (create: () => Promise<unknown>, url: string): Promise<number> {
  const t0 = performance.now()
  const created = create()
  let ok = false
  while (!ok) {
    ok = await status(url) === 200
    if (!ok) {
      if (performance.now() - t0 > 30_000) throw new Error(`no 200 from ${url} within 30 s`)
      await new Promise(resolve => setTimeout(resolve, 1))
    }
  }
  const ms = performance.now() - t0
  await created
  return ms
}

/** Creates `count` routes through the API, `parallel` at a time. */
async function createRoutes (cluster: Cluster, from: number, count: number, parallel = 16): Promise<void> {
  let next = from
  const worker = async () => {
    while (next < from + count) {
      const i = next++
      await cluster.api('POST', `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/httproutes`, routeObject(`load-${i}`, `/load-${i}/`))
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
}

interface Summary { n: number, median: number, p90: number, min: number, max: number }

function summary (xs: number[]): Summary {
  const s = [...xs].sort((a, b) => a - b)
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!
  return { n: s.length, median: at(0.5), p90: at(0.9), min: s[0]!, max: s.at(-1)! }
}

async function main (): Promise<void> {
  const cleanup: Array<() => unknown> = []
  const shim = { skip: (why: string) => { throw new Error(why) } } as unknown as TestContext
  try {
    const host = createTestHost(shim)!
    cleanup.push(() => host.destroy())
    const dir = mkdtempSync(join(tmpdir(), 'portico-bench-'))
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
    progress('starting kube-apiserver, etcd, kube-controller-manager')
    const cluster = await startCluster()
    cleanup.push(() => cluster.stop())
    await startEcho(host, 'echo', 18090)
    await cluster.apply(`apiVersion: v1\nkind: Namespace\nmetadata: { name: portico-system }\n---\napiVersion: v1\nkind: Namespace\nmetadata: { name: ${NS} }\n`)
    await cluster.apply(backendService(host.address, NS, 'echo', 18090))
    const controller: ControllerProcess = await startController(cluster, { env: { LOG_LEVEL: 'warn' } })
    cleanup.push(() => controller.stop())
    const gwPort = await freePort()
    await cluster.apply(gatewayYaml(NS, 'web', gwPort))
    await createRoutes(cluster, 0, 1)
    const proxy = await startGatewayProxy(cluster, dir, NS, 'web')
    cleanup.push(() => proxy.stop())
    const base = `http://127.0.0.1:${gwPort}`
    await waitUntil(async () => await status(`${base}/load-0/`) === 200, 30_000, 'the first route')

    const results: Array<{ loaded: number, via: string, summary: Summary }> = []
    let probe = 0
    const measure = async (loaded: number) => {
      const api: number[] = []
      for (let i = 0; i < opts.samples; i++) {
        const name = `probe-${probe++}`
        api.push(await converge(() => cluster.api('POST', `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/httproutes`, routeObject(name, `/${name}/`)), `${base}/${name}/`))
      }
      results.push({ loaded, via: 'API create', summary: summary(api) })
      const kubectl: number[] = []
      for (let i = 0; i < opts.kubectlSamples; i++) {
        const name = `probe-${probe++}`
        kubectl.push(await converge(() => cluster.apply(routeYaml(name, `/${name}/`)), `${base}/${name}/`))
      }
      if (kubectl.length > 0) results.push({ loaded, via: 'kubectl apply', summary: summary(kubectl) })
    }
    progress('measuring with 1 route loaded')
    await measure(1)
    progress(`loading ${opts.routes} routes`)
    await createRoutes(cluster, 1, opts.routes - 1)
    await waitUntil(async () => await status(`${base}/load-${opts.routes - 1}/`) === 200, 120_000, `route ${opts.routes - 1}`, 200)
    // Let the controller finish writing the loaded routes' statuses: measure a steady state.
    await waitUntil(async () => {
      const last = await cluster.api<{ status?: { parents?: unknown[] } }>('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/${NS}/httproutes/load-${opts.routes - 1}`)
      return (last.status?.parents ?? []).length > 0
    }, 120_000, 'the loaded routes\' statuses', 200)
    progress(`measuring with ${opts.routes + probe} routes loaded`)
    await measure(opts.routes + probe)

    process.stdout.write(table(
      ['routes loaded', 'via', 'samples', 'median ms', 'p90 ms', 'min ms', 'max ms'],
      results.map(r => [String(r.loaded), r.via, String(r.summary.n), fmt(r.summary.median, 1), fmt(r.summary.p90, 1), fmt(r.summary.min, 1), fmt(r.summary.max, 1)])
    ) + '\n')
    const loadedApi = results.find(r => r.loaded > 1 && r.via === 'API create')
    if (loadedApi !== undefined) {
      process.stdout.write(`\ntarget: median ≤ 100 ms with ${loadedApi.loaded} routes: ${fmt(loadedApi.summary.median, 1)} ms (${loadedApi.summary.median <= 100 ? 'met' : 'NOT met'})\n`)
    }
    process.stdout.write(JSON.stringify({ bench: 'convergence', results: rounded(results) }) + '\n')
  } finally {
    await agent.close()
    for (const fn of cleanup.reverse()) await fn()
  }
}

await main()
