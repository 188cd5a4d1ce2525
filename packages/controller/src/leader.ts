/**
 * Leader election with a coordination.k8s.io Lease: only the leader writes status and
 * deploys proxies (every replica serves xDS). The holder renews every `renewMs`; another
 * replica takes over once the lease has not been renewed for `leaseSeconds`.
 */

import { KubeError, type KubeHttp } from './kube/http.ts'

interface Lease {
  metadata: { name: string, namespace: string, resourceVersion?: string }
  spec: { holderIdentity?: string, leaseDurationSeconds?: number, renewTime?: string, acquireTime?: string, leaseTransitions?: number }
}

export class LeaderElector {
  private readonly api: KubeHttp
  private readonly path: string
  private readonly namespace: string
  private readonly name: string
  private readonly identity: string
  private readonly leaseSeconds: number
  private readonly renewMs: number
  private timer: NodeJS.Timeout | undefined
  leader = false
  onChange: ((leader: boolean) => void) | null = null

  constructor (api: KubeHttp, options: { namespace: string, name: string, identity: string, leaseSeconds?: number, renewMs?: number }) {
    this.api = api
    this.namespace = options.namespace
    this.name = options.name
    this.identity = options.identity
    this.leaseSeconds = options.leaseSeconds ?? 15
    this.renewMs = options.renewMs ?? 2000
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${options.namespace}/leases/${options.name}`
  }

  start (): void {
    const tick = async () => {
      let now = false
      try {
        now = await this.tryAcquireOrRenew()
      } catch {
        now = false
      }
      if (now !== this.leader) {
        this.leader = now
        this.onChange?.(now)
      }
      this.timer = setTimeout(() => { void tick() }, this.renewMs)
      this.timer.unref()
    }
    void tick()
  }

  private async tryAcquireOrRenew (): Promise<boolean> {
    const nowIso = new Date().toISOString().replace(/Z$/, '000Z')
    let lease: Lease
    try {
      lease = await this.api.get<Lease>(this.path)
    } catch (err) {
      if ((err as KubeError).code !== 404) throw err
      await this.api.request({
        method: 'POST',
        path: `/apis/coordination.k8s.io/v1/namespaces/${this.namespace}/leases`,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.name, namespace: this.namespace }, spec: { holderIdentity: this.identity, leaseDurationSeconds: this.leaseSeconds, acquireTime: nowIso, renewTime: nowIso, leaseTransitions: 0 } }
      })
      return true
    }
    const holder = lease.spec.holderIdentity
    const renewed = lease.spec.renewTime !== undefined ? Date.parse(lease.spec.renewTime) : 0
    const expired = renewed + (lease.spec.leaseDurationSeconds ?? this.leaseSeconds) * 1000 < Date.now()
    if (holder !== this.identity && !expired) return false
    const spec = { ...lease.spec, holderIdentity: this.identity, leaseDurationSeconds: this.leaseSeconds, renewTime: nowIso }
    if (holder !== this.identity) Object.assign(spec, { acquireTime: nowIso, leaseTransitions: (lease.spec.leaseTransitions ?? 0) + 1 })
    try {
      await this.api.request({ method: 'PUT', path: this.path, body: { ...lease, spec } })
      return true
    } catch (err) {
      if ((err as KubeError).code === 409) return false // someone else got there first
      throw err
    }
  }

  /** Gives the lease up (shutdown), so another replica takes over at once. */
  async release (): Promise<void> {
    clearTimeout(this.timer)
    if (!this.leader) return
    try {
      const lease = await this.api.get<Lease>(this.path)
      if (lease.spec.holderIdentity === this.identity) {
        await this.api.request({ method: 'PUT', path: this.path, body: { ...lease, spec: { ...lease.spec, holderIdentity: '', renewTime: new Date(0).toISOString() } } })
      }
    } catch {}
    this.leader = false
  }
}
