/**
 * Writes status: GatewayClasses, Gateways (with listeners, addresses, and Programmed once a
 * proxy accepted the config) and HTTPRoute parents. Writes are queued per object — a newer
 * desired status replaces an older one not yet written, so churn coalesces — skipped when
 * nothing changed, and retried on conflicts with a fresh read, so none is lost.
 * lastTransitionTime moves only when a condition's status changes.
 */

import type { Condition } from '../translate/gateway-api.ts'
import { withTransitionTimes } from '../translate/conditions.ts'
import { KubeError, KubeHttp, paths } from '../kube/http.ts'

type Key = string

interface Pending {
  key: Key
  write: () => Promise<void>
}

export interface StatusLog {
  warn(fields: Record<string, unknown>, msg: string): void
  debug(fields: Record<string, unknown>, msg: string): void
}

const MAX_ATTEMPTS = 5

export class StatusWriter {
  private readonly api: KubeHttp
  private readonly controllerName: string
  private readonly log: StatusLog
  private readonly queue = new Map<Key, Pending>()
  /** What was last written, by object (conditions without transition times). */
  private readonly written = new Map<Key, string>()
  private running = 0
  private readonly concurrency = 4
  /** Resolves when the queue is empty (tests, shutdown). */
  private idleWaiters: Array<() => void> = []

  constructor (api: KubeHttp, controllerName: string, log: StatusLog) {
    this.api = api
    this.controllerName = controllerName
    this.log = log
  }

  private enqueue (key: Key, fingerprint: string, write: () => Promise<void>): void {
    if (this.written.get(key) === fingerprint && !this.queue.has(key)) return
    this.queue.set(key, {
      key,
      write: async () => {
        await write()
        this.written.set(key, fingerprint)
      }
    })
    this.pump()
  }

  private pump (): void {
    while (this.running < this.concurrency && this.queue.size > 0) {
      const [key, job] = this.queue.entries().next().value as [Key, Pending]
      this.queue.delete(key)
      this.running++
      void this.attempt(job).finally(() => {
        this.running--
        this.pump()
        if (this.running === 0 && this.queue.size === 0) for (const w of this.idleWaiters.splice(0)) w()
      })
    }
  }

  private async attempt (job: Pending): Promise<void> {
    for (let i = 1; i <= MAX_ATTEMPTS; i++) {
      try {
        await job.write()
        return
      } catch (err) {
        const code = (err as KubeError).code
        if (code === 404) return // the object is gone
        if (i === MAX_ATTEMPTS) {
          this.log.warn({ object: job.key, err: (err as Error).message }, 'status write failed; will retry on the next change')
          this.written.delete(job.key)
          return
        }
        await new Promise(resolve => setTimeout(resolve, code === 409 ? 10 : 200 * i))
      }
    }
  }

  idle (): Promise<void> {
    if (this.running === 0 && this.queue.size === 0) return Promise.resolve()
    return new Promise(resolve => this.idleWaiters.push(resolve))
  }

  gatewayClass (name: string, conditions: Condition[], supportedFeatures: string[]): void {
    const fingerprint = JSON.stringify({ conditions, supportedFeatures })
    this.enqueue(`GatewayClass/${name}`, fingerprint, async () => {
      const current = await this.api.get<{ status?: { conditions?: Condition[] } }>(paths.gatewayClass(name))
      await this.api.mergePatch(`${paths.gatewayClass(name)}/status`, {
        status: {
          conditions: withTransitionTimes(conditions, current.status?.conditions, new Date().toISOString()),
          supportedFeatures: supportedFeatures.map(f => ({ name: f }))
        }
      })
    })
  }

  gateway (ns: string, name: string, status: { conditions: Condition[], listeners: Array<{ name: string, supportedKinds: unknown[], attachedRoutes: number, conditions: Condition[] }>, addresses: Array<{ type: string, value: string }> }): void {
    this.enqueue(`Gateway/${ns}/${name}`, JSON.stringify(status), async () => {
      const path = paths.gateway(ns, name)
      const current = await this.api.get<{ status?: { conditions?: Condition[], listeners?: Array<{ name: string, conditions?: Condition[] }> } }>(path)
      const now = new Date().toISOString()
      await this.api.mergePatch(`${path}/status`, {
        status: {
          conditions: withTransitionTimes(status.conditions, current.status?.conditions, now),
          listeners: status.listeners.map(l => ({
            ...l,
            conditions: withTransitionTimes(l.conditions, current.status?.listeners?.find(x => x.name === l.name)?.conditions, now)
          })),
          addresses: status.addresses
        }
      })
    })
  }

  /**
   * An HTTPRoute's parent statuses: ours are replaced, other controllers' are kept. A
   * read-modify-write with the resourceVersion, so a concurrent writer causes a retry.
   */
  httpRoute (ns: string, name: string, parents: Array<{ parentRef: unknown, controllerName: string, conditions: Condition[] }>): void {
    this.enqueue(`HTTPRoute/${ns}/${name}`, JSON.stringify(parents), async () => {
      const path = paths.httpRoute(ns, name)
      const current = await this.api.get<{ metadata: { resourceVersion: string }, status?: { parents?: Array<{ parentRef: unknown, controllerName: string, conditions?: Condition[] }> } }>(path)
      const now = new Date().toISOString()
      const others = (current.status?.parents ?? []).filter(p => p.controllerName !== this.controllerName)
      const ours = parents.map(p => {
        const before = current.status?.parents?.find(x => x.controllerName === this.controllerName && JSON.stringify(x.parentRef) === JSON.stringify(p.parentRef))
        return { ...p, conditions: withTransitionTimes(p.conditions, before?.conditions, now) }
      })
      await this.api.request({
        method: 'PUT',
        path: `${path}/status`,
        body: { ...current, status: { ...(current.status ?? {}), parents: [...others, ...ours] } }
      })
    })
  }
}
