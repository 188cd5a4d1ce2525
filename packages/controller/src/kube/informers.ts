/**
 * Watches (list + watch, re-listing on expiry) of every kind the translation reads, with
 * @kubernetes/client-node's informers. Any change calls `onChange`; `state()` gives the
 * current objects as the translation's input.
 *
 * Updates that only touch the status of the Gateway API objects (same generation, labels and
 * annotations) call nothing: the translation does not read their status, and the controller
 * writes those statuses itself — without this filter every status write would come back as
 * one more full reconcile (with 1,000 routes, a route change meant three or four).
 */

import { ListWatch, makeInformer, Watch, type KubeConfig, type KubernetesObject, type Informer, type ObjectCache } from '@kubernetes/client-node'
import type { ClusterState } from '../translate/translate.ts'
import { KubeHttp, paths } from './http.ts'

type Kind = keyof ClusterState

/** Kinds whose status-only updates cannot change the translation. */
const SPEC_ONLY = new Set<Kind>(['gatewayClasses', 'gateways', 'httpRoutes', 'grpcRoutes', 'tlsRoutes', 'tcpRoutes', 'udpRoutes', 'backendTLSPolicies', 'listenerSets', 'porticoPolicies', 'porticoModels', 'inferencePools'])

const WATCHED: Record<Kind, string> = {
  gatewayClasses: paths.gatewayClasses,
  gateways: paths.gateways,
  httpRoutes: paths.httpRoutes,
  grpcRoutes: paths.grpcRoutes,
  tlsRoutes: paths.tlsRoutes,
  tcpRoutes: paths.tcpRoutes,
  udpRoutes: paths.udpRoutes,
  listenerSets: paths.listenerSets,
  referenceGrants: paths.referenceGrants,
  services: paths.services,
  endpointSlices: paths.endpointSlices,
  secrets: paths.secrets,
  namespaces: paths.namespaces,
  parameters: paths.porticoParameters,
  backendTLSPolicies: paths.backendTLSPolicies,
  configMaps: paths.configMaps,
  clusterTrustBundles: paths.clusterTrustBundles,
  porticoPolicies: paths.porticoPolicies,
  porticoBackends: paths.porticoBackends,
  porticoModels: paths.porticoModels,
  inferencePools: paths.inferencePools,
  pods: paths.pods
}

/**
 * Kinds from Portico's own CRDs, which the chart installs but a cluster may lack: watched
 * only when the API server serves them (checked at start; installing the CRD later needs a
 * controller restart — except InferencePools, see LATE_CRDS), else read as none.
 */
const OPTIONAL: Partial<Record<Kind, string>> = {
  parameters: paths.porticoParametersGroupVersion,
  // ListenerSet too (v1 since Gateway API v1.5); read as none when absent.
  listenerSets: paths.listenerSets,
  // BackendTLSPolicy shares its group/version with Gateway: its own list answers 404 without the CRD.
  backendTLSPolicies: paths.backendTLSPolicies,
  grpcRoutes: paths.grpcRoutes,
  tlsRoutes: paths.tlsRoutes,
  tcpRoutes: paths.tcpRoutes,
  udpRoutes: paths.udpRoutes,
  // A built-in kind, but beta: served only with its feature gate and runtime-config (Kubernetes 1.36).
  clusterTrustBundles: paths.clusterTrustBundles,
  // PorticoPolicy and PorticoBackend share portico.dev/v1alpha1 with PorticoParameters: their own lists, likewise.
  porticoPolicies: paths.porticoPolicies,
  porticoBackends: paths.porticoBackends,
  porticoModels: paths.porticoModels,
  // The InferencePool CRD is third-party (installed apart from the chart): with the switch on
  // and no CRD, pools are read as none (a pool backendRef is then BackendNotFound).
  inferencePools: paths.inferencePoolsGroupVersion
}

/**
 * Optional kinds whose CRD is watched (by name): the controller starts watching the kind when
 * its CRD becomes Established and stops when the CRD is deleted, without a restart. The
 * InferencePool CRD is third-party, installed apart from the chart or by it after the
 * controller started (crds.inferencePool); Portico's own CRDs come with the chart, before
 * the controller.
 */
const LATE_CRDS: Partial<Record<Kind, { crd: string, version: string }>> = {
  inferencePools: { crd: 'inferencepools.inference.networking.k8s.io', version: 'v1' }
}

interface Crd extends KubernetesObject {
  spec?: { versions?: Array<{ name: string, served?: boolean }> }
  status?: { conditions?: Array<{ type: string, status: string }> }
}

/** The CRD serves `version` (Established, that version served): its kind can be listed. */
function serves (crd: Crd | undefined, version: string): boolean {
  return crd !== undefined && crd.metadata?.deletionTimestamp === undefined &&
    (crd.status?.conditions ?? []).some(c => c.type === 'Established' && c.status === 'True') &&
    (crd.spec?.versions ?? []).some(v => v.name === version && v.served === true)
}

/**
 * Kinds behind a chart switch: not watched at all (no informer, no list, no discovery) unless
 * the switch is on — with gatewayModels.enabled=false the chart installs neither the
 * PorticoModel CRD nor the RBAC to read it, so even a discovery request would be refused.
 */
export interface InformerOptions {
  /** Watch PorticoModels (chart gatewayModels.enabled). */
  gatewayModels?: boolean
  /** Watch InferencePools and Pods (chart inferenceExtension.enabled). */
  inferenceExtension?: boolean
  /** Watch Pods: the mesh is configured (chart mesh.*), ambient destinations are read from them (translate/mesh.ts). */
  mesh?: boolean
}

/**
 * What the translation reads of a Pod (inference-pools.ts, mesh.ts): its identity, labels,
 * service account, IP and readiness.
 */
function podFingerprint (o: KubernetesObject): unknown[] {
  const p = o as KubernetesObject & { metadata?: { deletionTimestamp?: string }, spec?: { serviceAccountName?: string }, status?: { podIP?: string, phase?: string, conditions?: Array<{ type: string, status: string }> } }
  return [p.metadata?.uid, p.metadata?.labels, p.metadata?.deletionTimestamp, p.spec?.serviceAccountName, p.status?.podIP, p.status?.phase, p.status?.conditions?.find(c => c.type === 'Ready')?.status]
}

export interface InformerLog {
  info(fields: Record<string, unknown>, msg: string): void
  warn(fields: Record<string, unknown>, msg: string): void
  debug(fields: Record<string, unknown>, msg: string): void
}

export class Informers {
  private readonly informers = new Map<Kind, Informer<KubernetesObject> & ObjectCache<KubernetesObject>>()
  private readonly synced = new Set<Kind>()
  /** For SPEC_ONLY kinds: `kind/namespace/name` → what a change must alter to matter. */
  private readonly specs = new Map<string, string>()
  private readonly api: KubeHttp
  private readonly log: InformerLog

  private readonly kc: KubeConfig
  private readonly onChange: (kind: Kind) => void
  /** Watches of LATE_CRDS' CRDs (by name), by kind. */
  private readonly crdWatches = new Map<Kind, ListWatch<Crd>>()
  /** The kinds whose switch is on (their informer was made, even if dropped since). */
  private readonly enabled = new Set<Kind>()
  /**
   * Kinds watched since their CRD appeared: not part of `ready` — the controller (and its
   * readiness) must not wait for a list that may keep failing; until it succeeds their
   * objects are read as none, as before the CRD.
   */
  private readonly late = new Set<Kind>()
  private stopped = false
  private readonly inferenceExtension: boolean

  constructor (kc: KubeConfig, onChange: (kind: Kind) => void, log: InformerLog, options: InformerOptions = {}) {
    this.api = new KubeHttp(kc)
    this.inferenceExtension = options.inferenceExtension === true
    this.kc = kc
    this.onChange = onChange
    this.log = log
    for (const [kind, path] of Object.entries(WATCHED) as Array<[Kind, string]>) {
      if (kind === 'porticoModels' && options.gatewayModels !== true) continue
      if (kind === 'inferencePools' && options.inferenceExtension !== true) continue
      if (kind === 'pods' && options.inferenceExtension !== true && options.mesh !== true) continue
      this.informers.set(kind, this.informer(kind, path))
      this.enabled.add(kind)
    }
  }

  /** A list + watch of `kind` whose changes call onChange (SPEC_ONLY kinds: only when what matters changed). */
  private informer (kind: Kind, path: string): Informer<KubernetesObject> & ObjectCache<KubernetesObject> {
    const api = this.api
    const informer = makeInformer(this.kc, path, async () => {
      const list = await api.get<{ items?: KubernetesObject[], metadata?: { resourceVersion?: string } }>(path)
      // Lists omit apiVersion/kind on items; nothing downstream needs them.
      return { apiVersion: 'v1', kind: 'List', items: list.items ?? [], metadata: list.metadata ?? {} } as never
    })
    const changed = () => this.onChange(kind)
    const key = (o: KubernetesObject) => `${kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`
    // Pods (inference extension): only what makes a pod an endpoint of a pool matters —
    // every other status update (container restarts, probes' timestamps) would be one more
    // full reconcile for each pod of the cluster.
    const spec = kind === 'pods'
      ? (o: KubernetesObject) => JSON.stringify(podFingerprint(o))
      : (o: KubernetesObject) => JSON.stringify([o.metadata?.uid, o.metadata?.generation, o.metadata?.labels, o.metadata?.annotations])
    const specOnly = SPEC_ONLY.has(kind) || kind === 'pods'
    informer.on('add', (o) => {
      if (specOnly) this.specs.set(key(o), spec(o))
      changed()
    })
    informer.on('update', (o) => {
      if (specOnly) {
        const next = spec(o)
        if (this.specs.get(key(o)) === next) return
        this.specs.set(key(o), next)
      }
      changed()
    })
    informer.on('delete', (o) => {
      if (specOnly) this.specs.delete(key(o))
      changed()
    })
    informer.on('connect', () => {
      this.synced.add(kind)
      changed()
    })
    informer.on('error', (err: unknown) => {
      // Not when it was stopped since (its CRD deleted: LATE_CRDS) or replaced.
      if (this.stopped || this.informers.get(kind) !== informer) return
      this.log.warn({ kind, err: (err as Error)?.message ?? String(err) }, 'watch failed; restarting')
      setTimeout(() => {
        if (!this.stopped && this.informers.get(kind) === informer) informer.start().catch(() => {})
      }, 2000).unref()
    })
    return informer
  }

  async start (): Promise<void> {
    for (const [kind, groupVersion] of Object.entries(OPTIONAL) as Array<[Kind, string]>) {
      if (!this.informers.has(kind)) continue
      const served = await this.untilAnswered(`discovery of ${groupVersion}`, async () => await this.api.get(groupVersion).then(() => true, (err: { code?: number }) => {
        if (err.code === 404) return false
        // A built-in kind the controller's role may predate (a ClusterRole without
        // clustertrustbundles): read as none rather than refusing to start.
        if (err.code === 403 && kind === 'clusterTrustBundles') return false
        throw err
      }))
      if (!served) {
        this.informers.delete(kind)
        if (kind === 'clusterTrustBundles') this.log.warn({ kind, api: groupVersion }, 'ClusterTrustBundles not served (feature gate off) or not permitted: not watched; caCertificateRefs naming one do not resolve')
        else if (LATE_CRDS[kind] !== undefined) this.log.warn({ kind, api: groupVersion, crd: LATE_CRDS[kind].crd }, 'API not served (CRD not installed): not watched until its CRD is installed')
        else this.log.warn({ kind, api: groupVersion }, 'API not served (CRD not installed): not watched; install the chart\'s CRDs and restart the controller to use it')
      }
    }
    await Promise.all([...this.informers.entries()].map(async ([kind, i]) => await this.untilAnswered(`list of ${kind}`, async () => await i.start())))
    for (const [kind, late] of Object.entries(LATE_CRDS) as Array<[Kind, { crd: string, version: string }]>) {
      // Only kinds behind an enabled switch (their informer exists, or was dropped above).
      if (WATCHED[kind] === undefined || !this.enabled.has(kind)) continue
      this.watchCrd(kind, late.crd, late.version)
    }
  }

  /**
   * Watches the CRD of `kind` by name (RBAC: get, list, watch of that one CRD): Established
   * with `version` served → the kind is watched; deleted (or no longer served) → its watch is
   * stopped and its objects are read as none. Each change reconciles.
   */
  private watchCrd (kind: Kind, name: string, version: string): void {
    const path = paths.customResourceDefinitions
    const fieldSelector = `metadata.name=${name}`
    // Retries back off from 2 s to 5 min: a refusal that lasts (a chart older than this
    // controller, without the RBAC for the CRD) is retried, but not logged every few seconds.
    let retryMs = 2000
    const watch = new ListWatch<Crd>(path, new Watch(this.kc), async () => {
      const list = await this.api.get<{ items?: Crd[], metadata?: { resourceVersion?: string } }>(path, { fieldSelector })
      retryMs = 2000
      return { apiVersion: 'v1', kind: 'List', items: list.items ?? [], metadata: list.metadata ?? {} } as never
    }, false, undefined, fieldSelector)
    const sync = (crd: Crd | undefined) => {
      if (serves(crd, version)) this.startLate(kind, name)
      else void this.stopLate(kind, name)
    }
    watch.on('add', sync)
    watch.on('update', sync)
    watch.on('delete', () => sync(undefined))
    watch.on('error', (err: unknown) => {
      if (this.stopped) return
      this.log.warn({ kind, crd: name, err: (err as Error)?.message ?? String(err), retryInMs: retryMs }, 'watch of the CRD failed; retrying')
      setTimeout(() => { if (!this.stopped) watch.start().catch(() => {}) }, retryMs).unref()
      retryMs = Math.min(retryMs * 2, 300_000)
    })
    this.crdWatches.set(kind, watch)
    watch.start().catch(() => {})
  }

  /** The CRD of `kind` is served: watch the kind (not already watched). */
  private startLate (kind: Kind, crd: string): void {
    if (this.stopped || this.informers.has(kind)) return
    this.log.info({ kind, crd }, 'CRD installed: watching it now')
    const informer = this.informer(kind, WATCHED[kind])
    this.informers.set(kind, informer)
    this.late.add(kind)
    // A list that fails (the API not served yet a moment after Established) is retried by the
    // informer's error handler; 'connect' marks the kind synced and reconciles.
    informer.start().catch(() => {})
  }

  /** The CRD of `kind` is gone: stop watching the kind and forget its objects, then reconcile. */
  private async stopLate (kind: Kind, crd: string): Promise<void> {
    const informer = this.informers.get(kind)
    if (informer === undefined) return
    this.informers.delete(kind)
    this.synced.delete(kind)
    this.late.delete(kind)
    for (const k of [...this.specs.keys()]) if (k.startsWith(`${kind}/`)) this.specs.delete(k)
    this.log.info({ kind, crd }, 'CRD deleted or no longer served: not watched, read as none')
    await informer.stop()
    this.onChange(kind)
  }

  /**
   * Retries what the API server may refuse for a while after it starts or a CRD is installed
   * (429 "storage is (re)initializing", 5xx, a connection refused) with backoff up to 30 s
   * per try; an answer that will not change (401, 403, 404, ...) fails at once. Without
   * this, a controller started just after its CRDs exited with "cannot start".
   */
  private async untilAnswered<T> (what: string, attempt: () => Promise<T>): Promise<T> {
    for (let delay = 250; ; delay = Math.min(delay * 2, 30_000)) {
      try {
        return await attempt()
      } catch (err) {
        const code = (err as { code?: number | string }).code
        const transient = typeof code !== 'number' || code === 429 || code >= 500
        if (!transient) throw err
        this.log.warn({ err: (err as Error)?.message ?? String(err), retryInMs: delay }, `${what} failed; retrying`)
        await new Promise(resolve => setTimeout(resolve, delay))
      }
    }
  }

  /** The kinds watched (PorticoModel only with gatewayModels.enabled and its CRD served). */
  get watched (): Kind[] {
    return [...this.informers.keys()]
  }

  /** True once every kind has been listed. */
  get ready (): boolean {
    for (const kind of this.informers.keys()) if (!this.synced.has(kind) && !this.late.has(kind)) return false
    return true
  }

  state (): ClusterState {
    const list = (kind: Kind) => (this.informers.get(kind)?.list() ?? []) as never[]
    return {
      gatewayClasses: list('gatewayClasses'),
      gateways: list('gateways'),
      httpRoutes: list('httpRoutes'),
      ...(this.informers.has('grpcRoutes') ? { grpcRoutes: list('grpcRoutes') } : {}),
      ...(this.informers.has('tlsRoutes') ? { tlsRoutes: list('tlsRoutes') } : {}),
      ...(this.informers.has('tcpRoutes') ? { tcpRoutes: list('tcpRoutes') } : {}),
      ...(this.informers.has('udpRoutes') ? { udpRoutes: list('udpRoutes') } : {}),
      listenerSets: list('listenerSets'),
      referenceGrants: list('referenceGrants'),
      services: list('services'),
      endpointSlices: list('endpointSlices'),
      secrets: list('secrets'),
      namespaces: list('namespaces'),
      parameters: list('parameters'),
      backendTLSPolicies: list('backendTLSPolicies'),
      configMaps: list('configMaps'),
      ...(this.informers.has('clusterTrustBundles') ? { clusterTrustBundles: list('clusterTrustBundles') } : {}),
      // Absent (not empty) when the CRD is not served: the translation then reports nothing for it.
      ...(this.informers.has('porticoPolicies') ? { porticoPolicies: list('porticoPolicies') } : {}),
      ...(this.informers.has('porticoBackends') ? { porticoBackends: list('porticoBackends') } : {}),
      ...(this.informers.has('porticoModels') ? { porticoModels: list('porticoModels') } : {}),
      // The extension on: pools (none without the CRD) and Pods; off: absent, so pool
      // backendRefs are InvalidKind.
      ...(this.inferenceExtension ? { inferencePools: list('inferencePools') } : {}),
      ...(this.informers.has('pods') ? { pods: list('pods') } : {})
    }
  }

  get<T> (kind: Kind, namespace: string | undefined, name: string): T | undefined {
    return this.informers.get(kind)?.get(name, namespace) as T | undefined
  }

  async stop (): Promise<void> {
    this.stopped = true
    await Promise.all([...this.informers.values(), ...this.crdWatches.values()].map(i => i.stop()))
  }
}
