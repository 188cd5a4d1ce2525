/**
 * Portico's own processes against a harness cluster (./harness.ts): the controller as a local
 * process with the environment the Helm chart gives it, and a Gateway's proxy as a local
 * process started with the environment the deployer rendered into the Deployment plus a
 * service-account token minted for the Gateway's ServiceAccount — what the pod would get from
 * a kubelet. Shared by the cluster-mode tests and the convergence benchmark.
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import type { Cluster, KubeObject } from './harness.ts'
import { freePort, type PorticoProcess, REPO_ROOT, startClusterPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'

const CONTROLLER_BIN = join(REPO_ROOT, 'packages/controller/bin/portico-controller.ts')

export interface ControllerProcess {
  child: ChildProcess
  /** Health port (/readyz). */
  health: number
  /** xDS port. */
  xds: number
  /** Admin port (/logging) on 127.0.0.1. */
  admin: number
  /** Metrics port (/metrics, portico_controller_*). */
  metrics: number
  output: () => string
  stop: () => Promise<void>
}

export interface StartControllerOptions {
  /** Extra environment, over the defaults (plaintext xDS on a fresh port, info logs). */
  env?: Record<string, string>
  /** xDS port to listen on (to restart a controller on the same address). */
  xds?: number
  /**
   * The XDS_ADDRESS the deployer gives proxies, from the xDS port (default
   * `http://127.0.0.1:PORT`; proxies in pods of their own reach the controller elsewhere).
   */
  xdsAddress?: (port: number) => string
}

export async function startController (cluster: Cluster, options: StartControllerOptions = {}): Promise<ControllerProcess> {
  const [health, metrics, admin] = [await freePort(), await freePort(), await freePort()]
  const xds = options.xds ?? await freePort()
  let out = ''
  const child = spawn(process.execPath, [CONTROLLER_BIN], {
    env: {
      ...process.env,
      KUBECONFIG: cluster.kubeconfig,
      POD_NAMESPACE: 'portico-system',
      POD_NAME: `controller-${xds}`,
      XDS_MODE: 'plaintext',
      XDS_PORT: String(xds),
      HEALTH_PORT: String(health),
      METRICS_PORT: String(metrics),
      ADMIN_ADDR: `127.0.0.1:${admin}`,
      PROXY_IMAGE: 'portico:test',
      LOG_LEVEL: 'info',
      ...options.env,
      XDS_ADDRESS: options.xdsAddress?.(xds) ?? options.env?.XDS_ADDRESS ?? `http://127.0.0.1:${xds}`
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  child.stdout!.on('data', (d: Buffer) => { out += d.toString() })
  child.stderr!.on('data', (d: Buffer) => { out += d.toString() })
  const controller: ControllerProcess = {
    child,
    health,
    xds,
    admin,
    metrics,
    output: () => out,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise(resolve => child.once('exit', resolve))
      child.kill('SIGTERM')
      await Promise.race([exited, new Promise(resolve => setTimeout(resolve, 5000))])
      child.kill('SIGKILL')
    }
  }
  try {
    await waitUntil(async () => (await httpGet(`http://127.0.0.1:${health}/readyz`)).status === 200, 30_000, `controller ready:\n${out}`, 100)
  } catch (err) {
    await controller.stop()
    throw new Error(`${(err as Error).message}\n${out}`)
  }
  return controller
}

/**
 * Starts the proxy of Gateway `ns/gateway` once the deployer has written its Deployment:
 * the container's literal env, a minted token (audience `portico`) in `dir`, and the xDS CA
 * from the deployer's ConfigMap when the env names one.
 */
export async function startGatewayProxy (cluster: Cluster, dir: string, ns: string, gateway: string, extraEnv: Record<string, string> = {}): Promise<PorticoProcess> {
  let deployment: KubeObject | undefined
  await waitUntil(async () => {
    deployment = await cluster.api('GET', `/apis/apps/v1/namespaces/${ns}/deployments/${gateway}`).catch(() => undefined)
    return deployment !== undefined
  // 30 s: a controller that starts on a loaded 2-core machine (CI with other suites) took more than 15.
  }, 30_000, `the deployer's Deployment ${ns}/${gateway}`, 100)
  const container = deployment!.spec.template.spec.containers[0] as { env: Array<{ name: string, value?: string }> }
  const env: Record<string, string> = {}
  for (const e of container.env) if (e.value !== undefined) env[e.name] = e.value
  const token = await cluster.createToken(ns, gateway, { audiences: ['portico'] })
  const tokenFile = join(dir, `${ns}-${gateway}-${Date.now()}.token`)
  writeFileSync(tokenFile, token)
  if (env.XDS_ROOT_CA !== undefined) {
    const cm = await cluster.api<KubeObject>('GET', `/api/v1/namespaces/${ns}/configmaps/${gateway}-xds-ca`)
    const caFile = join(dir, `${ns}-${gateway}-ca.crt`)
    writeFileSync(caFile, (cm.data as Record<string, string>)['ca.crt']!)
    env.XDS_ROOT_CA = caFile
  }
  return await startClusterPortico({ ...env, POD_NAME: `${gateway}-local`, NAMESPACE: ns, XDS_TOKEN_FILE: tokenFile, ...extraEnv })
}

/**
 * YAML for a Service with a hand-written EndpointSlice pointing at `address:port` (a test
 * host; EndpointSlices refuse loopback addresses); `pod` names the endpoint's targetRef (the
 * Pod the controller reads for mesh membership).
 */
export function backendService (address: string, ns: string, name: string, port: number, pod?: string): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${ns} }
spec: { ports: [{ name: http, port: 80, targetPort: ${port} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-manual, namespace: ${ns}, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: http, port: ${port}, protocol: TCP }]
endpoints: [{ addresses: ["${address}"], conditions: { ready: true }${pod !== undefined ? `, targetRef: { kind: Pod, name: ${pod}, namespace: ${ns} }` : ''} }]
`
}

export interface GatewayYamlOptions {
  /** The GatewayClass (default `portico`). */
  className?: string
  /** The listener's protocol (default HTTP); its name is the protocol in lower case. */
  protocol?: 'HTTP' | 'HTTPS' | 'TLS' | 'TCP' | 'UDP'
  /** More fields of the listener, YAML flow style (`allowedRoutes: { kinds: [{ kind: UDPRoute }] }`). */
  listener?: string
  /** More fields of spec, before the listeners, YAML flow style each (`addresses: [...]`). */
  spec?: Record<string, string>
}

/** YAML for a Gateway of class `portico` with one listener (HTTP `http` unless told) on `port`. */
export function gatewayYaml (ns: string, name: string, port: number, options: GatewayYamlOptions = {}): string {
  const protocol = options.protocol ?? 'HTTP'
  const extra = options.listener !== undefined ? `, ${options.listener}` : ''
  const spec = Object.entries(options.spec ?? {}).map(([key, value]) => `  ${key}: ${value}\n`).join('')
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: ${name}, namespace: ${ns} }
spec:
  gatewayClassName: ${options.className ?? 'portico'}
${spec}  listeners: [{ name: ${protocol.toLowerCase()}, port: ${port}, protocol: ${protocol}${extra} }]
`
}

/**
 * The chart's PorticoParameters CRD (its template without the Helm lines), applied and
 * Established: the controller reads every portico.dev kind the group serves.
 */
export async function installPorticoParametersCrd (cluster: Cluster): Promise<void> {
  const template = readFileSync(join(REPO_ROOT, 'charts/portico/templates/crd-porticoparameters.yaml'), 'utf8')
  await cluster.apply(template.split('\n').filter(l => !l.includes('{{') && !l.includes('helm.sh/') && !/^\s+(labels|annotations):$/.test(l) && !l.trimStart().startsWith('#')).join('\n'))
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticoparameters.portico.dev'])
}

/** GET without throwing: status 0 when the connection fails. */
export async function httpGet (url: string, headers: Record<string, string> = {}): Promise<{ status: number, body: string }> {
  try {
    const res = await request(url, { headers })
    return { status: res.statusCode, body: await res.body.text() }
  } catch {
    return { status: 0, body: '' }
  }
}
