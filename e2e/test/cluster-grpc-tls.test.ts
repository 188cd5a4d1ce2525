/**
 * The Gateway API's BackendTLSPolicyGRPCRoute, in a real cluster (e2e/cluster/harness.ts): a
 * GRPCRoute to a Service with two ready endpoints under a BackendTLSPolicy (a CA from a
 * ConfigMap, a hostname the certificate carries). Each endpoint is a grpc-js server over TLS
 * in a test host's network namespace (EndpointSlices refuse loopback); the controller and the
 * Gateway's proxy run as local processes. Until the proxies' HTTP/2 pools pinned the server
 * name on each endpoint, every call answered UNAVAILABLE `dispatcher.compose is not a
 * function`.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import { requireKubeTools, startCluster, type Cluster } from '../cluster/harness.ts'
import { gatewayYaml, startController, startGatewayProxy } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { createTestCa } from '@portico/testkit/test-ca'
import { createTestHost, type TestHost } from '../lib/test-host.ts'

const GRPC_SERVER = fileURLToPath(new URL('../lib/grpc-tls-server.ts', import.meta.url))
const PORTS = [18101, 18102]

let cluster: Cluster | undefined
let host: TestHost | null = null
let dir: string
const cleanup: Array<() => Promise<void> | void> = []

before(async s => {
  const t = s as TestContext
  const tools = requireKubeTools(t)
  if (tools === null) return
  host = createTestHost(t)
  if (host === null) return
  cleanup.push(() => host?.destroy())
  dir = mkdtempSync(join(tmpdir(), 'portico-cluster-grpc-tls-'))
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
  createTestCa(dir, 'ca', { subject: '/CN=portico-test-ca' }).issue('server', { subject: '/CN=backend.test', sans: ['DNS:backend.test'] })
  for (const [i, port] of PORTS.entries()) {
    await host.spawnNode([GRPC_SERVER, host.address, String(port), `pod-${i}`, join(dir, 'server.pem'), join(dir, 'server.key')], 'listening')
  }
  cluster = await startCluster({ tools, controllerManager: false })
  cleanup.push(() => cluster!.stop())
})

after(async () => {
  for (const fn of cleanup.reverse()) await fn()
})

test('a GRPCRoute to a Service with two endpoints under a BackendTLSPolicy: every call verified against the hostname, both endpoints serve', async t => {
  if (cluster === undefined || host === null) return t.skip('no cluster or no test host')
  const ca = readFileSync(join(dir, 'ca.pem'), 'utf8')
  const gwPort = await freePort()
  // Two EndpointSlices of one Service port, one endpoint each (same test-host address, two ports).
  const slice = (i: number, port: number) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: grpc-tls-${i}, namespace: apps, labels: { kubernetes.io/service-name: grpc-tls } }
addressType: IPv4
ports: [{ name: grpc, port: ${port}, protocol: TCP }]
endpoints: [{ addresses: ["${host!.address}"], conditions: { ready: true } }]
`
  await cluster.apply(`apiVersion: v1
kind: Namespace
metadata: { name: portico-system }
---
apiVersion: v1
kind: Namespace
metadata: { name: apps }
`)
  await cluster.apply(`apiVersion: v1
kind: Service
metadata: { name: grpc-tls, namespace: apps }
spec: { ports: [{ name: grpc, port: 443 }] }
---
${slice(0, PORTS[0]!)}---
${slice(1, PORTS[1]!)}---
apiVersion: v1
kind: ConfigMap
metadata: { name: backend-ca, namespace: apps }
data:
  ca.crt: |
${ca.trim().split('\n').map(l => `    ${l}`).join('\n')}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: { name: grpc-tls, namespace: apps }
spec:
  targetRefs: [{ group: "", kind: Service, name: grpc-tls }]
  validation:
    caCertificateRefs: [{ group: "", kind: ConfigMap, name: backend-ca }]
    hostname: backend.test
---
${gatewayYaml('apps', 'grpc', gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: echo, namespace: apps }
spec:
  parentRefs: [{ name: grpc }]
  rules: [{ backendRefs: [{ name: grpc-tls, port: 443 }] }]
`)
  const controller = await startController(cluster, {})
  cleanup.push(() => controller.stop())
  const proxy = await startGatewayProxy(cluster, dir, 'apps', 'grpc')
  cleanup.push(async () => { await proxy.stop() })

  const Client = grpc.makeGenericClientConstructor({
    Echo: { path: '/tls.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b }
  }, 'Echo')
  const client = new Client(`127.0.0.1:${gwPort}`, grpc.credentials.createInsecure())
  cleanup.push(() => client.close())
  const call = () => new Promise<string>((resolve, reject) => {
    (client.Echo as (req: Buffer, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => void)(Buffer.from('hi'), (err, res) => err !== null ? reject(err) : resolve(res.toString()))
  })
  let last = ''
  try {
    await waitUntil(async () => {
      last = await call().catch((err: grpc.ServiceError) => `error ${err.code}: ${err.details}`)
      return !last.startsWith('error')
    }, 30_000, 'a first call through the proxy', 200)
  } catch (err) {
    throw new Error(`${(err as Error).message} (last: ${last})\n${controller.output().slice(-2000)}\n${proxy.output.slice(-2000)}`)
  }
  const answers = new Set<string>()
  for (let i = 0; i < 6; i++) answers.add(await call())
  assert.deepEqual(answers, new Set(['pod-0: hi', 'pod-1: hi']), 'both endpoints answer, each over TLS verified against backend.test')
})
