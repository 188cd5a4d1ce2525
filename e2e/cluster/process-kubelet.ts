/**
 * A process kubelet for the harness's fake kubelet (harness.ts `fakeKubelet.runtime`): pods
 * whose image it knows run as local processes, each in its own network namespace joined to
 * the caller's namespace by a veth pair — what a container runtime and a CNI plugin do, minus
 * the images.
 *
 * Why a namespace per pod: the servers pods run bind every interface on fixed ports
 * (echo-basic binds `:3000`, its gRPC server `0.0.0.0` hard-coded; every Portico proxy binds
 * its listeners and 15020/15021), so two pods could not share one network stack.
 *
 * The plumbing per pod (docs/conformance.md):
 *   caller's namespace:  veth `pk<n>` with 169.254.1.1/32, route `<podIP>/32 dev pk<n>`
 *   pod's namespace:     `lo` up, `eth0` with `<podIP>/32`, default route via 169.254.1.1
 * so the caller reaches every pod at its IP and pods reach each other (the caller must have
 * net.ipv4.ip_forward=1) and the caller's wildcard listeners at 169.254.1.1. The namespace
 * belongs to the pod's pause process (`unshare --net`), so it and its veth go when that exits; no
 * `ip netns` files are left behind. This needs root, and should run inside a private network
 * namespace of its own (the conformance runner's), not the machine's.
 *
 * A pod's spec is followed where it matters to the process: env (`value`, fieldRefs,
 * secretKeyRef/configMapKeyRef), volumes (secret, configMap, projected service-account token,
 * emptyDir) written to a per-pod directory, with env values under a mountPath rewritten to
 * that directory (there is no mount namespace), and readiness (a `readinessProbe.httpGet`,
 * `tcpSocket` or `grpc` port is polled before the pod is reported Ready). Each container of a
 * known image is a process joining (`nsenter`) the pod's network namespace, which a pause
 * process (`sleep`) holds and which is plumbed before any container starts. A container whose command asks for
 * API access gets `KUBECONFIG`: the pod's service account with a minted token, the API server
 * at the address the caller gives (in-cluster config's fixed paths need a mount namespace).
 * Other images are Ready with no process, as the fake kubelet always did.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { request } from 'node:http'
import { dirname, join } from 'node:path'
import type { KubeObject, PodRuntime } from './harness.ts'
import { sleep } from '@portico/testkit/wait'

/** How a known image runs: the command, given the pod's resolved env and a path mapper. */
export interface ImageCommand {
  command: string
  args: string[]
  /** Variables added to (and over) the pod's env. */
  env?: Record<string, string>
  /**
   * Give the process the API server as its pod's service account: `KUBECONFIG` names a
   * kubeconfig written for the pod (needs the kubelet's `apiServer` option). A kubelet mounts
   * the token at /var/run/secrets/kubernetes.io/serviceaccount for in-cluster config; with no
   * mount namespace that fixed path cannot be the pod's, and client-go reads KUBECONFIG first.
   */
  apiAccess?: boolean
}

/** How pods reach the API server (their side of the veth; its certificate's name). */
export interface PodApiServer {
  /** e.g. https://169.254.1.1:PORT */
  server: string
  caFile: string
  /** A name the serving certificate holds, when `server`'s address is not one of them. */
  tlsServerName?: string
}

export interface ProcessKubeletOptions {
  /** The container's command (one process per container of the pod), or null: no process for it. */
  commandFor: (image: string, pod: KubeObject, pod_: PodFiles, container: any) => ImageCommand | null
  /** Raw API call (the harness's `cluster.api`), for Secrets, ConfigMaps and TokenRequests. */
  api: <T = any>(method: string, path: string, body?: unknown) => Promise<T>
  /** Per-pod directories go under this one. */
  dir: string
  /** The caller's side of every veth (the pods' default gateway). */
  gatewayIP?: string
  /** Called with one line per notable event (started, exited, plumbing failures). */
  log?: (line: string) => void
  /** Longest wait for a readiness probe before the pod is reported Ready anyway. Default 60 s. */
  readinessTimeoutMs?: number
  /** The API server as pods reach it, for containers whose command asks for `apiAccess`. */
  apiServer?: PodApiServer
}

/** Where a pod's files are, and a mapper from its container paths to them. */
export interface PodFiles {
  dir: string
  path: (containerPath: string) => string
}

/** One container's process and its (capped) output. */
interface RunningContainer {
  name: string
  child: ChildProcess
  exited: Promise<void>
  output: string[]
  outputBytes: number
}

interface RunningPod {
  key: string
  /** The pod's pause process: it holds the network namespace the containers join. */
  pause: ChildProcess | null
  containers: RunningContainer[]
  dir: string
  ready: Promise<void>
  /** Once plumbed: the pod's IP, its process and the caller's end of its veth. */
  net?: { podIP: string, pid: number, veth: string }
}

const GATEWAY_IP = '169.254.1.1'
const LOG_CAP = 1 << 20

function run (cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: 'pipe' })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${String(r.stderr).trim() || `exit ${String(r.status)}`}`)
}

function key (pod: KubeObject): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}/${pod.metadata?.uid ?? ''}`
}

/** A fieldRef as the kubelet resolves it (downward API). */
function fieldRef (pod: KubeObject, path: string, podIP: string): string {
  const labels = /^metadata\.labels\['(.+)'\]$/.exec(path)
  if (labels !== null) return String(pod.metadata?.labels?.[labels[1]!] ?? '')
  const annotations = /^metadata\.annotations\['(.+)'\]$/.exec(path)
  if (annotations !== null) return String((pod.metadata?.annotations as Record<string, string> | undefined)?.[annotations[1]!] ?? '')
  switch (path) {
    case 'metadata.name': return String(pod.metadata?.name ?? '')
    case 'metadata.namespace': return String(pod.metadata?.namespace ?? '')
    case 'metadata.uid': return String(pod.metadata?.uid ?? '')
    case 'spec.nodeName': return String(pod.spec?.nodeName ?? '')
    case 'spec.serviceAccountName': return String(pod.spec?.serviceAccountName ?? 'default')
    case 'status.podIP': case 'status.podIPs': return podIP
    case 'status.hostIP': case 'status.hostIPs': return '127.0.0.1'
    default: return ''
  }
}

export function processKubelet (options: ProcessKubeletOptions): PodRuntime & { pods: () => string[], addAddress: (podIP: string, address: string) => boolean } {
  const gatewayIP = options.gatewayIP ?? GATEWAY_IP
  const log = options.log ?? (() => {})
  const running = new Map<string, RunningPod>()
  let vethCounter = 0

  async function get<T> (path: string): Promise<T | undefined> {
    try { return await options.api<T>('GET', path) } catch { return undefined }
  }

  /**
   * A Secret or ConfigMap a pod needs: waited for (up to 60 s), as a kubelet keeps a pod in
   * ContainerCreating until its volumes can be mounted — the Gateway API suite creates its
   * backends' certificate Secrets after the Deployments that mount them. Optional ones are not.
   */
  async function required<T> (path: string, optional: boolean | undefined, pod: KubeObject): Promise<T | undefined> {
    const deadline = Date.now() + 60_000
    for (;;) {
      const found = await get<T>(path)
      if (found !== undefined || optional === true) return found
      if (Date.now() > deadline) {
        log(`pod ${key(pod)}: ${path} still missing after 60 s; starting without it`)
        return undefined
      }
      await sleep(250)
    }
  }

  /** Writes the pod's volumes; returns mountPath → directory, longest first. */
  async function writeVolumes (pod: KubeObject, container: any, dir: string): Promise<Array<[string, string]>> {
    const ns = String(pod.metadata?.namespace)
    const mounts: Array<[string, string]> = []
    const volumes = new Map<string, any>((pod.spec?.volumes ?? []).map((v: any) => [v.name, v]))
    const decode = (data: Record<string, string> | undefined, base64: boolean): Record<string, Buffer> =>
      Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, base64 ? 'base64' : 'utf8')]))
    const writeAll = (target: string, files: Record<string, Buffer>, items?: Array<{ key: string, path: string }>): void => {
      for (const [k, v] of Object.entries(files)) {
        const path = items !== undefined ? items.find(i => i.key === k)?.path : k
        if (path === undefined) continue
        mkdirSync(dirname(join(target, path)), { recursive: true })
        writeFileSync(join(target, path), v, { mode: 0o600 })
      }
    }
    for (const m of container.volumeMounts ?? []) {
      const volume = volumes.get(m.name)
      if (volume === undefined) continue
      const target = join(dir, 'volumes', m.name)
      mkdirSync(target, { recursive: true })
      if (volume.secret !== undefined) {
        const secret = await required<any>(`/api/v1/namespaces/${ns}/secrets/${volume.secret.secretName}`, volume.secret.optional, pod)
        writeAll(target, decode(secret?.data, true), volume.secret.items)
      } else if (volume.configMap !== undefined) {
        const cm = await required<any>(`/api/v1/namespaces/${ns}/configmaps/${volume.configMap.name}`, volume.configMap.optional, pod)
        writeAll(target, { ...decode(cm?.data, false), ...decode(cm?.binaryData, true) }, volume.configMap.items)
      } else if (volume.projected !== undefined) {
        for (const source of volume.projected.sources ?? []) {
          if (source.serviceAccountToken !== undefined) {
            const sat = source.serviceAccountToken
            const res = await options.api<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${String(pod.spec?.serviceAccountName ?? 'default')}/token`, {
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenRequest',
              spec: { ...(sat.audience !== undefined ? { audiences: [sat.audience] } : {}), expirationSeconds: sat.expirationSeconds ?? 3600 }
            })
            writeAll(target, { [sat.path]: Buffer.from(res.status.token) })
          } else if (source.configMap !== undefined) {
            const cm = await required<any>(`/api/v1/namespaces/${ns}/configmaps/${source.configMap.name}`, source.configMap.optional, pod)
            writeAll(target, decode(cm?.data, false), source.configMap.items)
          } else if (source.secret !== undefined) {
            const secret = await required<any>(`/api/v1/namespaces/${ns}/secrets/${source.secret.name}`, source.secret.optional, pod)
            writeAll(target, decode(secret?.data, true), source.secret.items)
          }
        }
      }
      // emptyDir and anything else: the empty directory.
      mounts.push([String(m.mountPath).replace(/\/+$/, ''), m.subPath !== undefined ? join(target, m.subPath) : target])
    }
    return mounts.sort((a, b) => b[0].length - a[0].length)
  }

  async function resolveEnv (pod: KubeObject, container: any, podIP: string, path: (p: string) => string): Promise<Record<string, string>> {
    const ns = String(pod.metadata?.namespace)
    const env: Record<string, string> = {}
    for (const e of container.env ?? []) {
      let value: string | undefined = e.value
      const from = e.valueFrom
      if (from?.fieldRef !== undefined) value = fieldRef(pod, from.fieldRef.fieldPath, podIP)
      else if (from?.secretKeyRef !== undefined) {
        const s = await required<any>(`/api/v1/namespaces/${ns}/secrets/${from.secretKeyRef.name}`, from.secretKeyRef.optional, pod)
        const v = s?.data?.[from.secretKeyRef.key]
        value = v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8')
      } else if (from?.configMapKeyRef !== undefined) {
        const cm = await required<any>(`/api/v1/namespaces/${ns}/configmaps/${from.configMapKeyRef.name}`, from.configMapKeyRef.optional, pod)
        value = cm?.data?.[from.configMapKeyRef.key]
      }
      if (value === undefined) continue
      // $(VAR) references to earlier variables, as the kubelet expands them.
      value = value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string) => env[name] ?? m)
      env[e.name] = value.startsWith('/') ? path(value) : value
    }
    return env
  }

  /** veth pair from the caller's namespace into the pod process's; addresses and routes. */
  function plumb (pid: number, podIP: string): string {
    const host = `pk${vethCounter++}`
    run('ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', String(pid)])
    run('ip', ['addr', 'add', `${gatewayIP}/32`, 'dev', host])
    run('ip', ['link', 'set', host, 'up'])
    run('ip', ['route', 'replace', `${podIP}/32`, 'dev', host])
    const inPod = (args: string[]): void => run('nsenter', [`--net=/proc/${pid}/ns/net`, 'ip', ...args])
    inPod(['link', 'set', 'lo', 'up'])
    inPod(['addr', 'add', `${podIP}/32`, 'dev', 'eth0'])
    inPod(['link', 'set', 'eth0', 'up'])
    inPod(['route', 'add', `${gatewayIP}/32`, 'dev', 'eth0'])
    inPod(['route', 'add', 'default', 'via', gatewayIP, 'dev', 'eth0', 'onlink'])
    return host
  }

  /**
   * Makes `address` reach the pod whose IP is `podIP`, as a load balancer's VIP reaches a
   * node: the pod's namespace gets the address on eth0 (its wildcard listeners accept
   * traffic for it), the caller's a route to it over the pod's veth (replacing one to another
   * pod). False when no running pod has that IP.
   */
  function addAddress (podIP: string, address: string): boolean {
    const entry = [...running.values()].find(e => e.net?.podIP === podIP)
    if (entry?.net === undefined) return false
    const { pid, veth } = entry.net
    const have = spawnSync('nsenter', [`--net=/proc/${pid}/ns/net`, 'ip', '-o', 'addr', 'show', 'dev', 'eth0']).stdout.toString()
    if (!have.includes(` ${address}/`)) run('nsenter', [`--net=/proc/${pid}/ns/net`, 'ip', 'addr', 'add', `${address}/32`, 'dev', 'eth0'])
    run('ip', ['route', 'replace', `${address}/32`, 'dev', veth])
    return true
  }

  /**
   * Polls the container's readiness probe (httpGet or tcpSocket) at the pod's IP; without one,
   * its first port: a TCP connect, or for a UDP port a socket bound to it in the pod's network
   * namespace (`/proc/NETNS_PID/net/udp{,6}` lists that namespace's sockets: a datagram would
   * prove nothing, as a UDP server need not answer).
   */
  async function probe (container: any, podIP: string, netnsPid: number, exited: () => boolean): Promise<void> {
    const p = container.readinessProbe ?? container.startupProbe
    const ports = new Map<string, number>((container.ports ?? []).map((x: any) => [x.name, x.containerPort]))
    const portOf = (port: unknown): number => typeof port === 'number' ? port : Number(ports.get(String(port)) ?? port)
    let check: (() => Promise<boolean>) | null = null
    if (p?.httpGet !== undefined) {
      const port = portOf(p.httpGet.port)
      check = async () => await new Promise<boolean>(resolve => {
        const req = request({ host: podIP, port, path: p.httpGet.path ?? '/', timeout: 1000 }, res => { res.resume(); resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400) })
        req.on('error', () => resolve(false)).on('timeout', () => { req.destroy(); resolve(false) }).end()
      })
    } else if (p === undefined && String(container.ports?.[0]?.protocol ?? 'TCP').toUpperCase() === 'UDP') {
      const port = Number(container.ports[0].containerPort)
      check = async () => udpBound(netnsPid, port)
    } else if (p?.tcpSocket !== undefined || p?.grpc !== undefined || (container.ports ?? []).length > 0) {
      // A gRPC health probe is checked as a TCP connect to its port: the server is up.
      const port = p?.tcpSocket !== undefined ? portOf(p.tcpSocket.port) : p?.grpc !== undefined ? Number(p.grpc.port) : Number(container.ports[0].containerPort)
      check = async () => await new Promise<boolean>(resolve => {
        const s = connect({ host: podIP, port, timeout: 1000 }, () => { s.destroy(); resolve(true) })
        s.on('error', () => resolve(false)).on('timeout', () => { s.destroy(); resolve(false) })
      })
    }
    if (check === null) return
    const deadline = Date.now() + (options.readinessTimeoutMs ?? 60_000)
    while (Date.now() < deadline && !exited()) {
      if (await check()) return
      await sleep(150)
    }
  }

  /**
   * The pod's service account as a kubeconfig (a token minted with TokenRequest, as the kubelet
   * projects one), for a container that reads the API server; its path.
   */
  async function writeKubeconfig (pod: KubeObject, dir: string): Promise<string> {
    const api = options.apiServer
    if (api === undefined) throw new Error('a container asks for API access but the process kubelet has no apiServer option')
    const ns = String(pod.metadata?.namespace)
    const sa = String(pod.spec?.serviceAccountName ?? 'default')
    const res = await options.api<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      // No audience: the API server's own. Longer than any run, since nothing rotates it.
      spec: { expirationSeconds: 6 * 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: pod.metadata?.uid } }
    })
    const sadir = join(dir, 'serviceaccount')
    mkdirSync(sadir, { recursive: true })
    writeFileSync(join(sadir, 'token'), res.status.token, { mode: 0o600 })
    writeFileSync(join(sadir, 'namespace'), ns)
    const file = join(sadir, 'kubeconfig')
    writeFileSync(file, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'cluster', cluster: { server: api.server, 'certificate-authority': api.caFile, ...(api.tlsServerName !== undefined ? { 'tls-server-name': api.tlsServerName } : {}) } }],
      users: [{ name: sa, user: { tokenFile: join(sadir, 'token') } }],
      contexts: [{ name: 'pod', context: { cluster: 'cluster', user: sa, namespace: ns } }],
      'current-context': 'pod'
    }, null, 2) + '\n', { mode: 0o600 })
    return file
  }

  /** One container's process, in the pod's network namespace (held by the pause process `pid`). */
  function spawnContainer (k: string, entry: RunningPod, name: string, cmd: ImageCommand, env: Record<string, string>, pid: number): RunningContainer {
    const child = spawn('nsenter', [`--net=/proc/${pid}/ns/net`, '--', 'setpriv', '--pdeathsig', 'SIGKILL', '--', cmd.command, ...cmd.args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: entry.dir, ...env },
      cwd: entry.dir,
      stdio: ['ignore', 'pipe', 'pipe']
    })
    const c: RunningContainer = { name, child, exited: Promise.resolve(), output: [], outputBytes: 0 }
    const keep = (chunk: Buffer): void => {
      c.output.push(chunk.toString('utf8'))
      c.outputBytes += chunk.length
      while (c.outputBytes > LOG_CAP && c.output.length > 1) c.outputBytes -= Buffer.byteLength(c.output.shift()!)
    }
    child.stdout!.on('data', keep)
    child.stderr!.on('data', keep)
    c.exited = new Promise(resolve => child.once('close', (code, signal) => {
      if (running.get(k) === entry) log(`pod ${k} container ${name}: ${cmd.command} exited (${code ?? signal})\n${c.output.join('').split('\n').slice(-15).join('\n')}`)
      resolve()
    }))
    return c
  }

  async function start (pod: KubeObject, podIP: string): Promise<void> {
    const k = key(pod)
    const existing = running.get(k)
    if (existing !== undefined) return await existing.ready
    const dir = join(options.dir, `${String(pod.metadata?.namespace)}_${String(pod.metadata?.name)}`)
    const entry: RunningPod = { key: k, pause: null, containers: [], dir, ready: Promise.resolve() }
    running.set(k, entry)
    entry.ready = (async () => {
      mkdirSync(dir, { recursive: true })
      // Every container the kubelet knows how to run, with its env and files.
      const plans: Array<{ container: any, cmd: ImageCommand, env: Record<string, string> }> = []
      let kubeconfig: string | undefined
      for (const container of pod.spec?.containers ?? []) {
        const mounts = await writeVolumes(pod, container, dir)
        const path = (p: string): string => {
          for (const [mountPath, local] of mounts) {
            if (p === mountPath || p.startsWith(mountPath + '/')) return local + p.slice(mountPath.length)
          }
          return p
        }
        const cmd = options.commandFor(String(container.image ?? ''), pod, { dir, path }, container)
        if (cmd === null) continue
        if (cmd.apiAccess === true) kubeconfig ??= await writeKubeconfig(pod, dir)
        const env = { ...await resolveEnv(pod, container, podIP, path), ...(cmd.apiAccess === true ? { KUBECONFIG: kubeconfig! } : {}), ...cmd.env }
        plans.push({ container, cmd, env })
      }
      if (plans.length === 0) return
      if (!running.has(k)) return // deleted meanwhile
      // The namespace is made and plumbed before any container starts, as a kubelet runs the
      // CNI plugin on the pause container first: a process that dials out at once (lwepp reads
      // the API server) must not find the network missing.
      const pause = spawn('unshare', ['--net', '--', 'setpriv', '--pdeathsig', 'SIGKILL', '--', 'sleep', 'infinity'], { stdio: 'ignore' })
      entry.pause = pause
      // unshare runs the command in the same process once the namespace exists: wait for it.
      const pid = pause.pid!
      const ours = readlinkSync('/proc/self/ns/net')
      for (let i = 0; i < 100; i++) {
        let mine = ''
        try { mine = readlinkSync(`/proc/${pid}/ns/net`) } catch {}
        if (mine !== '' && mine !== ours) break
        await sleep(10)
      }
      entry.net = { podIP, pid, veth: plumb(pid, podIP) }
      for (const [i, plan] of plans.entries()) entry.containers.push(spawnContainer(k, entry, String(plan.container.name ?? i), plan.cmd, plan.env, pid))
      log(`pod ${k}: ${plans.map(p => p.cmd.command.split('/').at(-1)!).join(', ')} at ${podIP}`)
      await Promise.all(plans.map(async (plan, i) => {
        let gone = false
        void entry.containers[i]!.exited.then(() => { gone = true })
        await probe(plan.container, podIP, pid, () => gone)
      }))
    })()
    try {
      await entry.ready
    } catch (err) {
      await stop(pod)
      throw err
    }
  }

  async function kill (entry: RunningPod): Promise<void> {
    for (const c of entry.containers) c.child.kill('SIGKILL')
    const pause = entry.pause
    const pauseGone = pause === null || pause.exitCode !== null || pause.signalCode !== null ? Promise.resolve() : new Promise(resolve => pause.once('close', resolve))
    pause?.kill('SIGKILL')
    await Promise.all([...entry.containers.map(async c => await c.exited), pauseGone])
    rmSync(entry.dir, { recursive: true, force: true })
  }

  async function stop (pod: KubeObject): Promise<void> {
    const k = key(pod)
    const entry = running.get(k)
    if (entry === undefined) return
    running.delete(k)
    await kill(entry)
  }

  return {
    start,
    stop,
    logs: (namespace, name, container) => {
      for (const entry of running.values()) {
        if (!entry.key.startsWith(`${namespace}/${name}/`)) continue
        const c = entry.containers.find(c => c.name === container) ?? entry.containers[0]
        return c === undefined ? '' : c.output.join('')
      }
      return null
    },
    stopAll: async () => {
      const all = [...running.values()]
      running.clear()
      await Promise.all(all.map(kill))
    },
    pods: () => [...running.keys()],
    addAddress
  }
}

/** Whether a UDP socket is bound to `port` in the network namespace of process `pid` (IPv4 or IPv6). */
export function udpBound (pid: number, port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0')
  for (const file of [`/proc/${pid}/net/udp`, `/proc/${pid}/net/udp6`]) {
    let text = ''
    try { text = readFileSync(file, 'utf8') } catch { continue }
    // "  sl  local_address rem_address ...": local_address is ADDR:PORT in hex.
    for (const line of text.split('\n').slice(1)) {
      const local = line.trim().split(/\s+/)[1]
      if (local !== undefined && local.endsWith(`:${hex}`)) return true
    }
  }
  return false
}
