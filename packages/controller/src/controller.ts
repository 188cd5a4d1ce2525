/**
 * The control loop. Informers feed a debounced reconcile: translate the cluster (pure),
 * hand every Gateway's IR to the xDS server (all replicas), and — on the leader only —
 * apply each Gateway's proxy objects and write statuses. A Gateway is Programmed once one
 * of its proxies ACKed its current config version; a NACK is a Warning Event on it.
 */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Logger } from 'pino'
import type { KubeConfig } from '@kubernetes/client-node'
import { translate, type GatewayResult, type TranslationResult } from './translate/translate.ts'
import { condition } from './translate/conditions.ts'
import type { Service } from './translate/gateway-api.ts'
import { Informers } from './kube/informers.ts'
import { KubeError, KubeHttp, paths } from './kube/http.ts'
import { StatusWriter } from './status/writer.ts'
import { gatewayAddresses, unusableAddresses } from './status/addresses.ts'
import { XdsServer, type ProxyIdentity, type XdsServerHooks } from './xds/server.ts'
import { renderProxy, safeName } from './deployer/render.ts'
import { proxySettings } from './deployer/parameters.ts'
import { applyObjects } from './deployer/apply.ts'
import type { ControllerSettings } from './settings.ts'
import type { LeaderElector } from './leader.ts'
import { supportedFeatures, type CustomResourceDefinition } from './features.ts'
import { listenerSetProgrammed } from './translate/listener-sets.ts'
import { meshConfigured } from './translate/mesh.ts'
import { meshCondition } from './status/mesh.ts'
import type { MeshStateReport } from '@portico/xds'

export { SUPPORTED_FEATURES } from './features.ts'

export interface ControllerLogs {
  syncer: Logger
  translator: Logger
  gatewayController: Logger
  deployer: Logger
}

export class Controller {
  readonly xds: XdsServer
  readonly metrics = new Registry()
  private readonly settings: ControllerSettings
  private readonly api: KubeHttp
  private readonly informers: Informers
  private readonly status: StatusWriter
  private readonly logs: ControllerLogs
  private leader: LeaderElector | null = null
  private timer: NodeJS.Timeout | undefined
  private firstChange = 0
  private last: TranslationResult | null = null
  /** Config version each Gateway's proxies last ACKed. */
  private readonly acked = new Map<string, string>()
  private readonly deployed = new Map<string, string>()
  private readonly m: {
    reconciles: Counter<'result'>
    translation: Histogram
    proxies: Gauge
    acks: Counter<'gateway'>
    nacks: Counter<'gateway'>
    gateways: Gauge
    routes: Gauge
  }

  constructor (kc: KubeConfig, settings: ControllerSettings, logs: ControllerLogs, authenticate?: XdsServerHooks['authenticate']) {
    this.settings = settings
    this.logs = logs
    this.api = new KubeHttp(kc)
    this.status = new StatusWriter(this.api, settings.controllerName, logs.gatewayController)
    this.informers = new Informers(kc, () => this.schedule(), logs.syncer, { gatewayModels: settings.gatewayModels, inferenceExtension: settings.inferenceExtension, mesh: meshConfigured(settings.mesh) })
    const registers = [this.metrics]
    collectDefaultMetrics({ register: this.metrics, prefix: 'portico_controller_' })
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) this.metrics.removeSingleMetric(`portico_controller_nodejs_${name}`)
    this.m = {
      reconciles: new Counter({ name: 'portico_controller_reconciles_total', help: 'Reconciles, by result.', labelNames: ['result'], registers }),
      translation: new Histogram({ name: 'portico_controller_translation_duration_seconds', help: 'Time to translate the cluster into proxy config.', buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registers }),
      proxies: new Gauge({ name: 'portico_controller_xds_connected_proxies', help: 'Proxies connected to this replica.', registers }),
      acks: new Counter({ name: 'portico_controller_xds_acks_total', help: 'Config versions accepted by proxies.', labelNames: ['gateway'], registers }),
      nacks: new Counter({ name: 'portico_controller_xds_rejects_total', help: 'Config versions rejected by proxies (NACK).', labelNames: ['gateway'], registers }),
      gateways: new Gauge({ name: 'portico_controller_gateways', help: 'Gateways of Portico\'s classes.', registers }),
      routes: new Gauge({ name: 'portico_controller_httproutes', help: 'HTTPRoutes with a Portico parent.', registers })
    }
    this.xds = new XdsServer({
      ...(authenticate !== undefined ? { authenticate } : {}),
      onAck: (p, version) => this.onAck(p, version),
      onNack: (p, version, message) => this.onNack(p, version, message),
      onConnect: () => this.m.proxies.inc(),
      onDisconnect: p => {
        this.m.proxies.dec()
        if (this.meshReports.get(p.gateway)?.delete(p.nodeId) === true) this.gatewayStatusChanged(p.gateway)
      },
      onMeshState: (p, report) => this.onMeshState(p, report),
      log: logs.syncer
    })
  }

  get ready (): boolean {
    return this.informers.ready
  }

  async start (leader: LeaderElector | null): Promise<void> {
    this.leader = leader
    if (leader !== null) {
      leader.onChange = isLeader => {
        this.logs.gatewayController.info({ leader: isLeader }, isLeader ? 'became leader: writing status and deploying proxies' : 'no longer leader')
        if (isLeader) this.schedule()
      }
    }
    await this.ensureGatewayClass()
    await this.readFeatures()
    await this.informers.start()
    if (this.settings.gatewayModels) {
      const watching = this.informers.watched.includes('porticoModels')
      this.logs.gatewayController.info({ gatewayModels: true, watching }, watching ? 'model API on: watching PorticoModels' : 'model API on, but PorticoModels are not served (CRD not installed): not watched')
    }
    if (meshConfigured(this.settings.mesh)) {
      this.logs.gatewayController.info({ mesh: this.settings.mesh, builtinClass: this.settings.gatewayClassName }, this.settings.mesh.autoEnabled ? `mesh: every Gateway of class ${this.settings.gatewayClassName} is in the Istio mesh unless its parameters opt out; watching Pods` : 'mesh configured: Gateways whose parameters opt in are in the Istio mesh; watching Pods')
    }
    if (this.settings.inferenceExtension) {
      const watching = this.informers.watched.includes('inferencePools')
      this.logs.gatewayController.info({ inferenceExtension: true, watching }, watching ? 'inference extension on: watching InferencePools and Pods' : 'inference extension on, but InferencePools are not served (CRD not installed): none read until the CRD is installed (watched: no restart needed)')
    }
    this.schedule()
  }

  private get isLeader (): boolean {
    return this.leader === null || this.leader.leader
  }

  /** The GatewayClass `portico` exists and names this controller (and its parameters). */
  private async ensureGatewayClass (): Promise<void> {
    const name = this.settings.gatewayClassName
    const params = this.settings.classParameters[name]
    const spec: Record<string, unknown> = { controllerName: this.settings.controllerName, description: 'Portico gateways' }
    if (params !== undefined) spec.parametersRef = { group: 'portico.dev', kind: 'PorticoParameters', name: params.name, namespace: params.namespace }
    try {
      await this.api.apply(paths.gatewayClass(name), { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'GatewayClass', metadata: { name }, spec }, 'portico-controller')
    } catch (err) {
      this.logs.gatewayController.warn({ err: (err as Error).message, gatewayClass: name }, 'cannot create or update the GatewayClass')
    }
  }

  /** The features the GatewayClasses claim: those the installed HTTPRoute CRD carries (features.ts). */
  private features: string[] = supportedFeatures(undefined)

  /**
   * Reads the installed HTTPRoute CRD once at start (a CRD upgrade, e.g. standard →
   * experimental channel, needs a controller restart, as installing PorticoParameters does).
   */
  private async readFeatures (): Promise<void> {
    // Kinds that features need beyond the core (FEATURE_KINDS): served only with their CRD.
    const kinds = new Set<string>()
    for (const [kind, path] of [['ListenerSet', paths.listenerSets], ['GRPCRoute', paths.grpcRoutes], ['TLSRoute', paths.tlsRoutes], ['TCPRoute', paths.tcpRoutes], ['UDPRoute', paths.udpRoutes], ['ClusterTrustBundle', paths.clusterTrustBundles]] as const) {
      if (await this.api.get(path, { limit: '1' }).then(() => true, () => false)) kinds.add(kind)
    }
    const gatewayCrd = await this.api.get<CustomResourceDefinition>(paths.gatewayCrd).catch(() => undefined)
    try {
      const crd = await this.api.get<CustomResourceDefinition>(paths.httpRouteCrd)
      this.features = supportedFeatures(crd, undefined, kinds, gatewayCrd)
    } catch (err) {
      this.features = supportedFeatures(undefined, undefined, kinds, gatewayCrd)
      this.logs.gatewayController.warn({ err: (err as Error).message }, 'cannot read the HTTPRoute CRD: claiming only the features that need no channel-specific field')
    }
    this.logs.gatewayController.info({ supportedFeatures: this.features }, 'supported features')
  }

  /**
   * Debounced: a reconcile starts once changes have been quiet for as long as the last
   * reconcile took (5 to 50 ms) — short when translation is cheap, so a change reaches the
   * proxies fast; longer for big clusters, so a burst of changes folds into few reconciles
   * and translation takes at most about half the CPU — and never more than 200 ms after the
   * first change.
   */
  schedule (): void {
    const now = Date.now()
    if (this.firstChange === 0) this.firstChange = now
    clearTimeout(this.timer)
    const quiet = Math.min(50, Math.max(5, Math.ceil(this.lastReconcileMs)))
    const wait = Math.max(0, Math.min(quiet, 200 - (now - this.firstChange)))
    this.timer = setTimeout(() => {
      this.firstChange = 0
      void this.reconcile()
    }, wait)
  }

  /** Duration of the last reconcile's synchronous part (translation and push), ms. */
  private lastReconcileMs = 0

  private async reconcile (): Promise<void> {
    if (!this.informers.ready) return
    const started = performance.now()
    let result: TranslationResult
    try {
      result = translate(this.informers.state(), { controllerName: this.settings.controllerName, discoveryNamespaceSelectors: this.settings.discoveryNamespaceSelectors, mesh: { settings: this.settings.mesh, builtinClass: this.settings.gatewayClassName } })
    } catch (err) {
      this.m.reconciles.inc({ result: 'error' })
      this.logs.translator.error({ err }, 'translation failed')
      return
    }
    this.m.translation.observe((performance.now() - started) / 1000)
    this.m.reconciles.inc({ result: 'ok' })
    this.m.gateways.set(result.gateways.length)
    this.m.routes.set(result.routes.length)
    const previous = this.last
    this.last = result
    const live = new Set<string>()
    for (const gw of result.gateways) {
      const key = `${gw.namespace}/${gw.name}`
      live.add(key)
      if (gw.accepted) this.xds.setConfig(key, gw.ir)
      this.logs.translator.debug({ gateway: key, version: gw.ir.version, binds: gw.ir.binds.length, backends: gw.ir.backends.length }, 'translated')
    }
    this.lastReconcileMs = performance.now() - started
    for (const gw of previous?.gateways ?? []) {
      const key = `${gw.namespace}/${gw.name}`
      if (!live.has(key)) {
        this.xds.removeGateway(key)
        this.acked.delete(key)
        this.meshReports.delete(key)
        this.deployed.delete(key)
      }
    }
    if (!this.isLeader) return
    for (const cls of result.classes) this.status.gatewayClass(cls.name, cls.conditions, this.features, cls.uid)
    for (const gw of result.gateways) {
      if (gw.accepted) await this.deploy(gw)
      this.writeGatewayStatus(gw)
    }
    for (const r of result.routes) {
      if (r.kind !== undefined) this.status.otherRoute(r.kind, r.namespace, r.name, r.parents, r.uid)
      else this.status.httpRoute(r.namespace, r.name, r.parents, r.uid)
    }
    for (const p of result.backendTLSPolicies) this.status.backendTLSPolicy(p.namespace, p.name, p.ancestors, p.uid)
    // A policy no Gateway of ours uses any more loses our ancestors.
    const policies = new Set(result.backendTLSPolicies.map(p => `${p.namespace}/${p.name}`))
    for (const p of previous?.backendTLSPolicies ?? []) {
      if (!policies.has(`${p.namespace}/${p.name}`)) this.status.backendTLSPolicy(p.namespace, p.name, [], p.uid)
    }
    for (const p of result.porticoPolicies ?? []) this.status.porticoPolicy(p.namespace, p.name, p.ancestors, p.uid)
    for (const m of result.porticoModels ?? []) this.status.porticoModel(m.namespace, m.name, m.model, m.parents, m.uid)
    for (const p of result.inferencePools ?? []) this.status.inferencePool(p.namespace, p.name, p.parents, p.uid)
    // A pool no route of ours names any more loses our parents.
    const pools = new Set((result.inferencePools ?? []).map(p => `${p.namespace}/${p.name}`))
    for (const p of previous?.inferencePools ?? []) {
      if (!pools.has(`${p.namespace}/${p.name}`)) this.status.inferencePool(p.namespace, p.name, [], p.uid)
    }
  }

  private async deploy (gw: GatewayResult): Promise<void> {
    const key = `${gw.namespace}/${gw.name}`
    const obj = this.informers.get<{ metadata: { uid?: string, labels?: Record<string, string>, annotations?: Record<string, string> }, spec: { gatewayClassName: string, infrastructure?: { labels?: Record<string, string>, annotations?: Record<string, string> } } }>('gateways', gw.namespace, gw.name)
    if (obj?.metadata.uid === undefined) return
    const objects = renderProxy({
      namespace: gw.namespace,
      gateway: {
        name: gw.name,
        uid: obj.metadata.uid,
        className: obj.spec.gatewayClassName,
        ...(obj.spec.infrastructure?.labels !== undefined ? { labels: obj.spec.infrastructure.labels } : {}),
        ...(obj.spec.infrastructure?.annotations !== undefined ? { annotations: obj.spec.infrastructure.annotations } : {})
      },
      ports: gw.ports,
      ...(gw.requestedAddresses !== undefined ? { addresses: gw.requestedAddresses } : {}),
      ...proxySettings(this.settings, gw.parameters),
      // After the settings: Cluster routability decides the Service type over PorticoParameters'.
      ...(gw.addressRoutability !== undefined ? { addressRoutability: gw.addressRoutability } : {}),
      xdsAddress: this.settings.xdsAddress,
      ...(this.xdsCa !== undefined ? { xdsCa: this.xdsCa } : {}),
      tokenAudience: this.settings.tokenAudience,
      ...(gw.mesh !== undefined ? { mesh: gw.mesh } : {}),
      managedBy: 'portico'
    })
    const fingerprint = JSON.stringify(objects)
    if (this.deployed.get(key) === fingerprint) return
    try {
      await applyObjects(this.api, objects)
      this.deployed.set(key, fingerprint)
      this.logs.deployer.info({ gateway: key }, 'proxy deployed')
    } catch (err) {
      this.deployError.set(key, (err as Error).message)
      this.logs.deployer.error({ gateway: key, err: (err as Error).message }, 'cannot deploy the proxy')
      return
    }
    this.deployError.delete(key)
  }

  private readonly deployError = new Map<string, string>()
  /** PEM of the xDS CA, written into each proxy's ConfigMap (tls and either modes). */
  xdsCa: string | undefined

  private writeGatewayStatus (gw: GatewayResult): void {
    const key = `${gw.namespace}/${gw.name}`
    const version = gw.ir.version
    const deployError = this.deployError.get(key)
    const svc = this.informers.get<Service>('services', gw.namespace, safeName(gw.name))
    const unusable = unusableAddresses(gw.requestedAddresses, svc, gw.addressRoutability)
    let programmed
    if (!gw.accepted) programmed = condition('Programmed', false, 'Invalid', 'the Gateway is not accepted', gw.generation)
    else if (deployError !== undefined) programmed = condition('Programmed', false, 'DeploymentFailed', deployError, gw.generation)
    else if (unusable !== undefined) programmed = condition('Programmed', false, 'AddressNotUsable', unusable, gw.generation)
    else if (this.acked.get(key) === version) programmed = condition('Programmed', true, 'Programmed', `config ${version} accepted by a proxy`, gw.generation)
    else programmed = condition('Programmed', false, 'Pending', `waiting for a proxy to accept config ${version}`, gw.generation)
    const addresses = gatewayAddresses(svc, gw.addressRoutability) // the LB ingress; nothing while it is pending (addresses.ts)
    // The mesh condition where the mesh is anywhere in view: the chart configures it, or the
    // Gateway's parameters speak of it.
    const mesh = gw.mesh !== undefined || meshConfigured(this.settings.mesh) || gw.parameters?.mesh !== undefined
      ? [meshCondition(gw.mesh !== undefined, [...this.meshReports.get(key)?.values() ?? []], gw.generation)]
      : []
    this.status.gateway(gw.namespace, gw.name, { conditions: [...gw.conditions, programmed, ...mesh], listeners: gw.listeners, addresses, ...(gw.attachedListenerSets !== undefined ? { attachedListenerSets: gw.attachedListenerSets } : {}) }, gw.uid)
    // Its ListenerSets' statuses follow: their Programmed is the Gateway's (listener-sets.ts).
    for (const ls of this.last?.listenerSets ?? []) {
      if (ls.gateway === key) this.status.listenerSet(ls.namespace, ls.name, { conditions: [...ls.conditions, listenerSetProgrammed(ls, programmed)], listeners: ls.listeners }, ls.uid)
    }
  }

  /** Mesh identity states the connected proxies report, by Gateway and node. */
  private readonly meshReports = new Map<string, Map<string, { pod: string, report: MeshStateReport }>>()

  private onMeshState (proxy: ProxyIdentity, report: MeshStateReport): void {
    let reports = this.meshReports.get(proxy.gateway)
    if (reports === undefined) this.meshReports.set(proxy.gateway, reports = new Map())
    const before = reports.get(proxy.nodeId)?.report
    reports.set(proxy.nodeId, { pod: proxy.pod, report })
    if (before?.state === report.state && before.reason === report.reason) return
    this.logs.syncer.info({ gateway: proxy.gateway, pod: proxy.pod, mesh: report.state, reason: report.reason }, `proxy mesh identity ${report.state}`)
    this.gatewayStatusChanged(proxy.gateway)
  }

  /** Rewrites a Gateway's status now (leader only), e.g. when what its proxies report changes. */
  private gatewayStatusChanged (gateway: string): void {
    const gw = this.last?.gateways.find(g => `${g.namespace}/${g.name}` === gateway)
    if (gw !== undefined && this.isLeader) this.writeGatewayStatus(gw)
  }

  private onAck (proxy: ProxyIdentity, version: string): void {
    this.m.acks.inc({ gateway: proxy.gateway })
    // The gateway's rejects series exists from its first push (at 0): a rate of rejects
    // reads 0 rather than no data.
    this.m.nacks.inc({ gateway: proxy.gateway }, 0)
    if (this.acked.get(proxy.gateway) === version) return
    this.acked.set(proxy.gateway, version)
    this.logs.syncer.info({ gateway: proxy.gateway, pod: proxy.pod, version }, 'proxy accepted config')
    const gw = this.last?.gateways.find(g => `${g.namespace}/${g.name}` === proxy.gateway)
    if (gw !== undefined && this.isLeader) this.writeGatewayStatus(gw)
  }

  private onNack (proxy: ProxyIdentity, version: string, message: string): void {
    this.m.nacks.inc({ gateway: proxy.gateway })
    const [ns, name] = proxy.gateway.split('/') as [string, string]
    const gw = this.informers.get<{ metadata: { uid?: string } }>('gateways', ns, name)
    void this.api.request({
      method: 'POST',
      path: `/api/v1/namespaces/${ns}/events`,
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${name}.`, namespace: ns },
        involvedObject: { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', name, namespace: ns, uid: gw?.metadata.uid },
        reason: 'ConfigRejected',
        message: `proxy ${proxy.pod} rejected config ${version}: ${message}`.slice(0, 1024),
        type: 'Warning',
        source: { component: 'portico-controller' },
        firstTimestamp: new Date().toISOString(),
        lastTimestamp: new Date().toISOString(),
        count: 1
      }
    }).catch((err: KubeError) => this.logs.syncer.warn({ err: err.message }, 'cannot record the NACK event'))
  }

  /** Resolves once queued status writes are done. */
  statusIdle (): Promise<void> {
    return this.status.idle()
  }

  async stop (): Promise<void> {
    clearTimeout(this.timer)
    await this.informers.stop()
  }
}
