/**
 * The Gateway API Inference Extension on the real kube-apiserver harness (e2e/cluster/harness.ts),
 * as the inference tests set it up: the InferencePool CRD and the reference endpoint picker
 * lwepp from scripts/test-tools (LWEPP, INFERENCE_EXTENSION_CRDS), echo servers on loopback
 * addresses of their own as a pool's model servers, the pool's Pods applied and marked Ready
 * at those addresses through the status subresource (lwepp only reads Pods, so nothing has to
 * run them), and lwepp started against the harness's kubeconfig.
 */

import type { TestContext } from 'node:test'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createHash } from 'node:crypto'
import http2 from 'node:http2'
import type { Socket } from 'node:net'
import { networkInterfaces } from 'node:os'
import { request } from 'undici'
import { requireKubeTools, startProcess, type Cluster, type KubeObject, type KubeTools, type Proc } from '../cluster/harness.ts'
import { gatewayYaml } from '../cluster/portico-processes.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { freePort } from '@portico/testkit/portico'
import { type BackendListen, type EchoedRequest, startEchoBackend } from '@portico/testkit/backends'
import { startLlamaServer } from '@portico/testkit'

const POOL_CRD = 'inference.networking.k8s.io_inferencepools.yaml'

/** lwepp and the CRD beside it (scripts/test-tools' lwepp-<version>/crds), or null after skipping / throwing in CI. */
export function requireLwepp (t: TestContext): { lwepp: string, crd: string } | null {
  const lwepp = process.env.LWEPP ?? ''
  const crds = process.env.INFERENCE_EXTENSION_CRDS ?? (lwepp !== '' ? join(dirname(lwepp), 'crds') : '')
  const crd = join(crds, POOL_CRD)
  if (lwepp !== '' && existsSync(lwepp) && existsSync(crd)) return { lwepp, crd }
  const why = `the Inference Extension's endpoint picker is missing (LWEPP=${JSON.stringify(lwepp)}, InferencePool CRD ${JSON.stringify(crd)}): run ./scripts/test-tools (./scripts/test does) and export the lines it prints`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}

/** What a pool's test server is to the tests: where it listens, what it received, how to stop it. */
export interface PoolServer {
  port: number
  /** `ip:port`, as the picker names the endpoint. */
  host: string
  /** How many requests it received. */
  received: () => number
  close: () => Promise<void>
}

/** Starts one server named `name` listening as `listen` says. */
export type StartPoolServer = (name: string, listen: BackendListen) => Promise<PoolServer>

/** The HTTP/1.1 echo server (testkit's), answering an EchoedRequest. */
export const echoServer: StartPoolServer = async (name, listen) => {
  const b = await startEchoBackend(name, {}, listen)
  return { port: b.port, host: b.host, received: () => b.requests.length, close: b.close }
}

/** What the h2c echo server answers: the EchoedRequest plus the HTTP version it was spoken to in. */
export interface H2cEchoedRequest extends EchoedRequest { httpVersion: string }

/**
 * An echo server speaking HTTP/2 over cleartext with prior knowledge only (node:http2's
 * createServer: an HTTP/1.1 request is refused), as an `appProtocol: kubernetes.io/h2c` pool's
 * model servers.
 */
export const h2cEchoServer: StartPoolServer = async (name, listen) => {
  let count = 0
  const sockets = new Set<Socket>()
  const server = http2.createServer((req, res) => {
    count++
    const hash = createHash('sha256')
    let length = 0
    req.on('data', (chunk: Buffer) => { hash.update(chunk); length += chunk.length })
    req.on('end', () => {
      const echoed: H2cEchoedRequest = { name, method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders, bodyLength: length, bodySha256: hash.digest('hex'), httpVersion: req.httpVersion }
      const body = JSON.stringify(echoed)
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-backend': name })
      res.end(body)
    })
  })
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  const address = listen.address ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: address, port: listen.port ?? 0 }, () => resolve())
  })
  const port = (server.address() as { port: number }).port
  return {
    port,
    host: `${address}:${port}`,
    received: () => count,
    close: async () => await new Promise<void>(resolve => {
      server.close(() => resolve())
      for (const s of sockets) s.destroy()
    })
  }
}

/** llama.cpp's and the model's paths (scripts/test-tools' LLAMA_CPP_SERVER, SMOLLM2_GGUF), or null after skipping / throwing in CI. */
export function requireLlamaCpp (t: TestContext): { server: string, model: string } | null {
  const server = process.env.LLAMA_CPP_SERVER ?? ''
  const model = process.env.SMOLLM2_GGUF ?? ''
  if (server !== '' && model !== '' && existsSync(server) && existsSync(model)) return { server, model }
  const why = `llama.cpp's llama-server or the SmolLM2 model is missing (LLAMA_CPP_SERVER=${JSON.stringify(server)}, SMOLLM2_GGUF=${JSON.stringify(model)}): run ./scripts/test-tools (./scripts/test does) and export the lines it prints`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}

/**
 * llama.cpp's llama-server with the model as a pool's pod, its model alias the pod's name (an
 * answer's `model` says which pod wrote it); received() counts the completions it finished
 * (its log's timing lines: it logs no request lines).
 */
export function llamaPoolServer (tools: { server: string, model: string }): StartPoolServer {
  return async (name, listen) => {
    const llama = await startLlamaServer({ kind: 'cpp', server: tools.server, model: tools.model, alias: name, ...(listen.address !== undefined ? { address: listen.address } : {}), ...(listen.port !== undefined ? { port: listen.port } : {}) })
    return { port: llama.port, host: llama.host, received: () => (llama.output().match(/total time =/g) ?? []).length, close: llama.close }
  }
}

/**
 * A server per name, each on its own IP (loopback addresses: Linux routes all of 127/8 to lo),
 * all on the same port (one targetPort of the pool: call it again for another port); three
 * tries at finding a port free on every address. Echo servers unless `start` says otherwise.
 */
export async function startPoolServers (names: string[], ips: string[], start: StartPoolServer = echoServer): Promise<PoolServer[]> {
  for (let attempt = 1; ; attempt++) {
    const first = await start(names[0]!, { address: ips[0] })
    const servers = [first]
    try {
      for (let i = 1; i < names.length; i++) servers.push(await start(names[i]!, { address: ips[i], port: first.port }))
      return servers
    } catch (err) {
      await Promise.all(servers.map(s => s.close()))
      if (attempt === 3) throw err
    }
  }
}

/**
 * This machine's first non-loopback IPv4 address: a picker Service's EndpointSlice names it
 * (the API server refuses loopback endpoints; lwepp listens on every address).
 */
export function hostIPv4 (): string | undefined {
  return Object.values(networkInterfaces()).flat().find(i => i !== undefined && i.family === 'IPv4' && !i.internal)?.address
}

/**
 * YAML for an endpoint picker's Service `name` (no selector) on `port`, and its EndpointSlice
 * `name-1` naming `address:port`, ready or not (not ready: the Service has no ready endpoint).
 */
export function pickerServiceYaml ({ namespace, name, port, address, ready = true }: { namespace: string, name: string, port: number, address: string, ready?: boolean }): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${namespace} }
spec: { ports: [{ name: grpc, port: ${port}, targetPort: ${port} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: ${namespace}, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: grpc, port: ${port} }]
endpoints: [{ addresses: [${address}], conditions: { ready: ${ready} } }]
`
}

export interface PoolSpec {
  namespace: string
  /** Its pods are labelled app=<name>. */
  name: string
  targetPorts: number[]
  /** endpointPickerRef (a Service and its port); null: none. */
  picker: { service: string, port: number, failureMode?: 'FailOpen' | 'FailClose' } | null
  appProtocol?: 'http' | 'kubernetes.io/h2c'
}

/** YAML for an InferencePool selecting app=<name>. */
export function poolYaml ({ namespace, name, targetPorts, picker, appProtocol }: PoolSpec): string {
  const ref = picker === null
    ? ''
    : `\n  endpointPickerRef: { name: ${picker.service}, port: { number: ${picker.port} }${picker.failureMode !== undefined ? `, failureMode: ${picker.failureMode}` : ''} }`
  return `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: ${name}, namespace: ${namespace} }
spec:
  selector: { matchLabels: { app: ${name} } }
  targetPorts: [${targetPorts.map(n => `{ number: ${n} }`).join(', ')}]${appProtocol !== undefined ? `\n  appProtocol: ${appProtocol}` : ''}${ref}
`
}

/** An HTTPRoute `llm` on the Gateway `web` sending `/v1` to the InferencePool `pool`. */
export function poolRouteYaml ({ namespace, pool }: { namespace: string, pool: string }): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: ${namespace} }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: inference.networking.k8s.io, kind: InferencePool, name: ${pool} }]
`
}

export type Condition = { type: string, status: string, reason: string, message: string }

/** An HTTPRoute's conditions for its first parent. */
export async function routeConditions (cluster: Cluster, namespace: string, name: string): Promise<Condition[]> {
  const route = await cluster.api<KubeObject>('GET', `/apis/gateway.networking.k8s.io/v1/namespaces/${namespace}/httproutes/${name}`)
  return (route.status?.parents?.[0]?.conditions ?? []) as Condition[]
}

export interface PoolParent { parentRef: Record<string, unknown>, controllerName: string, conditions: Condition[] }

/** An InferencePool's status.parents. */
export async function poolParents (cluster: Cluster, namespace: string, name: string): Promise<PoolParent[]> {
  return (await cluster.api<KubeObject>('GET', `/apis/inference.networking.k8s.io/v1/namespaces/${namespace}/inferencepools/${name}`)).status?.parents ?? []
}

/** The InferencePool CRD applied and Established. */
export async function installPoolCrd (cluster: Cluster, crd: string): Promise<void> {
  await cluster.kubectl(['apply', '--server-side', '--field-manager=portico-e2e', '-f', crd])
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/inferencepools.inference.networking.k8s.io'])
}

export interface PoolPods {
  namespace: string
  /** The pool's name: its pods are labelled app=<pool>, as its selector takes them. */
  pool: string
  /** The pods marked Ready, ... */
  names: string[]
  /** ... each at its IP. */
  ips: string[]
  /** The model servers' port (the pool's targetPort). */
  port: number
  /** Pods of the pool never marked Ready. */
  unready?: string[]
}

/** The pool's Pods (`names`, then `unready`), applied; `names` marked Ready at `ips`. */
export async function applyPoolPods (cluster: Cluster, { namespace, pool, names, ips, port, unready = [] }: PoolPods): Promise<void> {
  const pod = (name: string) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: pool } },
    spec: { containers: [{ name: 'echo', image: 'echo-basic', ports: [{ containerPort: port }] }] }
  })
  await cluster.apply([...names, ...unready].map(pod))
  for (const [i, name] of names.entries()) await cluster.markPodReady(namespace, name, ips[i]!)
}

export interface LweppPorts {
  /** Its ext_proc service (TLS, a self-signed certificate), on every address. */
  grpcPort: number
  healthPort: number
  metricsPort: number
}

/** Free ports for lwepp (the pool's endpointPickerRef names grpcPort before lwepp starts). */
export async function lweppPorts (): Promise<LweppPorts> {
  return { grpcPort: await freePort(), healthPort: await freePort(), metricsPort: await freePort() }
}

export interface Lwepp extends LweppPorts {
  proc: Proc
  /** What lwepp printed so far (its log), for failure messages. */
  output: () => string
  /** SIGTERM, then its exit (nothing when it has already exited). The caller registers it (t.after / after). */
  stop: () => Promise<void>
}

/** lwepp watching `pool` in `namespace` through the harness's kubeconfig, its log (lwepp-NS-POOL.log) in the cluster's folder. */
export function startLwepp (cluster: Cluster, lweppPath: string, { pool, namespace, ports }: { pool: string, namespace: string, ports: LweppPorts }): Lwepp {
  const proc = startProcess(`lwepp-${namespace}-${pool}`, lweppPath, [
    `--kubeconfig=${cluster.kubeconfig}`,
    `--pool-name=${pool}`,
    `--pool-namespace=${namespace}`,
    `--grpc-port=${ports.grpcPort}`,
    `--grpc-health-port=${ports.healthPort}`,
    `--metrics-port=${ports.metricsPort}`
  ], cluster.dir)
  return {
    ...ports,
    proc,
    output: () => { try { return readFileSync(proc.log, 'utf8') } catch { return '' } },
    stop: async () => {
      if (proc.exitCode() !== undefined) return
      proc.child.kill('SIGTERM')
      await proc.exited
    }
  }
}

/** A Gateway of class portico in a harness cluster with the extension on, its controller and its proxy (startInferenceGateway). */
export interface InferenceGateway {
  cluster: Cluster
  /** lwepp and the CRD. */
  tools: { lwepp: string, crd: string }
  /** Where the picker Services' EndpointSlices point (hostIPv4). */
  hostIP: string
  /** The Gateway `web` in `namespace`; its listener's port. */
  namespace: string
  gatewayPort: number
  /** The proxy's output, for failure messages. */
  proxyOutput: () => string
  /** The controller's output. */
  controllerOutput: () => string
  /** The endpoints (`ip:port`, sorted) of the pool `ns/name` in the proxy's config (its admin /config_dump). */
  proxyPoolEndpoints: (namespace: string, name: string) => Promise<string[]>
  /** The picker target (`host:port`) of the pool `ns/name` in the proxy's config. */
  proxyPoolPicker: (namespace: string, name: string) => Promise<{ target: string, failureMode: string } | undefined>
  /**
   * lwepp on `ports` (lweppPorts: the pool names ports.grpcPort) for the pool `ns/name` (apply
   * the pool first), and its picker Service `service` (pickerServiceYaml); stopped after the test.
   */
  startPicker: (namespace: string, pool: string, service: string, ports: LweppPorts) => Promise<Lwepp>
}

/**
 * What a cluster test of pools needs: lwepp and the CRD, the kube tools, and a non-loopback
 * IPv4 address for the picker Services' EndpointSlices (which refuse loopback). Null after
 * skipping (in CI, missing tools throw).
 */
export function requireInferenceTools (t: TestContext): { tools: { lwepp: string, crd: string }, kube: KubeTools, hostIP: string } | null {
  const tools = requireLwepp(t)
  if (tools === null) return null
  const kube = requireKubeTools(t)
  if (kube === null) return null
  const hostIP = hostIPv4()
  if (hostIP === undefined) {
    t.skip('no non-loopback IPv4 address on this machine (a picker\'s EndpointSlice needs one)')
    return null
  }
  return { tools, kube, hostIP }
}

export interface PoolCluster {
  suite: ClusterGateway
  cluster: Cluster
  tools: { lwepp: string, crd: string }
  hostIP: string
  /** The pods' servers (startPoolServers), closed after the test; [] when none were asked for. */
  pods: PoolServer[]
  /** Their one port (the pool's targetPort); 0 without pods. */
  targetPort: number
}

/**
 * How a pool test starts: its tools (requireInferenceTools), the pods' servers, the harness
 * cluster without kube-controller-manager or the fake kubelet (the test writes the pods, their
 * IPs and readiness: applyPoolPods) with `namespaces`, and the InferencePool CRD unless `crd`
 * is false; all stopped after `t`. Null after skipping.
 */
export async function startPoolCluster (t: TestContext, options: { dir: string, namespaces: string[], pods?: { names: string[], ips: string[] }, crd?: boolean }): Promise<PoolCluster | null> {
  const needs = requireInferenceTools(t)
  if (needs === null) return null
  const { tools, hostIP } = needs
  const pods = options.pods === undefined ? [] : await startPoolServers(options.pods.names, options.pods.ips)
  t.after(async () => { await Promise.all(pods.map(p => p.close())) })
  const suite = await startClusterGateway(t, { dir: options.dir, cluster: { controllerManager: false, fakeKubelet: false }, namespaces: options.namespaces })
  if (suite === null) return null
  t.after(async () => await suite.stop())
  if (options.crd !== false) await installPoolCrd(suite.cluster, tools.crd)
  return { suite, cluster: suite.cluster, tools, hostIP, pods, targetPort: pods[0]?.port ?? 0 }
}

/**
 * The harness cluster with the InferencePool CRD, `namespaces` created, Portico's controller
 * with INFERENCE_EXTENSION_ENABLED=true, the Gateway `web` (one HTTP listener) in the first
 * namespace and its proxy; everything stopped after `t`. Null after skipping (tools missing;
 * in CI that throws).
 */
export async function startInferenceGateway (t: TestContext, namespaces: string[]): Promise<InferenceGateway | null> {
  const pool = await startPoolCluster(t, { dir: 'portico-cluster-inference-', namespaces })
  if (pool === null) return null
  const { suite, cluster, tools, hostIP } = pool
  const namespace = namespaces[0]!
  const gatewayPort = await freePort()
  await cluster.apply(gatewayYaml(namespace, 'web', gatewayPort))
  const controller = await suite.startController({ env: { INFERENCE_EXTENSION_ENABLED: 'true', LEADER_ELECTION: 'false' } })
  const adminPort = await freePort()
  const proxy = await suite.startProxy(namespace, 'web', { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
  type Dump = { backends: Array<{ key: string, endpoints: Array<{ host: string, port: number }>, inferencePool?: { picker: { target: string, failureMode: string } } }> }
  const poolBackend = async (ns: string, name: string) => {
    const dump = await (await request(`http://127.0.0.1:${adminPort}/config_dump`)).body.json() as Dump
    return dump.backends.find(b => b.key.startsWith(`inferencepool/${ns}/${name}#`))
  }
  return {
    cluster,
    tools,
    hostIP,
    namespace,
    gatewayPort,
    proxyOutput: () => `${proxy.stdout.slice(-3000)}\n${proxy.stderr.slice(-3000)}`,
    controllerOutput: () => controller.output(),
    proxyPoolEndpoints: async (ns, name) => ((await poolBackend(ns, name))?.endpoints ?? []).map(e => `${e.host}:${e.port}`).sort(),
    proxyPoolPicker: async (ns, name) => {
      const picker = (await poolBackend(ns, name))?.inferencePool?.picker
      return picker === undefined ? undefined : { target: picker.target, failureMode: picker.failureMode }
    },
    startPicker: async (ns, pool, service, ports) => {
      await cluster.apply(pickerServiceYaml({ namespace: ns, name: service, port: ports.grpcPort, address: hostIP }))
      const lwepp = startLwepp(cluster, tools.lwepp, { pool, namespace: ns, ports })
      suite.defer(async () => await lwepp.stop())
      return lwepp
    }
  }
}

/** A POST of a small JSON body through the gateway; status, text and headers, or status 0 and the error when the connection failed. */
export async function postThrough (url: string, headers: Record<string, string> = {}, body = JSON.stringify({ model: 'smollm2', prompt: 'Hello' })): Promise<{ status: number, text: string, headers: Record<string, string | string[] | undefined> }> {
  try {
    const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
    return { status: res.statusCode, text: await res.body.text(), headers: res.headers }
  } catch (err) {
    return { status: 0, text: (err as Error).message, headers: {} }
  }
}
