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
import { startProcess, type Cluster, type Proc } from '../cluster/harness.ts'
import { freePort } from './portico.ts'
import { startEchoBackend, type Backend } from './backends.ts'

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

/**
 * An echo server per name, each on its own IP (loopback addresses: Linux routes all of 127/8
 * to lo), all on the same port (a pool has one targetPort); three tries at finding a port
 * free on every address.
 */
export async function startPoolServers (names: string[], ips: string[]): Promise<Backend[]> {
  for (let attempt = 1; ; attempt++) {
    const first = await startEchoBackend(names[0]!, {}, { address: ips[0] })
    const servers = [first]
    try {
      for (let i = 1; i < names.length; i++) servers.push(await startEchoBackend(names[i]!, {}, { address: ips[i], port: first.port }))
      return servers
    } catch (err) {
      await Promise.all(servers.map(s => s.close()))
      if (attempt === 3) throw err
    }
  }
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

/** lwepp watching `pool` in `namespace` through the harness's kubeconfig, its log in the cluster's folder. */
export function startLwepp (cluster: Cluster, lweppPath: string, { pool, namespace, ports }: { pool: string, namespace: string, ports: LweppPorts }): Lwepp {
  const proc = startProcess('lwepp', lweppPath, [
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
