/**
 * A real Kubernetes control plane for cluster-mode tests: etcd, kube-apiserver and (by default)
 * kube-controller-manager as child processes on random loopback ports, built from source by
 * `scripts/kube-tools` (see docs/cluster-testing.md). No kubelet and no scheduler: a small
 * "fake kubelet" in this process marks pods Running and Ready through the status subresource,
 * so Deployments get Ready pods and Services get EndpointSlices with those pods' IPs. It also
 * serves the kubelet's WebSocket port-forward, to wherever the `portForward` option says.
 *
 *   const cluster = await startCluster()
 *   await cluster.apply(yamlText)                      // kubectl apply --server-side
 *   const kc = cluster.kubeConfig()                    // @kubernetes/client-node, admin
 *   await cluster.stop()                               // also done on process exit
 *
 * The admin user is a static token in group system:masters (RBAC bypass); everything else,
 * the Helm chart's service accounts included, goes through RBAC.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpsServer, request as httpsRequest, type RequestOptions, type Server as HttpsServer } from 'node:https'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { connect as netConnect, type Socket } from 'node:net'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { KubeConfig } from '@kubernetes/client-node'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import { freePort } from '../lib/portico.ts'
import { requireTool } from '../lib/tools.ts'

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

// ---------------------------------------------------------------------------------------------
// Tools

export interface KubeTools {
  version: string
  apiserver: string
  controllerManager: string
  kubectl: string
  etcd: string
  /** Directory of the Gateway API standard CRD manifests. */
  gatewayApiCrds: string
}

const TOOL_ENV = {
  apiserver: 'KUBE_APISERVER',
  controllerManager: 'KUBE_CONTROLLER_MANAGER',
  kubectl: 'KUBECTL',
  etcd: 'ETCD',
  gatewayApiCrds: 'GATEWAY_API_CRDS'
} as const

/** The default versions, read from scripts/kube-tools so they are written down once. */
function scriptDefault (variable: string): string | null {
  try {
    const text = readFileSync(join(REPO_ROOT, 'scripts/kube-tools'), 'utf8')
    const match = new RegExp(`\\$\\{${variable}:-([^}]+)\\}`).exec(text)
    return match?.[1] ?? null
  } catch {
    return null
  }
}

/**
 * Paths from the environment `scripts/kube-tools` prints (KUBE_APISERVER, ...), or else from
 * its cache (~/.cache/portico/kube-<version>/), so a test file run by hand works after the
 * script ran once. Missing ones are left out.
 */
export function findKubeTools (): Partial<KubeTools> {
  const version = process.env.KUBE_VERSION ?? process.env.PORTICO_KUBE_VERSION ?? scriptDefault('PORTICO_KUBE_VERSION') ?? ''
  const gatewayVersion = process.env.PORTICO_GATEWAY_API_VERSION ?? scriptDefault('PORTICO_GATEWAY_API_VERSION') ?? ''
  const cacheRoot = process.env.PORTICO_CACHE ?? join(homedir(), '.cache/portico')
  const dir = join(cacheRoot, `kube-${version}`)
  const cached: KubeTools = {
    version,
    apiserver: join(dir, 'kube-apiserver'),
    controllerManager: join(dir, 'kube-controller-manager'),
    kubectl: join(dir, 'kubectl'),
    etcd: join(dir, 'etcd'),
    gatewayApiCrds: join(dir, `gateway-api-${gatewayVersion}`)
  }
  const found: Partial<KubeTools> = { version }
  for (const key of Object.keys(TOOL_ENV) as Array<keyof typeof TOOL_ENV>) {
    const fromEnv = process.env[TOOL_ENV[key]]
    if (fromEnv !== undefined && fromEnv !== '') found[key] = fromEnv
    else if (existsSync(cached[key])) found[key] = cached[key]
  }
  return found
}

/**
 * The tools, or null after skipping the test (locally) / throwing (CI=true) through
 * requireTool, with the hint to run scripts/kube-tools.
 */
export function requireKubeTools (t: TestContext): KubeTools | null {
  const found = findKubeTools()
  for (const key of Object.keys(TOOL_ENV) as Array<keyof typeof TOOL_ENV>) {
    const envName = TOOL_ENV[key]
    // requireTool reads the environment first: hand it what the cache has.
    if (found[key] !== undefined) process.env[envName] = found[key]
    if (key === 'gatewayApiCrds') {
      if (found[key] === undefined) {
        const why = `Gateway API CRDs not found: run ./scripts/kube-tools or set ${envName}`
        if (process.env.CI === 'true') throw new Error(why)
        t.skip(why)
        return null
      }
      continue
    }
    const command = { apiserver: 'kube-apiserver', controllerManager: 'kube-controller-manager', kubectl: 'kubectl', etcd: 'etcd' }[key]
    const path = requireTool(t, envName, command)
    if (path === null) return null
    found[key] = path
  }
  return found as KubeTools
}

// ---------------------------------------------------------------------------------------------
// Cluster

export interface ClusterOptions {
  /** Tools to run (default: findKubeTools(); a missing one throws). */
  tools?: KubeTools
  /** Run kube-controller-manager (Deployments → Pods, EndpointSlices, GC, SA tokens). Default true. */
  controllerManager?: boolean
  /**
   * Bind every pod to a fake Node and mark it Running and Ready (there is no kubelet nor
   * scheduler). Default true. A function chooses each pod's IP (default: documentationAddresses();
   * never loopback, which EndpointSlices reject).
   */
  fakeKubelet?: boolean | { podIP?: (pod: KubeObject) => string, runtime?: PodRuntime }
  /**
   * Port-forwarding to pods (`pods/portforward`, WebSocket protocol only): where the fake
   * kubelet connects for a pod's port, or null to refuse (the default: every port is refused,
   * reported on the error channel as a kubelet does when nothing listens). Only with the fake
   * kubelet.
   */
  portForward?: (pod: KubeObject, port: number) => { host: string, port: number } | null
  /**
   * Install the Gateway API CRDs and wait until they are Established. Default true (the
   * standard channel from the kube tools); a string is a directory of CRD manifests to install
   * instead (e.g. the experimental channel).
   */
  gatewayApiCrds?: boolean | string
  /** Extra kube-apiserver flags (`--name=value`). */
  apiserverArgs?: string[]
  startTimeoutMs?: number
}

/**
 * kube-apiserver flags that serve ClusterTrustBundle (certificates.k8s.io/v1beta1 in Kubernetes
 * 1.36: beta, off unless its feature gate and API version are turned on). The controller claims
 * the ClusterTrustBundle feature only when the kind is served.
 */
export const CLUSTER_TRUST_BUNDLE_APISERVER_ARGS = ['--feature-gates=ClusterTrustBundle=true', '--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true']

/**
 * What runs a pod's containers for the fake kubelet (default: nothing runs; pods are only
 * marked Ready). `start` is awaited before the pod is reported Ready with `podIP`; `stop`
 * before a deleted pod's deletion is completed (and when the cluster stops). `logs` serves
 * `pods/log` (the API server proxies it to the kubelet's /containerLogs).
 */
export interface PodRuntime {
  start: (pod: KubeObject, podIP: string) => Promise<void>
  stop: (pod: KubeObject) => Promise<void>
  logs: (namespace: string, pod: string, container: string) => string | null
  stopAll: () => Promise<void>
}

export interface KubeObject {
  apiVersion?: string
  kind?: string
  metadata?: { name?: string, namespace?: string, uid?: string, resourceVersion?: string, labels?: Record<string, string>, deletionTimestamp?: string, [k: string]: unknown }
  spec?: any
  status?: any
  [k: string]: unknown
}

export class KubeApiError extends Error {
  readonly status: number
  readonly body: string
  constructor (method: string, path: string, status: number, body: string) {
    let message = body
    try { message = (JSON.parse(body) as { message?: string }).message ?? body } catch {}
    super(`${method} ${path}: ${status} ${message}`)
    this.status = status
    this.body = body
  }
}

export interface Cluster {
  /** kube-apiserver's gitVersion, e.g. v1.36.3. */
  version: string
  /** https://127.0.0.1:PORT */
  server: string
  /** Admin kubeconfig file (token user in system:masters, CA file). */
  kubeconfig: string
  /** CA that signed the serving certificate (PEM file). */
  caFile: string
  /** The CA's key, for tests that sign their own certificates. */
  caKeyFile: string
  /** Admin bearer token. */
  token: string
  /** The service-account token issuer (`iss` of minted tokens). */
  serviceAccountIssuer: string
  /** Temp directory with certs, logs (etcd.log, kube-apiserver.log, ...) and etcd data. */
  dir: string
  tools: KubeTools
  /** A client-node KubeConfig for the admin user. */
  kubeConfig: () => KubeConfig
  /** Raw API call as admin; JSON in and out. Throws KubeApiError on a non-2xx status. */
  api: <T = any>(method: string, path: string, body?: unknown, options?: { contentType?: string }) => Promise<T>
  /** Server-side apply of YAML text (one or more documents) or objects; returns kubectl's output. */
  apply: (input: string | KubeObject | KubeObject[]) => Promise<string>
  /** Runs the built kubectl against this cluster; resolves with stdout, rejects with stderr. */
  kubectl: (args: string[], options?: { input?: string }) => Promise<string>
  /** Mints a service-account token with the TokenRequest API. */
  createToken: (namespace: string, serviceAccount: string, options?: { audiences?: string[], expirationSeconds?: number }) => Promise<string>
  /**
   * Creates (applies) a namespace and, when kube-controller-manager runs, waits for its
   * `default` ServiceAccount, which the ServiceAccount admission plugin requires of pods.
   */
  createNamespace: (name: string, labels?: Record<string, string>) => Promise<void>
  /** Waits until `count` pods matching the selector are Ready (the fake kubelet's work). */
  waitForReadyPods: (namespace: string, labelSelector: string, count: number, timeoutMs?: number) => Promise<KubeObject[]>
  /** Binds one pod to the fake node and marks it Running/Ready (what the fake kubelet does; for fakeKubelet: false). */
  markPodReady: (namespace: string, name: string, podIP: string) => Promise<void>
  stop: () => Promise<void>
}

export interface Proc {
  name: string
  child: ChildProcess
  log: string
  exited: Promise<void>
  exitCode: () => number | null | undefined
}

const live = new Set<{ procs: Proc[], dir: string }>()
let signalHandlersInstalled = false

function killAllSync (): void {
  for (const entry of live) {
    for (const proc of entry.procs) {
      if (proc.exitCode() === undefined) proc.child.kill('SIGKILL')
    }
    rmSync(entry.dir, { recursive: true, force: true })
  }
  live.clear()
}

process.on('exit', killAllSync)

function installSignalHandlers (): void {
  if (signalHandlersInstalled) return
  signalHandlersInstalled = true
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const handler = (): void => {
      killAllSync()
      process.removeListener(signal, handler)
      // Only ours was listening: re-raise for the default action (exit by that signal).
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    }
    process.on(signal, handler)
  }
}

// setpriv --pdeathsig: children die with this process even when it is SIGKILLed.
// startProcess is also how a test runs a program beside the cluster (an endpoint picker):
// its output in `dir`/NAME.log, killed with the test process.
const setpriv = spawnSync('setpriv', ['--help'], { stdio: 'pipe' })
const SETPRIV = setpriv.error === undefined && String(setpriv.stdout).includes('--pdeathsig') ? 'setpriv' : null

// `cwd`: for programs that read paths relative to their working directory (istiod's ./etc/...).
export function startProcess (name: string, command: string, args: string[], dir: string, env?: NodeJS.ProcessEnv, cwd?: string): Proc {
  const log = join(dir, `${name}.log`)
  const fd = openSync(log, 'a')
  const [file, argv] = SETPRIV !== null ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', command, ...args]] : [command, args]
  const child = spawn(file, argv, { stdio: ['ignore', fd, fd], env: env ?? process.env, cwd })
  closeSync(fd)
  let code: number | null | undefined
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (c, signal) => { code = c ?? (signal !== null ? -1 : null); resolve() })
    child.on('error', () => { code = -1; resolve() })
  })
  child.unref()
  return { name, child, log, exited, exitCode: () => code }
}

function tail (file: string, lines = 25): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return ''
  }
}

function openssl (args: string[], cwd: string): void {
  const result = spawnSync('openssl', args, { cwd, stdio: 'pipe' })
  if (result.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${String(result.stderr)}`)
}

/** CA, apiserver serving cert (127.0.0.1, localhost, kubernetes.default.svc...), SA key pair. */
function makeCerts (dir: string, serviceIP: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '7', '-subj', '/CN=portico-test-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir)
  const sans = ['IP:127.0.0.1', `IP:${serviceIP}`, 'DNS:localhost', 'DNS:kubernetes', 'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc', 'DNS:kubernetes.default.svc.cluster.local'].join(',')
  openssl(['req', '-x509', ...ec, '-keyout', 'apiserver.key', '-out', 'apiserver.crt', '-days', '7',
    '-CA', 'ca.crt', '-CAkey', 'ca.key', '-subj', '/CN=kube-apiserver',
    '-addext', `subjectAltName=${sans}`, '-addext', 'basicConstraints=critical,CA:FALSE',
    '-addext', 'keyUsage=critical,digitalSignature,keyEncipherment', '-addext', 'extendedKeyUsage=serverAuth'], dir)
  // The fake kubelet's serving cert (the API server verifies it: --kubelet-certificate-authority).
  openssl(['req', '-x509', ...ec, '-keyout', 'kubelet.key', '-out', 'kubelet.crt', '-days', '7',
    '-CA', 'ca.crt', '-CAkey', 'ca.key', '-subj', '/CN=portico-fake-node',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:portico-fake-node', '-addext', 'basicConstraints=critical,CA:FALSE',
    '-addext', 'keyUsage=critical,digitalSignature,keyEncipherment', '-addext', 'extendedKeyUsage=serverAuth'], dir)
  openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'sa.key'], dir)
  openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir)
}

interface Transport {
  server: string
  ca: string
  token: string
}

function rawRequest (tr: Transport, method: string, path: string, body?: string, contentType = 'application/json'): Promise<{ status: number, body: string }> {
  const url = new URL(path, tr.server)
  const options: RequestOptions = {
    method,
    hostname: url.hostname,
    port: url.port,
    path: url.pathname + url.search,
    ca: tr.ca,
    agent: false,
    headers: {
      authorization: `Bearer ${tr.token}`,
      accept: 'application/json',
      ...(body !== undefined ? { 'content-type': contentType, 'content-length': Buffer.byteLength(body) } : {})
    }
  }
  return new Promise((resolve, reject) => {
    const req = httpsRequest(options, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: timed out`)))
    req.on('error', reject)
    req.end(body)
  })
}

async function apiCall<T> (tr: Transport, method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body)
  const res = await rawRequest(tr, method, path, text, contentType)
  if (res.status < 200 || res.status > 299) throw new KubeApiError(method, path, res.status, res.body)
  return (res.body === '' ? undefined : JSON.parse(res.body)) as T
}

const sleep = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

async function until<T> (what: string, timeoutMs: number, check: () => Promise<T | undefined | null | false>, procs: Proc[] = []): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    for (const proc of procs) {
      if (proc.exitCode() !== undefined) throw new ExitedEarly(proc)
    }
    try {
      const value = await check()
      if (value !== undefined && value !== null && value !== false) return value
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last !== undefined ? `: ${String(last)}` : ''}`)
    }
    await sleep(100)
  }
}

class ExitedEarly extends Error {
  readonly proc: Proc
  constructor (proc: Proc) {
    super(`${proc.name} exited (code ${String(proc.exitCode())}):\n${tail(proc.log)}`)
    this.proc = proc
  }
}

async function etcdHealthy (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/health', agent: false }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => { text += c.toString() })
      res.on('end', () => resolve(res.statusCode === 200 && text.includes('true')))
    })
    req.on('error', () => resolve(false))
    req.setTimeout(2000, () => req.destroy())
    req.end()
  })
}

function kubeconfigYaml (server: string, caFile: string, token: string): string {
  // JSON is YAML; kubectl and client-node read either.
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'portico-test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: 'admin', user: { token } }],
    contexts: [{ name: 'portico-test', context: { cluster: 'portico-test', user: 'admin', namespace: 'default' } }],
    'current-context': 'portico-test'
  }, null, 2) + '\n'
}

function podIsReady (pod: KubeObject): boolean {
  return pod.status?.phase === 'Running' &&
    (pod.status?.conditions ?? []).some((c: { type: string, status: string }) => c.type === 'Ready' && c.status === 'True')
}

function readyStatus (pod: KubeObject, podIP: string): object {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
  const condition = (type: string): object => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: now })
  const containers = (list: Array<{ name: string, image?: string }> | undefined): object[] => (list ?? []).map((c) => ({
    name: c.name,
    image: c.image ?? '',
    imageID: '',
    containerID: `fake://${pod.metadata?.uid ?? ''}/${c.name}`,
    ready: true,
    started: true,
    restartCount: 0,
    state: { running: { startedAt: now } }
  }))
  return {
    status: {
      phase: 'Running',
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP,
      podIPs: [{ ip: podIP }],
      startTime: now,
      conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
      containerStatuses: containers(pod.spec?.containers)
    }
  }
}

export const FAKE_NODE = 'portico-fake-node'

/**
 * Pod IPs 192.0.2.1, .2, ... then 198.51.100.x, 203.0.113.x (RFC 5737 documentation ranges).
 * EndpointSlices reject loopback addresses, so pods cannot have 127.x IPs; these are never
 * routed anywhere, and nothing listens on them: a test must not send traffic to a pod IP
 * unless it has made the address local itself (e.g. inside its own network namespace).
 */
export function documentationAddresses (): () => string {
  const nets = ['192.0.2', '198.51.100', '203.0.113']
  let n = 0
  return () => {
    const i = n++ % (nets.length * 254)
    return `${nets[Math.floor(i / 254)] ?? nets[0]}.${(i % 254) + 1}`
  }
}

/**
 * The Node pods are bound to: the EndpointSlice controller skips pods whose node does not
 * exist. Ready, never heartbeating (the node-lifecycle controller is off, so it stays Ready).
 */
async function ensureNode (tr: Transport, kubeletPort?: number): Promise<void> {
  try {
    await apiCall(tr, 'POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: FAKE_NODE, labels: { 'kubernetes.io/hostname': FAKE_NODE, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } }
    })
  } catch (err) {
    if (!(err instanceof KubeApiError && err.status === 409)) throw err
  }
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
  const resources = { cpu: '32', memory: '64Gi', pods: '1000', 'ephemeral-storage': '100Gi' }
  await apiCall(tr, 'PATCH', `/api/v1/nodes/${FAKE_NODE}/status`, {
    status: {
      capacity: resources,
      allocatable: resources,
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: FAKE_NODE }],
      ...(kubeletPort !== undefined ? { daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } } } : {}),
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'fake kubelet', lastHeartbeatTime: now, lastTransitionTime: now }],
      nodeInfo: { kubeletVersion: 'fake', architecture: 'amd64', operatingSystem: 'linux', containerRuntimeVersion: 'fake://0', kernelVersion: '', osImage: '', kubeProxyVersion: '', machineID: '', systemUUID: '', bootID: '' }
    }
  }, 'application/merge-patch+json')
}

/** What the scheduler and a kubelet would do: bind to the fake node, then report Ready. */
async function makePodReady (tr: Transport, pod: KubeObject, podIP: string): Promise<void> {
  const ns = pod.metadata?.namespace ?? 'default'
  const name = pod.metadata?.name ?? ''
  if (pod.spec?.nodeName === undefined || pod.spec.nodeName === '') {
    await apiCall(tr, 'POST', `/api/v1/namespaces/${ns}/pods/${name}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name },
      target: { apiVersion: 'v1', kind: 'Node', name: FAKE_NODE }
    })
  }
  await apiCall(tr, 'PATCH', `/api/v1/namespaces/${ns}/pods/${name}/status`, readyStatus(pod, podIP), 'application/merge-patch+json')
}

/** What a kubelet does once a bound pod is marked for deletion: its containers are gone. */
async function finishDeletion (tr: Transport, pod: KubeObject): Promise<void> {
  const ns = pod.metadata?.namespace ?? 'default'
  await apiCall(tr, 'DELETE', `/api/v1/namespaces/${ns}/pods/${pod.metadata?.name ?? ''}`, {
    apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0, preconditions: { uid: pod.metadata?.uid }
  })
}

/**
 * List + watch all pods: binds each new pod to the fake node and marks it Running/Ready;
 * completes the graceful deletion of deleted ones.
 */
class FakeKubelet {
  private stopped = false
  private current: ReturnType<typeof httpsRequest> | null = null
  private readonly busy = new Set<string>()
  private readonly tr: Transport
  private readonly podIP: (pod: KubeObject) => string
  private readonly runtime: PodRuntime | undefined
  private readonly ips = new Map<string, string>()

  constructor (tr: Transport, podIP: (pod: KubeObject) => string, runtime?: PodRuntime) {
    this.tr = tr
    this.podIP = podIP
    this.runtime = runtime
    void this.loop()
  }

  stop (): void {
    this.stopped = true
    this.current?.destroy()
  }

  private handle (pod: KubeObject): void {
    const uid = pod.metadata?.uid ?? ''
    if (this.stopped || this.busy.has(uid)) return
    const bound = pod.spec?.nodeName !== undefined && pod.spec.nodeName !== ''
    let work: Promise<void>
    if (pod.metadata?.deletionTimestamp !== undefined) {
      if (!bound || pod.spec.nodeName !== FAKE_NODE) return
      work = (this.runtime?.stop(pod) ?? Promise.resolve()).then(async () => await finishDeletion(this.tr, pod))
    } else {
      if ((bound && podIsReady(pod)) || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return
      if (bound && pod.spec.nodeName !== FAKE_NODE) return
      // One IP per pod for its life: a retry after a conflict must not move it.
      let ip = this.ips.get(uid)
      if (ip === undefined) this.ips.set(uid, ip = this.podIP(pod))
      const podIP = ip
      work = (this.runtime?.start(pod, podIP) ?? Promise.resolve()).then(async () => await makePodReady(this.tr, pod, podIP))
    }
    this.busy.add(uid)
    work
      .catch(() => {
        // Changed meanwhile: look again at its current state shortly (gone: 404, nothing to do).
        setTimeout(() => {
          const path = `/api/v1/namespaces/${pod.metadata?.namespace ?? ''}/pods/${pod.metadata?.name ?? ''}`
          apiCall<KubeObject>(this.tr, 'GET', path).then((fresh) => {
            if (fresh.metadata?.uid === uid) this.handle(fresh)
          }, () => {})
        }, 300).unref()
      })
      .finally(() => this.busy.delete(uid))
  }

  private async loop (): Promise<void> {
    while (!this.stopped) {
      try {
        const list = await apiCall<{ metadata: { resourceVersion: string }, items: KubeObject[] }>(this.tr, 'GET', '/api/v1/pods')
        for (const pod of list.items) this.handle(pod)
        await this.watch(list.metadata.resourceVersion)
      } catch {}
      if (!this.stopped) await sleep(200)
    }
  }

  private async watch (resourceVersion: string): Promise<void> {
    const url = new URL(`/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=${resourceVersion}`, this.tr.server)
    await new Promise<void>((resolve) => {
      const req = httpsRequest({
        hostname: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        ca: this.tr.ca,
        agent: false,
        headers: { authorization: `Bearer ${this.tr.token}` }
      }, (res) => {
        let buffer = ''
        res.on('data', (chunk: Buffer) => {
          buffer += chunk.toString('utf8')
          let nl
          while ((nl = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, nl)
            buffer = buffer.slice(nl + 1)
            try {
              const event = JSON.parse(line) as { type: string, object: KubeObject }
              if (event.type === 'ADDED' || event.type === 'MODIFIED') this.handle(event.object)
              // Deleted without a grace period: its processes go too.
              else if (event.type === 'DELETED') this.runtime?.stop(event.object).catch(() => {})
            } catch {}
          }
        })
        res.on('end', resolve)
        res.on('error', () => resolve())
      })
      req.on('socket', (socket) => socket.unref())
      req.on('error', () => resolve())
      req.on('close', () => resolve())
      this.current = req
      req.end()
    })
  }
}

type PortForwardHook = (pod: KubeObject, port: number) => { host: string, port: number } | null

/**
 * The fake kubelet's HTTPS endpoint (the Node's kubeletEndpoint): WebSocket port-forward only,
 * `/portForward/NS/POD[/UID]?port=P&port=Q`, which the API server proxies unchanged for a client
 * speaking `v4.channel.k8s.io` (client-node, kubectl with websockets). As the kubelet's
 * pkg/kubelet/cri/streaming/portforward/websocket.go: channels 2i (data) and 2i+1 (error) for
 * the i-th port, every binary frame prefixed by its channel byte, and the first frame of each
 * channel is the port (uint16 little-endian). The hook says where a pod's port really is.
 */
async function startKubeletServer (tr: Transport, dir: string, hook: PortForwardHook, runtime?: PodRuntime): Promise<{ server: HttpsServer, port: number }> {
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => {
      for (const p of ['v4.channel.k8s.io', 'channel.k8s.io']) if (offered.has(p)) return p
      return false
    }
  })
  const server = createHttpsServer({ cert: readFileSync(join(dir, 'kubelet.crt')), key: readFileSync(join(dir, 'kubelet.key')) }, (req, res) => {
    // `pods/log`: the API server asks GET /containerLogs/NS/POD/CONTAINER (?tailLines, ...).
    const logs = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/?]+)/.exec(req.url ?? '')
    const text = logs !== null && runtime !== undefined ? runtime.logs(decodeURIComponent(logs[1]!), decodeURIComponent(logs[2]!), decodeURIComponent(logs[3]!)) : null
    if (text !== null) {
      const tailLines = Number(new URL(req.url ?? '/', 'https://kubelet').searchParams.get('tailLines') ?? NaN)
      const lines = text.split('\n')
      if (lines.at(-1) === '') lines.pop()
      const out = Number.isInteger(tailLines) && tailLines >= 0 ? lines.slice(Math.max(0, lines.length - tailLines)) : lines
      res.writeHead(200, { 'content-type': 'text/plain' }).end(out.map(l => l + '\n').join(''))
      return
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('fake kubelet: port-forward and the logs of pods it runs only\n')
  })
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on('error', () => {})
    const refuse = (status: number, message: string): void => {
      socket.end(`HTTP/1.1 ${status} ${status === 404 ? 'Not Found' : 'Bad Request'}\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(message)}\r\n\r\n${message}`)
    }
    const url = new URL(req.url ?? '/', 'https://kubelet')
    const match = /^\/portForward\/([^/]+)\/([^/]+)(?:\/[^/]+)?$/.exec(url.pathname)
    // The API server passes the client's `ports` on as `port` (api.PortHeader).
    const ports = [...url.searchParams.getAll('port'), ...url.searchParams.getAll('ports')].flatMap((v) => v.split(',')).map((v) => Number(v.trim()))
    if (match === null) return refuse(404, 'not found')
    if (ports.length === 0 || ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65535)) return refuse(400, 'invalid ports')
    const [ns, name] = [decodeURIComponent(match[1] ?? ''), decodeURIComponent(match[2] ?? '')]
    apiCall<KubeObject>(tr, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`).then((pod) => {
      wss.handleUpgrade(req, socket, head, (ws) => forwardPorts(ws, pod, ports, hook))
    }, (err) => refuse(404, String(err)))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve())
  })
  server.unref()
  const address = server.address()
  return { server, port: typeof address === 'object' && address !== null ? address.port : 0 }
}

function forwardPorts (ws: WebSocket, pod: KubeObject, ports: number[], hook: PortForwardHook): void {
  const frame = (channel: number, data: Buffer | string): Buffer => Buffer.concat([Buffer.from([channel]), Buffer.from(data)])
  const conns: Array<Socket | null> = []
  let open = ports.length
  const done = (): void => { if (--open === 0) ws.close() }
  ports.forEach((port, i) => {
    const portBytes = Buffer.alloc(2)
    portBytes.writeUInt16LE(port)
    ws.send(frame(2 * i, portBytes))
    ws.send(frame(2 * i + 1, portBytes))
    const target = hook(pod, port)
    const fail = (why: string): void => {
      conns[i] = null
      ws.send(frame(2 * i + 1, `an error occurred forwarding ${port} -> ${port}: ${why}`))
      done()
    }
    if (target === null) {
      fail(`fake kubelet: nothing listens on port ${port} in pod ${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`)
      return
    }
    const conn = netConnect({ host: target.host, port: target.port })
    conns[i] = conn
    let connected = false
    conn.on('connect', () => { connected = true })
    conn.on('data', (data: Buffer) => { if (ws.readyState === ws.OPEN) ws.send(frame(2 * i, data)) })
    conn.on('error', (err) => { if (!connected) fail(err.message) })
    conn.on('close', () => { if (connected) done() })
  })
  ws.on('message', (data: RawData, isBinary: boolean) => {
    if (!isBinary) return
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer)
    const channel = buf[0] ?? 255
    if (channel % 2 === 0) conns[channel / 2]?.write(buf.subarray(1))
  })
  ws.on('close', () => { for (const c of conns) c?.destroy() })
  ws.on('error', () => {})
}

async function runKubectl (kubectl: string, baseArgs: string[], args: string[], input?: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const child = spawn(kubectl, [...baseArgs, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
    const out: Buffer[] = []
    const err: Buffer[] = []
    child.stdout.on('data', (c: Buffer) => out.push(c))
    child.stderr.on('data', (c: Buffer) => err.push(c))
    child.on('error', reject)
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8')
      if (code === 0) resolve(stdout)
      else reject(new Error(`kubectl ${args.join(' ')} exited ${String(code)}: ${Buffer.concat(err).toString('utf8')}${stdout}`))
    })
    child.stdin.end(input ?? '')
  })
}

function toManifest (input: string | KubeObject | KubeObject[]): string {
  if (typeof input === 'string') return input
  const items = Array.isArray(input) ? input : [input]
  return items.map((o) => JSON.stringify(o)).join('\n---\n') + '\n'
}

const SERVICE_CIDR = '10.96.0.0/16' // allocated ClusterIPs only: nothing is ever sent there
const SERVICE_IP = '10.96.0.1'
const ISSUER = 'https://kubernetes.default.svc.cluster.local'

/** Starts etcd, kube-apiserver (and kube-controller-manager); see the module comment. */
export async function startCluster (options: ClusterOptions = {}): Promise<Cluster> {
  const tools = options.tools ?? toolsOrThrow()
  const timeout = options.startTimeoutMs ?? 60_000
  let lastError: unknown
  // A port picked as free can be taken before the process binds it: retry with new ones.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(tools, options, timeout)
    } catch (err) {
      lastError = err
      if (!(err instanceof ExitedEarly) || !/address already in use/.test(err.message)) throw err
    }
  }
  throw lastError
}

function toolsOrThrow (): KubeTools {
  const found = findKubeTools()
  const missing = (Object.keys(TOOL_ENV) as Array<keyof typeof TOOL_ENV>).filter((k) => found[k] === undefined)
  if (missing.length > 0) {
    throw new Error(`kube tools missing (${missing.map((k) => TOOL_ENV[k]).join(', ')}): run ./scripts/kube-tools`)
  }
  return found as KubeTools
}

async function startOnce (tools: KubeTools, options: ClusterOptions, timeout: number): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'portico-kube-'))
  const procs: Proc[] = []
  const entry = { procs, dir }
  live.add(entry)
  installSignalHandlers()
  let kubelet: FakeKubelet | null = null
  let kubeletServer: HttpsServer | null = null
  const runtime = typeof options.fakeKubelet === 'object' ? options.fakeKubelet.runtime : undefined

  const stop = async (): Promise<void> => {
    kubelet?.stop()
    await runtime?.stopAll().catch(() => {})
    kubeletServer?.close()
    kubeletServer?.closeAllConnections()
    // Nothing is kept, so no graceful shutdown (the API server's takes seconds): SIGKILL,
    // controllers first, and wait for each (ref'd again, so the wait keeps the process alive).
    for (const name of ['kube-controller-manager', 'kube-apiserver', 'etcd']) {
      for (const p of procs.filter((p) => p.name === name && p.exitCode() === undefined)) {
        p.child.ref()
        p.child.kill('SIGKILL')
        await p.exited
      }
    }
    rmSync(dir, { recursive: true, force: true })
    live.delete(entry)
  }

  try {
    makeCerts(dir, SERVICE_IP)
    const token = randomBytes(24).toString('hex')
    writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin-uid,"system:masters"\n`)

    const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()]
    const etcd = startProcess('etcd', tools.etcd, [
      '--name=default',
      `--data-dir=${join(dir, 'etcd-data')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn'
    ], dir)
    procs.push(etcd)
    await until('etcd /health', timeout, async () => await etcdHealthy(etcdPort), procs)

    const caFile = join(dir, 'ca.crt')
    const server = `https://127.0.0.1:${apiPort}`
    const apiserver = startProcess('kube-apiserver', tools.apiserver, [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${join(dir, 'apiserver.crt')}`,
      `--tls-private-key-file=${join(dir, 'apiserver.key')}`,
      `--client-ca-file=${caFile}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      `--service-account-issuer=${ISSUER}`,
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--authorization-mode=RBAC',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // The "kubernetes" Service's endpoints would be 127.0.0.1, which Endpoints reject.
      '--endpoint-reconciler-type=none',
      '--allow-privileged=true',
      '--profiling=false',
      // The fake kubelet's endpoint (port-forward): the Node's InternalIP, its cert from our CA.
      '--kubelet-preferred-address-types=InternalIP',
      `--kubelet-certificate-authority=${caFile}`,
      // Without the controller manager nobody creates `default` service accounts, which the
      // ServiceAccount admission plugin would require of every pod.
      ...(options.controllerManager === false ? ['--disable-admission-plugins=ServiceAccount'] : []),
      ...(options.apiserverArgs ?? [])
    ], dir)
    procs.push(apiserver)

    const tr: Transport = { server, ca: readFileSync(caFile, 'utf8'), token }
    await until('kube-apiserver /readyz', timeout, async () => (await rawRequest(tr, 'GET', '/readyz')).status === 200, procs)
    const version = (await apiCall<{ gitVersion: string }>(tr, 'GET', '/version')).gitVersion

    const kubeconfig = join(dir, 'kubeconfig')
    writeFileSync(kubeconfig, kubeconfigYaml(server, caFile, token), { mode: 0o600 })
    const kubectlBase = ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kubectl-cache')]
    const kubectl = async (args: string[], opts: { input?: string } = {}): Promise<string> =>
      await runKubectl(tools.kubectl, kubectlBase, args, opts.input)
    const apply = async (input: string | KubeObject | KubeObject[]): Promise<string> =>
      await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=portico-e2e', '-f', '-'], { input: toManifest(input) })

    if (options.controllerManager !== false) {
      procs.push(startProcess('kube-controller-manager', tools.controllerManager, [
        `--kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        '--secure-port=0',
        '--use-service-account-credentials=false',
        `--service-account-private-key-file=${join(dir, 'sa.key')}`,
        `--root-ca-file=${caFile}`,
        `--cluster-signing-cert-file=${caFile}`,
        `--cluster-signing-key-file=${join(dir, 'ca.key')}`,
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        // Nothing heartbeats for the fake node: keep it Ready and its pods in place.
        '--controllers=*,-node-lifecycle-controller'
      ], dir))
    }

    if (options.gatewayApiCrds !== false) {
      const crds = typeof options.gatewayApiCrds === 'string' ? options.gatewayApiCrds : tools.gatewayApiCrds
      await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=portico-e2e', '-f', crds])
      await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all'])
      // Established, and served: discovery lists the kinds tests create.
      await until('Gateway API discovery', timeout, async () => {
        const list = await apiCall<{ resources: Array<{ name: string }> }>(tr, 'GET', '/apis/gateway.networking.k8s.io/v1')
        const names = new Set(list.resources.map((r) => r.name))
        return ['gatewayclasses', 'gateways', 'httproutes', 'grpcroutes', 'referencegrants'].every((n) => names.has(n))
      }, procs)
    }

    if (options.fakeKubelet !== false) {
      const choose = typeof options.fakeKubelet === 'object' && options.fakeKubelet.podIP !== undefined
        ? options.fakeKubelet.podIP
        : documentationAddresses()
      const started = await startKubeletServer(tr, dir, options.portForward ?? (() => null), runtime)
      kubeletServer = started.server
      await ensureNode(tr, started.port)
      kubelet = new FakeKubelet(tr, choose, runtime)
    }

    const api = async <T = any>(method: string, path: string, body?: unknown, opts: { contentType?: string } = {}): Promise<T> =>
      await apiCall<T>(tr, method, path, body, opts.contentType)

    return {
      version,
      server,
      kubeconfig,
      caFile,
      caKeyFile: join(dir, 'ca.key'),
      token,
      serviceAccountIssuer: ISSUER,
      dir,
      tools,
      kubeConfig: () => {
        const kc = new KubeConfig()
        kc.loadFromFile(kubeconfig)
        return kc
      },
      api,
      apply,
      kubectl,
      createToken: async (namespace, serviceAccount, opts = {}) => {
        const res = await api<{ status: { token: string } }>('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { audiences: opts.audiences ?? ['portico'], expirationSeconds: opts.expirationSeconds ?? 3600 }
        })
        return res.status.token
      },
      createNamespace: async (name, labels = {}) => {
        await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } })
        if (options.controllerManager === false) return
        await until(`ServiceAccount ${name}/default`, 30_000, async () =>
          await api('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`).then(() => true, () => false))
      },
      waitForReadyPods: async (namespace, labelSelector, count, timeoutMs = 30_000) =>
        await until(`${count} ready pods ${labelSelector} in ${namespace}`, timeoutMs, async () => {
          const list = await api<{ items: KubeObject[] }>('GET', `/api/v1/namespaces/${namespace}/pods?labelSelector=${encodeURIComponent(labelSelector)}`)
          const ready = list.items.filter((p) => p.metadata?.deletionTimestamp === undefined && podIsReady(p))
          return ready.length >= count ? ready : undefined
        }),
      markPodReady: async (namespace, name, podIP) => {
        await ensureNode(tr)
        const pod = await api<KubeObject>('GET', `/api/v1/namespaces/${namespace}/pods/${name}`)
        await makePodReady(tr, pod, podIP)
      },
      stop
    }
  } catch (err) {
    await stop()
    throw err
  }
}
