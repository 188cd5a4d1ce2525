/**
 * The config-push server: Envoy's delta aggregated discovery (xDS) with Portico's resource
 * type. Each proxy opens one stream, names its Gateway in the node metadata (`role:
 * <namespace>~<gateway>`), proves it with its service-account token (checked by the
 * `authenticate` hook, a TokenReview in cluster mode), subscribes with the wildcard, and
 * then receives its Gateway's resources — all at first, then only what changed — each
 * response with a nonce it ACKs, or NACKs with an error detail. A proxy in the mesh reports its
 * identity's state in the node metadata (@portico/xds mesh-state.ts), again on each change.
 */

import { randomBytes } from 'node:crypto'
import { status as GrpcStatus, type Metadata, type Server, type ServerDuplexStream } from '@grpc/grpc-js'
import { protocol, readMeshState, RESOURCE_TYPE_URL, encodeResources, type DeltaDiscoveryRequest, type DeltaDiscoveryResponse, type EncodedResource, type MeshStateReport } from '@portico/xds'
import type { ProxyIR } from '@portico/engine/ir'

/** Requests kept while a new stream is authenticated (a proxy sends at most a few then). */
const MAX_EARLY_REQUESTS = 16

export interface ProxyIdentity {
  /** `<namespace>/<gateway>` */
  gateway: string
  pod: string
  nodeId: string
}

export interface XdsServerHooks {
  /**
   * Checks the stream's credentials against the Gateway the node claims; returns an error
   * message to refuse it. Without a hook every stream is accepted (tests, plaintext dev).
   */
  authenticate?(claimed: { namespace: string, gateway: string }, metadata: Metadata): Promise<string | null>
  onAck?(proxy: ProxyIdentity, version: string): void
  onNack?(proxy: ProxyIdentity, version: string, message: string): void
  onConnect?(proxy: ProxyIdentity): void
  onDisconnect?(proxy: ProxyIdentity): void
  /** The proxy's mesh identity state (node metadata, xds/mesh-state.ts): on connect and on every change. */
  onMeshState?(proxy: ProxyIdentity, report: MeshStateReport): void
  log?: { info(fields: Record<string, unknown>, msg: string): void, warn(fields: Record<string, unknown>, msg: string): void, debug(fields: Record<string, unknown>, msg: string): void }
}

interface Snapshot {
  version: string
  resources: Map<string, EncodedResource>
}

type Stream = ServerDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>

interface Connection {
  stream: Stream
  proxy: ProxyIdentity
  /** Versions of the resources this proxy will have once it accepts what was sent. */
  sent: Map<string, string>
  /** Versions of the resources in the proxy's last accepted config. */
  acked: Map<string, string>
  /** nonce → the config version and resource versions it carried, awaiting (N)ACK. */
  pending: Map<string, { version: string, resources: Map<string, string> }>
}

export class XdsServer {
  private readonly snapshots = new Map<string, Snapshot>()
  private readonly connections = new Set<Connection>()
  private readonly hooks: XdsServerHooks

  constructor (hooks: XdsServerHooks = {}) {
    this.hooks = hooks
  }

  /** Registers the ADS service on a grpc-js server. */
  register (server: Server): void {
    server.addService(protocol().service, {
      DeltaAggregatedResources: (stream: Stream) => { void this.onStream(stream) }
    })
  }

  /** Sets a Gateway's config; connected proxies of that Gateway get the difference. */
  setConfig (gateway: string, ir: ProxyIR): void {
    const previous = this.snapshots.get(gateway)
    if (previous?.version === ir.version) return
    const snapshot = { version: ir.version, resources: encodeResources(ir) }
    this.snapshots.set(gateway, snapshot)
    for (const c of this.connections) if (c.proxy.gateway === gateway) this.push(c, snapshot)
  }

  /** Forgets a Gateway (deleted): its proxies get every resource removed. */
  removeGateway (gateway: string): void {
    if (!this.snapshots.delete(gateway)) return
    const empty: Snapshot = { version: 'removed', resources: new Map() }
    for (const c of this.connections) if (c.proxy.gateway === gateway) this.push(c, empty)
  }

  configVersion (gateway: string): string | undefined {
    return this.snapshots.get(gateway)?.version
  }

  /** Proxies connected now, by Gateway (for status and /debug). */
  connected (): ProxyIdentity[] {
    return [...this.connections].map(c => c.proxy)
  }

  private async onStream (stream: Stream): Promise<void> {
    let connection: Connection | null = null
    const fail = (code: GrpcStatus, details: string) => {
      this.hooks.log?.warn({ details }, 'xds stream refused')
      stream.emit('error', Object.assign(new Error(details), { code, details }))
    }
    const first = await new Promise<DeltaDiscoveryRequest | null>(resolve => {
      stream.once('data', resolve)
      stream.once('end', () => resolve(null))
      stream.once('error', () => resolve(null))
    })
    if (first === null) return
    // Requests that arrive while the stream is checked (a proxy's mesh state changing then)
    // are kept, in order, and handled once it is accepted; a few at most.
    const early: DeltaDiscoveryRequest[] = []
    const keep = (req: DeltaDiscoveryRequest) => { if (early.length < MAX_EARLY_REQUESTS) early.push(req) }
    stream.on('data', keep)
    const role = first.node?.metadata?.fields?.role?.stringValue ?? ''
    const [namespace, gateway] = role.split('~')
    if (first.node?.id === undefined || first.node.id === '' || namespace === undefined || gateway === undefined || namespace === '' || gateway === '') {
      fail(GrpcStatus.INVALID_ARGUMENT, 'the first request must carry node.id and node.metadata.role = <namespace>~<gateway>')
      return
    }
    if (first.typeUrl !== RESOURCE_TYPE_URL) {
      fail(GrpcStatus.INVALID_ARGUMENT, `unsupported type_url ${first.typeUrl ?? ''} (want ${RESOURCE_TYPE_URL})`)
      return
    }
    const refusal = await this.hooks.authenticate?.({ namespace, gateway }, stream.metadata) ?? null
    if (refusal !== null) {
      fail(GrpcStatus.PERMISSION_DENIED, refusal)
      return
    }
    const proxy: ProxyIdentity = { gateway: `${namespace}/${gateway}`, pod: first.node.metadata?.fields?.name?.stringValue ?? first.node.id, nodeId: first.node.id }
    const known = new Map(Object.entries(first.initialResourceVersions ?? {}))
    connection = { stream, proxy, sent: known, acked: new Map(known), pending: new Map() }
    this.connections.add(connection)
    this.hooks.onConnect?.(proxy)
    this.hooks.log?.info({ gateway: proxy.gateway, pod: proxy.pod }, 'proxy connected')
    const c = connection
    stream.off('data', keep)
    stream.on('data', (req: DeltaDiscoveryRequest) => this.onRequest(c, req))
    const close = () => {
      if (!this.connections.delete(c)) return
      this.hooks.onDisconnect?.(proxy)
      this.hooks.log?.info({ gateway: proxy.gateway, pod: proxy.pod }, 'proxy disconnected')
    }
    stream.on('end', () => { close(); stream.end() })
    stream.on('error', close)
    stream.on('cancelled', close)
    const snapshot = this.snapshots.get(proxy.gateway)
    // A subscription always gets every resource it asked for, even if it has them.
    if (snapshot !== undefined) this.push(c, snapshot, true)
    const mesh = readMeshState(first.node)
    if (mesh !== null) this.hooks.onMeshState?.(proxy, mesh)
    for (const req of early) this.onRequest(c, req)
  }

  private onRequest (c: Connection, req: DeltaDiscoveryRequest): void {
    // A request carrying the node again reports a change of the proxy's mesh state.
    const mesh = readMeshState(req.node)
    if (mesh !== null) this.hooks.onMeshState?.(c.proxy, mesh)
    const nonce = req.responseNonce ?? ''
    if (nonce === '') return
    const entry = c.pending.get(nonce)
    if (entry === undefined) return // a stale nonce: a newer response is on its way
    c.pending.delete(nonce)
    const { version } = entry
    if (req.errorDetail != null && (req.errorDetail.message ?? '') !== '') {
      // The proxy kept its last accepted config: the next push is computed against that.
      c.sent = new Map(c.acked)
      this.hooks.onNack?.(c.proxy, version, req.errorDetail.message ?? '')
      this.hooks.log?.warn({ gateway: c.proxy.gateway, pod: c.proxy.pod, version, error: req.errorDetail.message }, 'proxy rejected config (NACK)')
      return
    }
    c.acked = entry.resources
    this.hooks.onAck?.(c.proxy, version)
  }

  private push (c: Connection, snapshot: Snapshot, all = false): void {
    const resources: EncodedResource[] = []
    for (const [name, r] of snapshot.resources) {
      if (all || c.sent.get(name) !== r.version) resources.push(r)
    }
    const removed = [...c.sent.keys()].filter(name => !snapshot.resources.has(name))
    if (resources.length === 0 && removed.length === 0 && !all) return
    const nonce = randomBytes(8).toString('hex')
    for (const r of resources) c.sent.set(r.name, r.version)
    for (const name of removed) c.sent.delete(name)
    c.pending.set(nonce, { version: snapshot.version, resources: new Map(c.sent) })
    c.stream.write({ systemVersionInfo: snapshot.version, typeUrl: RESOURCE_TYPE_URL, resources, removedResources: removed, nonce })
    this.hooks.log?.debug({ gateway: c.proxy.gateway, pod: c.proxy.pod, version: snapshot.version, resources: resources.length, removed: removed.length }, 'config pushed')
  }
}
