/**
 * Writes status: GatewayClasses, Gateways (with listeners, addresses, and Programmed once a
 * proxy accepted the config), ListenerSets, route parents and policy ancestors. Writes are
 * queued per object — a newer desired status replaces an older one not yet written, so churn
 * coalesces; one write per object at a time, so they land in order — skipped when
 * the same object (same uid; the name when there is no uid) was last written with the same
 * status, and retried on conflicts with a fresh read, so none is lost. An object deleted and
 * re-created under the same name is a new uid, so its status is written even if it equals
 * the one its predecessor got. lastTransitionTime moves only when a condition's status changes.
 *
 * Every write is a read-modify-write: the object is read, Portico's part merged into its
 * current status (status/merge.ts: other controllers' condition types, route parents and
 * policy ancestors stay as they are), and the whole status PUT with the resourceVersion
 * read — a writer that changed the object in between makes it a 409, and the write is redone
 * from a fresh read. A merge patch cannot do this: it replaces lists whole, dropping what
 * others added, and carries no precondition.
 */

import type { Condition } from '../translate/gateway-api.ts'
import { KubeError, KubeHttp, paths } from '../kube/http.ts'
import { mergeConditions, mergeEntries, mergeListeners } from './merge.ts'

type Key = string

interface Pending {
  key: Key
  /** Which enqueue of `key` this is (StatusWriter.sequence): a later one supersedes it. */
  seq: number
  write: () => Promise<void>
}

export interface StatusLog {
  warn(fields: Record<string, unknown>, msg: string): void
  debug(fields: Record<string, unknown>, msg: string): void
}

const MAX_ATTEMPTS = 5
/**
 * After MAX_ATTEMPTS conflicts in a row (another writer keeps winning the race), the write
 * is tried again after this long, not given up: no change of ours may come to trigger it.
 */
const CONTENDED_RETRY_MS = 1000

/** What a Gateway's and a ListenerSet's statuses share. */
interface ListenerHolderStatus {
  conditions: Condition[]
  listeners: Array<{ name: string, supportedKinds: unknown[], attachedRoutes: number, conditions: Condition[] }>
}

/** An object as read, for a read-modify-write of its status. */
interface Current<S> {
  metadata: { resourceVersion: string, uid?: string }
  status?: S
}

export class StatusWriter {
  private readonly api: KubeHttp
  private readonly controllerName: string
  private readonly log: StatusLog
  private readonly queue = new Map<Key, Pending>()
  /**
   * What was last written, by object name (kind/namespace/name): the uid it was written to
   * and the status (conditions without transition times). Skipping needs both to match, so a
   * re-created object (new uid) is written; keeping one entry per name bounds the map.
   */
  private readonly written = new Map<Key, { uid: string | undefined, fingerprint: string }>()
  /**
   * Objects whose write is under way. A newer status for one waits in the queue until it is
   * done (two writes of one object in flight could land in either order), and is never
   * skipped as equal to the last written: the write under way may be about to replace that.
   */
  private readonly inflight = new Set<Key>()
  /** The latest enqueue per object: a contended write is retried only if still the latest. */
  private readonly sequence = new Map<Key, number>()
  private running = 0
  private readonly concurrency = 4
  /** Resolves when the queue is empty (tests, shutdown); a contended write waiting out CONTENDED_RETRY_MS is not in it. */
  private idleWaiters: Array<() => void> = []

  constructor (api: KubeHttp, controllerName: string, log: StatusLog) {
    this.api = api
    this.controllerName = controllerName
    this.log = log
  }

  private enqueue (key: Key, uid: string | undefined, fingerprint: string, write: () => Promise<boolean>): void {
    const last = this.written.get(key)
    if (last !== undefined && last.uid === uid && last.fingerprint === fingerprint && !this.queue.has(key) && !this.inflight.has(key)) return
    const seq = (this.sequence.get(key) ?? 0) + 1
    this.sequence.set(key, seq)
    this.queue.set(key, {
      key,
      seq,
      write: async () => {
        if (await write()) this.written.set(key, { uid, fingerprint })
      }
    })
    this.pump()
  }

  /**
   * Whether the object read back is the one the status was computed for: a write meant for
   * a deleted object must not land on its successor (the next reconcile writes that one).
   */
  private static same (uid: string | undefined, current: { metadata?: { uid?: string } }): boolean {
    return uid === undefined || current.metadata?.uid === undefined || current.metadata.uid === uid
  }

  private pump (): void {
    while (this.running < this.concurrency) {
      let next: Pending | undefined
      for (const job of this.queue.values()) {
        if (!this.inflight.has(job.key)) {
          next = job
          break
        }
      }
      if (next === undefined) return
      const job = next
      this.queue.delete(job.key)
      this.inflight.add(job.key)
      this.running++
      void this.attempt(job).finally(() => {
        this.inflight.delete(job.key)
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
          this.written.delete(job.key)
          if (code === 409) {
            // Contention, not a failure: our status still stands. Again later, unless a newer
            // status of the object was enqueued since (it replaces this one).
            this.log.debug({ object: job.key, attempts: MAX_ATTEMPTS }, 'status write conflicted on every attempt; retrying')
            setTimeout(() => {
              if (this.sequence.get(job.key) !== job.seq || this.queue.has(job.key)) return
              this.queue.set(job.key, job)
              this.pump()
            }, CONTENDED_RETRY_MS).unref()
            return
          }
          this.log.warn({ object: job.key, err: (err as Error).message }, 'status write failed; will retry on the next change')
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

  gatewayClass (name: string, conditions: Condition[], supportedFeatures: string[], uid?: string): void {
    const fingerprint = JSON.stringify({ conditions, supportedFeatures })
    this.enqueue(`GatewayClass/${name}`, uid, fingerprint, () => this.readModifyWrite<{ conditions?: Condition[] }>(paths.gatewayClass(name), uid, (status, now) => ({
      ...status,
      conditions: mergeConditions(conditions, status.conditions, now),
      supportedFeatures: supportedFeatures.map(f => ({ name: f }))
    })))
  }

  gateway (ns: string, name: string, status: ListenerHolderStatus & { addresses: Array<{ type: string, value: string }>, attachedListenerSets?: number }, uid?: string): void {
    this.writeListenerHolder(`Gateway/${ns}/${name}`, paths.gateway(ns, name), status, {
      addresses: status.addresses,
      ...(status.attachedListenerSets !== undefined ? { attachedListenerSets: status.attachedListenerSets } : {})
    }, uid)
  }

  /** A ListenerSet's status: its conditions and its listeners', as a Gateway's. */
  listenerSet (ns: string, name: string, status: ListenerHolderStatus, uid?: string): void {
    this.writeListenerHolder(`ListenerSet/${ns}/${name}`, paths.listenerSet(ns, name), status, {}, uid)
  }

  /**
   * The status of an object with listeners (a Gateway, a ListenerSet): conditions and
   * listeners merged into the current ones (other controllers' condition types kept), plus
   * `extra` fields.
   */
  private writeListenerHolder (key: Key, path: string, status: ListenerHolderStatus, extra: Record<string, unknown>, uid: string | undefined): void {
    type S = { conditions?: Condition[], listeners?: Array<{ name: string, conditions?: Condition[] }> }
    this.enqueue(key, uid, JSON.stringify(status), () => this.readModifyWrite<S>(path, uid, (current, now) => ({
      ...current,
      conditions: mergeConditions(status.conditions, current.conditions, now),
      listeners: mergeListeners(status.listeners, current.listeners, now),
      ...extra
    })))
  }

  /**
   * An HTTPRoute's parent statuses: ours are replaced, other controllers' are kept. A
   * read-modify-write with the resourceVersion, so a concurrent writer causes a retry.
   */
  httpRoute (ns: string, name: string, parents: Array<{ parentRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    this.writeOurEntries(`HTTPRoute/${ns}/${name}`, paths.httpRoute(ns, name), 'parents', 'parentRef', parents, uid)
  }

  /**
   * A BackendTLSPolicy's ancestor statuses: ours replaced, other controllers' kept; an empty
   * list removes ours. Read-modify-write like httpRoute.
   */
  backendTLSPolicy (ns: string, name: string, ancestors: Array<{ ancestorRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    this.writeOurEntries(`BackendTLSPolicy/${ns}/${name}`, paths.backendTLSPolicy(ns, name), 'ancestors', 'ancestorRef', ancestors, uid)
  }

  /** A GRPCRoute's, TLSRoute's, TCPRoute's or UDPRoute's parent statuses, as httpRoute. */
  otherRoute (kind: 'GRPCRoute' | 'TLSRoute' | 'TCPRoute' | 'UDPRoute', ns: string, name: string, parents: Array<{ parentRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    this.writeOurEntries(`${kind}/${ns}/${name}`, paths.route(kind, ns, name), 'parents', 'parentRef', parents, uid)
  }

  /** An InferencePool's parent statuses (its Gateways), as a route's: ours replaced, other controllers' kept; an empty list removes ours. */
  inferencePool (ns: string, name: string, parents: Array<{ parentRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    this.writeOurEntries(`InferencePool/${ns}/${name}`, paths.inferencePool(ns, name), 'parents', 'parentRef', parents, uid)
  }

  /** A PorticoPolicy's ancestor statuses, as backendTLSPolicy. */
  porticoPolicy (ns: string, name: string, ancestors: Array<{ ancestorRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    this.writeOurEntries(`PorticoPolicy/${ns}/${name}`, paths.porticoPolicy(ns, name), 'ancestors', 'ancestorRef', ancestors, uid)
  }

  /**
   * A PorticoModel's status: its parents as a route's (ours replaced, other controllers' kept)
   * and `model`, the names it matches (the printer column).
   */
  porticoModel (ns: string, name: string, model: string, parents: Array<{ parentRef: unknown, controllerName: string, conditions: Condition[] }>, uid?: string): void {
    type Entry = { parentRef: unknown, controllerName: string, conditions?: Condition[] }
    this.enqueue(`PorticoModel/${ns}/${name}`, uid, JSON.stringify({ model, parents }), () => this.readModifyWrite<{ model: string, parents: Entry[] }>(paths.porticoModel(ns, name), uid, (current, now) => ({
      ...current,
      model,
      parents: mergeEntries(parents, current.parents, this.controllerName, 'parentRef', now)
    })))
  }

  /**
   * The per-controller list of a route's parents or a policy's ancestors (`status[field]`,
   * each entry told apart by `refField` and controllerName): our entries are replaced, other
   * controllers' stay (merge.ts).
   */
  private writeOurEntries<F extends string, R extends string> (key: Key, path: string, field: F, refField: R, entries: Array<Record<R, unknown> & { controllerName: string, conditions: Condition[] }>, uid: string | undefined): void {
    type Entry = Record<R, unknown> & { controllerName: string, conditions?: Condition[] }
    this.enqueue(key, uid, JSON.stringify(entries), () => this.readModifyWrite<Partial<Record<F, Entry[]>>>(path, uid, (current, now) => ({
      ...current,
      [field]: mergeEntries(entries, current[field], this.controllerName, refField, now)
    })))
  }

  /**
   * Reads the object at `path`, and PUTs its status subresource with the status `merge`
   * makes of the current one, under the resourceVersion read: a 409 (someone wrote in
   * between) is thrown, and attempt() redoes the whole read-modify-write. False when the
   * object read is not the one the status was computed for.
   */
  private async readModifyWrite<S> (path: string, uid: string | undefined, merge: (current: Partial<S>, now: string) => Partial<S>): Promise<boolean> {
    const current = await this.api.get<Current<S>>(path)
    if (!StatusWriter.same(uid, current)) return false
    const status = merge(current.status ?? {}, new Date().toISOString())
    await this.api.request({ method: 'PUT', path: `${path}/status`, body: { ...current, status } })
    return true
  }
}
