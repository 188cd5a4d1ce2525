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
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { createTestCa } from '@portico/testkit/test-ca'

const GRPC_SERVER = fileURLToPath(new URL('../lib/grpc-tls-server.ts', import.meta.url))
const PORTS = [18101, 18102]

let suite: ClusterGateway | null = null

before(async s => {
  suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-grpc-tls-', testHost: true, cluster: { controllerManager: false }, namespaces: ['portico-system', 'apps'] })
  if (suite === null) return
  const { dir, host } = suite
  createTestCa(dir, 'ca', { subject: '/CN=portico-test-ca' }).issue('server', { subject: '/CN=backend.test', sans: ['DNS:backend.test'] })
  for (const [i, port] of PORTS.entries()) {
    await host!.spawnNode([GRPC_SERVER, host!.address, String(port), `pod-${i}`, join(dir, 'server.pem'), join(dir, 'server.key')], 'listening')
  }
})

after(async () => await suite?.stop())

test('a GRPCRoute to a Service with two endpoints under a BackendTLSPolicy: every call verified against the hostname, both endpoints serve', async t => {
  if (suite === null) return t.skip('no cluster or no test host')
  const { cluster, dir, host } = suite
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
  const controller = await suite.startController()
  const proxy = await suite.startProxy('apps', 'grpc')

  const Client = grpc.makeGenericClientConstructor({
    Echo: { path: '/tls.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b }
  }, 'Echo')
  const client = new Client(`127.0.0.1:${gwPort}`, grpc.credentials.createInsecure())
  suite.defer(() => client.close())
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
