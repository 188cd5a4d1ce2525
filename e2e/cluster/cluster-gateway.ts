/**
 * What a cluster test starts with, written once: the kube tools (skipping without them), a
 * test host for backends when asked, a temp directory, the cluster (./harness.ts) with the
 * CRDs and options the test names, its namespaces; then the controller and Gateways' proxies
 * (./portico-processes.ts) on demand. Everything started is stopped by `stop()`, last first,
 * with whatever the test hands to `defer`.
 *
 *   let suite: ClusterGateway | null = null
 *   before(async s => { suite = await startClusterGateway(s as TestContext, { dir: 'portico-cluster-x-', namespaces: ['portico-system', 'apps'] }) })
 *   after(async () => await suite?.stop())
 */

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { PorticoProcess } from '@portico/testkit/portico'
import { createTestHost, type TestHost } from '../lib/test-host.ts'
import { requireKubeTools, startCluster, type Cluster, type ClusterOptions } from './harness.ts'
import { startController, startGatewayProxy, type ControllerProcess, type StartControllerOptions } from './portico-processes.ts'
import { V170_CRDS_MISSING, v170ExperimentalCrds } from './v170-crds.ts'

export interface ClusterGatewayOptions {
  /** Prefix of the temp directory (tokens and CA files for the proxies, the test's own files). */
  dir: string
  /** A test host (a network namespace: EndpointSlices refuse loopback); skipped without one. */
  testHost?: boolean
  /** Gateway API v1.7.0's experimental CRDs instead of the standard ones; skipped without them. */
  v170Crds?: boolean
  /** For startCluster (default: kube-controller-manager and the fake kubelet run). */
  cluster?: Omit<ClusterOptions, 'tools' | 'gatewayApiCrds'>
  /** Namespaces created once the cluster runs (cluster.createNamespace). */
  namespaces?: string[]
}

export interface ClusterGateway {
  cluster: Cluster
  /** The test host (null unless `testHost` was asked for). */
  host: TestHost | null
  dir: string
  /** Runs at stop(), before what was registered earlier. */
  defer: (fn: () => Promise<void> | void) => void
  /** The controller (startController), stopped at stop(). */
  startController: (options?: StartControllerOptions) => Promise<ControllerProcess>
  /** Gateway `ns/gateway`'s proxy (startGatewayProxy, files in `dir`), stopped at stop(). */
  startProxy: (ns: string, gateway: string, env?: Record<string, string>) => Promise<PorticoProcess>
  stop: () => Promise<void>
}

/** The cluster and what the options ask for, or null when the test was skipped (no tools, no test host, no CRDs). */
export async function startClusterGateway (t: TestContext, options: ClusterGatewayOptions): Promise<ClusterGateway | null> {
  const tools = requireKubeTools(t)
  if (tools === null) return null
  const cleanup: Array<() => Promise<void> | void> = []
  const stop = async (): Promise<void> => {
    for (const fn of cleanup.splice(0).reverse()) await fn()
  }
  try {
    let gatewayApiCrds: string | undefined
    if (options.v170Crds === true) {
      const crds = v170ExperimentalCrds()
      if (crds === null) {
        t.skip(V170_CRDS_MISSING)
        return null
      }
      cleanup.push(crds.remove)
      gatewayApiCrds = crds.dir
    }
    let host: TestHost | null = null
    if (options.testHost === true) {
      host = createTestHost(t)
      if (host === null) {
        await stop()
        return null
      }
      const made = host
      cleanup.push(() => made.destroy())
    }
    const dir = mkdtempSync(join(tmpdir(), options.dir))
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
    const cluster = await startCluster({ ...options.cluster, tools, ...(gatewayApiCrds !== undefined ? { gatewayApiCrds } : {}) })
    cleanup.push(() => cluster.stop())
    for (const ns of options.namespaces ?? []) await cluster.createNamespace(ns)
    return {
      cluster,
      host,
      dir,
      defer: fn => { cleanup.push(fn) },
      startController: async (controllerOptions = {}) => {
        const controller = await startController(cluster, controllerOptions)
        cleanup.push(() => controller.stop())
        return controller
      },
      startProxy: async (ns, gateway, env = {}) => {
        const proxy = await startGatewayProxy(cluster, dir, ns, gateway, env)
        cleanup.push(async () => { await proxy.stop() })
        return proxy
      },
      stop
    }
  } catch (err) {
    await stop()
    throw err
  }
}
