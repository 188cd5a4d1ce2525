/**
 * Translation benchmark: what the controller pays to turn Gateway API objects into proxy
 * config, and what the proxy pays to take it in, at 100 / 1,000 / 5,000 HTTPRoutes.
 *
 * For each size, one Gateway (two listeners) and N HTTPRoutes spread over 10 namespaces,
 * each route with two rules (path prefix, header and exact matches, a header filter, two
 * weighted backends out of 200 Services with EndpointSlices). Stages, each timed as the
 * median of --runs runs after warm-up:
 *
 *   translate   controller: ClusterState → IR and statuses (the pure function, golden-tested)
 *   encode      controller: IR → xDS resources (protobuf bytes + per-resource versions)
 *   decode      proxy: resources → IR
 *   compile     proxy: IR → the engine's compiled config (route tables, policies, pools)
 *
 * Memory: the heap retained by one translation result and by one compiled config, measured
 * after a forced GC with the result kept alive; plus the bytes on the wire.
 *
 * Run: node --expose-gc bench/translation.ts [--runs 7] [--sizes 100,1000,5000]
 */

import { parseArgs } from 'node:util'
import { translate, type ClusterState } from '@portico/controller'
import { Engine, type ProxyIR } from '@portico/engine'
import { assembleIR, decodeResource, encodeResources } from '@portico/xds'
import { fmt, rounded, table } from './lib/report.ts'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: process.env.BENCH_RUNS ?? '7' },
    sizes: { type: 'string', default: process.env.BENCH_SIZES ?? '100,1000,5000' },
    help: { type: 'boolean', short: 'h' }
  }
})
if (values.help === true) {
  process.stdout.write('node --expose-gc bench/translation.ts [--runs 7] [--sizes 100,1000,5000]\n')
  process.exit(0)
}
const RUNS = Math.max(1, Number(values.runs))
const SIZES = values.sizes.split(',').map(Number).filter(n => n > 0)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  process.stderr.write('run with node --expose-gc for memory figures\n')
}
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

const CONTROLLER_NAME = 'portico.dev/gateway-controller'
const NAMESPACES = 10
const SERVICES = 200

/** A cluster with one Gateway and `routes` HTTPRoutes attached to it. */
function clusterState (routes: number): ClusterState {
  const ns = (i: number) => `team-${i % NAMESPACES}`
  const state: ClusterState = {
    gatewayClasses: [{ metadata: { name: 'portico', generation: 1 }, spec: { controllerName: CONTROLLER_NAME } }],
    gateways: [{
      metadata: { name: 'web', namespace: 'infra', generation: 1 },
      spec: {
        gatewayClassName: 'portico',
        listeners: [
          { name: 'http', port: 8080, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          { name: 'api', port: 8081, protocol: 'HTTP', hostname: '*.example.com', allowedRoutes: { namespaces: { from: 'All' } } }
        ]
      }
    }],
    httpRoutes: [],
    referenceGrants: [],
    services: [],
    endpointSlices: [],
    secrets: [],
    namespaces: [{ metadata: { name: 'infra' } }, ...Array.from({ length: NAMESPACES }, (_, i) => ({ metadata: { name: ns(i), labels: { team: String(i) } } }))]
  }
  for (let s = 0; s < SERVICES; s++) {
    const name = `svc-${s}`
    state.services.push({ metadata: { name, namespace: ns(s) }, spec: { ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] } })
    state.endpointSlices.push({
      metadata: { name: `${name}-abc`, namespace: ns(s), labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: [1, 2, 3].map(k => ({ addresses: [`10.${s % 250}.${k}.${(s * 7) % 250}`], conditions: { ready: true } }))
    })
  }
  for (let r = 0; r < routes; r++) {
    const namespace = ns(r)
    // Services in the route's namespace: s ≡ r (mod NAMESPACES).
    const svc = (k: number) => `svc-${(r + k * NAMESPACES) % SERVICES}`
    state.httpRoutes.push({
      metadata: { name: `route-${r}`, namespace, generation: 1 },
      spec: {
        parentRefs: [{ name: 'web', namespace: 'infra', sectionName: r % 2 === 0 ? 'http' : 'api' }],
        hostnames: r % 2 === 0 ? undefined : [`app-${r}.example.com`],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: `/r${r}/api` }, headers: [{ name: 'x-version', value: 'v2' }] }],
            filters: [{ type: 'RequestHeaderModifier', requestHeaderModifier: { add: [{ name: 'x-route', value: String(r) }] } }],
            backendRefs: [{ name: svc(0), port: 80, weight: 90 }, { name: svc(1), port: 80, weight: 10 }]
          },
          {
            matches: [{ path: { type: 'Exact', value: `/r${r}/health` } }, { path: { type: 'PathPrefix', value: `/r${r}/` } }],
            backendRefs: [{ name: svc(2), port: 80 }]
          }
        ]
      }
    })
  }
  return state
}

function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

function time<T> (fn: () => T): { ms: number, value: T } {
  const t = performance.now()
  const value = fn()
  return { ms: performance.now() - t, value }
}

/** Heap bytes retained by what `make` returns (forced GC before and after, result kept). */
function retained (make: () => unknown): number {
  if (gc === undefined) return NaN
  gc(); gc()
  const before = process.memoryUsage().heapUsed
  const keep = make()
  gc(); gc()
  const after = process.memoryUsage().heapUsed
  ;(globalThis as { __keep?: unknown }).__keep = keep
  ;(globalThis as { __keep?: unknown }).__keep = undefined
  return after - before
}

interface SizeFigures {
  routes: number
  translateMs: number
  encodeMs: number
  decodeMs: number
  compileMs: number
  wireBytes: number
  resources: number
  translateHeapBytes: number
  compiledHeapBytes: number
}

function measure (routes: number): SizeFigures {
  const state = clusterState(routes)
  const options = { controllerName: CONTROLLER_NAME }
  const engine = new Engine({})
  const samples = { translate: [] as number[], encode: [] as number[], decode: [] as number[], compile: [] as number[] }
  let wireBytes = 0
  let resources = 0
  let ir!: ProxyIR
  for (let i = 0; i < RUNS + 2; i++) {
    const tr = time(() => translate(state, options))
    const gateway = tr.value.gateways[0]!
    const attached = gateway.listeners.reduce((n, l) => n + l.attachedRoutes, 0)
    if (attached !== routes) throw new Error(`expected ${routes} attached routes, got ${attached}`)
    ir = gateway.ir
    const enc = time(() => encodeResources(ir))
    const wire = [...enc.value.values()].map(r => r.resource)
    const dec = time(() => assembleIR(wire.map(w => decodeResource(w))))
    const comp = time(() => engine.apply(dec.value))
    if (i < 2) continue // warm-up
    samples.translate.push(tr.ms)
    samples.encode.push(enc.ms)
    samples.decode.push(dec.ms)
    samples.compile.push(comp.ms)
    wireBytes = wire.reduce((n, w) => n + w.value.length, 0)
    resources = wire.length
  }
  const translateHeapBytes = retained(() => translate(state, options))
  const compiledHeapBytes = retained(() => new Engine({}).apply(ir))
  return {
    routes,
    translateMs: median(samples.translate),
    encodeMs: median(samples.encode),
    decodeMs: median(samples.decode),
    compileMs: median(samples.compile),
    wireBytes,
    resources,
    translateHeapBytes,
    compiledHeapBytes
  }
}

const MB = 1024 * 1024
const results: SizeFigures[] = []
for (const size of SIZES) {
  progress(`${size} routes`)
  results.push(measure(size))
}
process.stdout.write(table(
  ['HTTPRoutes', 'translate ms', 'encode ms', 'decode ms', 'compile ms', 'total ms', 'wire MB', 'resources', 'translate heap MB', 'compiled heap MB'],
  results.map(r => [
    String(r.routes), fmt(r.translateMs), fmt(r.encodeMs), fmt(r.decodeMs), fmt(r.compileMs),
    fmt(r.translateMs + r.encodeMs + r.decodeMs + r.compileMs), fmt(r.wireBytes / MB, 3), String(r.resources),
    fmt(r.translateHeapBytes / MB), fmt(r.compiledHeapBytes / MB)
  ])
) + '\n')
const first = results[0]
const last = results.at(-1)
if (first !== undefined && last !== undefined && last !== first) {
  const per = (r: SizeFigures) => (r.translateMs + r.encodeMs + r.decodeMs + r.compileMs) / r.routes
  process.stdout.write(`\nper-route cost ${fmt(per(first) * 1000, 1)} µs at ${first.routes} routes, ${fmt(per(last) * 1000, 1)} µs at ${last.routes} (ratio ${fmt(per(last) / per(first))}: 1.00 is linear)\n`)
}
process.stdout.write(JSON.stringify({ bench: 'translation', runs: RUNS, results: rounded(results) }) + '\n')
