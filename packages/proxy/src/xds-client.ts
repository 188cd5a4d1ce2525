/**
 * Cluster mode's config source: a delta xDS stream to the controller. The proxy names its
 * Gateway (node metadata `role: <namespace>~<gateway>`), sends its service-account token,
 * subscribes to everything, and applies each response through the same engine as a config
 * file: a response that installs is ACKed, one that does not is NACKed with the error and
 * the last good config keeps serving. When the controller is away the proxy keeps serving
 * and reconnects with backoff, telling the controller what it already has.
 */

import { hostname } from 'node:os'
import { credentials, Metadata, type ClientDuplexStream } from '@grpc/grpc-js'
import { assembleIR, decodeResource, meshStateFields, protocol, RESOURCE_TYPE_URL, type DecodedResource, type DeltaDiscoveryRequest, type DeltaDiscoveryResponse, type MeshStateReport, type XdsNode } from '@portico/xds'
import { DEFAULT_MAX_CONFIG_BYTES, readReferencedFile, type ProxyIR } from '@portico/engine'
import type { Logger } from 'pino'

/**
 * Subscribes to the mesh identity's state (Portico.onMeshState: the mesh CA identity's): the
 * listener is called with the state now and at each change; returns the unsubscribe function,
 * or null when there is no such identity. Only the state and reason cross: nothing secret.
 */
export type WatchMeshState = (listener: (state: MeshStateReport) => void) => (() => void) | null

/** A service-account token is a JWT of a few KiB; a file much larger is not one. */
const MAX_TOKEN_BYTES = 64 * 1024

export interface XdsClientOptions {
  /** `http://host:port` (plaintext) or `https://host:port` (TLS). */
  address: string
  /** PEM file of the CA that signs the controller's certificate (TLS). */
  caFile?: string
  /** File holding the projected service-account token, read on every (re)connect. */
  tokenFile?: string
  namespace: string
  gateway: string
  podName: string
  /** The mesh identity's state (a Gateway in the mesh): it goes to the controller in the node metadata. */
  watchMeshState?: WatchMeshState
  /** Installs a config; throws (with a reason for the NACK) if it cannot. */
  apply: (ir: ProxyIR) => Promise<void>
  log: Logger
}

const BACKOFF_START_MS = 500
const BACKOFF_MAX_MS = 30_000

export class XdsClient {
  private readonly options: XdsClientOptions
  /** The resources of the config in force (last ACKed). */
  private accepted = new Map<string, { version: string, resource: DecodedResource }>()
  private stream: ClientDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse> | null = null
  private client: InstanceType<ReturnType<typeof protocol>['client']> | null = null
  private backoffMs = BACKOFF_START_MS
  private timer: NodeJS.Timeout | undefined
  private closed = false
  private applying: Promise<void> = Promise.resolve()
  /** The mesh identity's last state (null: no mesh identity from the CA) and its unsubscribe. */
  private meshState: MeshStateReport | null = null
  private unwatchMesh: (() => void) | null = null
  /** True once a complete config has been installed. */
  synced = false
  connected = false
  lastError: string | null = null

  constructor (options: XdsClientOptions) {
    this.options = options
  }

  start (): void {
    const url = new URL(this.options.address)
    const target = `${url.hostname}:${url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80'}`
    const creds = url.protocol === 'https:'
      ? credentials.createSsl(this.options.caFile !== undefined ? Buffer.from(readReferencedFile(this.options.caFile, DEFAULT_MAX_CONFIG_BYTES)) : null)
      : credentials.createInsecure()
    const Client = protocol().client
    this.client = new Client(target, creds, { 'grpc.keepalive_time_ms': 30_000, 'grpc.keepalive_timeout_ms': 10_000 })
    this.unwatchMesh = this.options.watchMeshState?.(state => this.onMeshState(state)) ?? null
    this.connect()
  }

  /** The node this proxy is: its Gateway, pod, and (in the mesh) its identity's state now. */
  private node (): XdsNode {
    const { namespace, gateway, podName } = this.options
    return {
      id: `portico~${podName}.${namespace}~${hostname()}`,
      metadata: { fields: { role: { stringValue: `${namespace}~${gateway}` }, name: { stringValue: podName }, namespace: { stringValue: namespace }, ...(this.meshState !== null ? meshStateFields(this.meshState) : {}) } },
      userAgentName: 'portico'
    }
  }

  /** A change of the mesh state: a request with the node alone tells the controller (a new stream carries it anyway). */
  private onMeshState (state: MeshStateReport): void {
    this.meshState = { state: state.state, ...(state.reason !== undefined ? { reason: state.reason } : {}) }
    this.stream?.write({ node: this.node(), typeUrl: RESOURCE_TYPE_URL })
  }

  private connect (): void {
    if (this.closed || this.client === null) return
    const metadata = new Metadata()
    if (this.options.tokenFile !== undefined) {
      try {
        // Bounded and regular-file-only, as every file a config names (a reconnect reads it on
        // the event loop that serves requests).
        metadata.set('authorization', `Bearer ${readReferencedFile(this.options.tokenFile, MAX_TOKEN_BYTES).trim()}`)
      } catch (err) {
        this.options.log.warn({ err: (err as Error).message, file: this.options.tokenFile }, 'cannot read the xDS token')
      }
    }
    const stream = (this.client as unknown as { DeltaAggregatedResources(m: Metadata): ClientDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse> }).DeltaAggregatedResources(metadata)
    this.stream = stream
    stream.write({
      node: this.node(),
      typeUrl: RESOURCE_TYPE_URL,
      resourceNamesSubscribe: ['*'],
      initialResourceVersions: Object.fromEntries([...this.accepted].map(([name, r]) => [name, r.version]))
    })
    stream.on('data', (res: DeltaDiscoveryResponse) => {
      this.connected = true
      this.backoffMs = BACKOFF_START_MS
      // Responses apply one at a time, in order.
      this.applying = this.applying.then(() => this.onResponse(stream, res))
    })
    const retry = (why: string) => {
      if (this.stream !== stream) return
      this.stream = null
      this.connected = false
      this.lastError = why
      if (this.closed) return
      const delay = this.backoffMs
      this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS)
      this.options.log.warn({ err: why, retryInMs: delay, address: this.options.address }, 'xDS stream lost; keeping the current config and reconnecting')
      this.timer = setTimeout(() => this.connect(), delay)
    }
    stream.on('error', err => retry((err as Error).message))
    stream.on('end', () => retry('stream ended by the controller'))
  }

  private async onResponse (stream: ClientDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>, res: DeltaDiscoveryResponse): Promise<void> {
    const next = new Map(this.accepted)
    let error: string | null = null
    try {
      for (const name of res.removedResources ?? []) next.delete(name)
      for (const r of res.resources ?? []) next.set(r.name, { version: r.version, resource: decodeResource(r.resource) })
      const ir = assembleIR([...next.values()].map(r => r.resource), res.systemVersionInfo)
      await this.options.apply(ir)
    } catch (err) {
      error = (err as Error).message
    }
    const reply: DeltaDiscoveryRequest = { typeUrl: RESOURCE_TYPE_URL, responseNonce: res.nonce ?? '' }
    if (error === null) {
      this.accepted = next
      this.synced = true
      this.lastError = null
      this.options.log.info({ version: res.systemVersionInfo, resources: next.size }, 'config received from the controller')
    } else {
      reply.errorDetail = { code: 3, message: error }
      this.lastError = error
      this.options.log.error({ version: res.systemVersionInfo, err: error }, 'config from the controller rejected (NACK); keeping the last good config')
    }
    if (this.stream === stream) stream.write(reply)
  }

  close (): void {
    this.closed = true
    clearTimeout(this.timer)
    this.unwatchMesh?.()
    this.stream?.cancel()
    this.client?.close()
  }
}
