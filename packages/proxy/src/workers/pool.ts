/**
 * The primary's side of config.workers > 1: the primary is one of the N serving event loops
 * (its own listeners, portico.ts) and this pool runs the other N - 1, data-plane workers
 * (worker threads, each its own event loop running the engine), kept at N - 1. Every loop
 * listens on every port with SO_REUSEPORT, so the kernel spreads connections over them; with
 * WORKER_ACCEPT=primary the primary accepts and deals them out (distributor.ts), keeping its
 * share. All loops are on one config version.
 *
 * Reloads are all-or-nothing: the primary checks and compiles the config and opens the ports
 * it adds, every worker prepares it (compiles it, opens the ports it adds) and only when all
 * have is one shared word flipped, after which every request on every loop -- whichever
 * arrives first -- is served by the new version; a loop that cannot prepare it aborts the
 * reload everywhere. A worker that ends unexpectedly is restarted on the version in force;
 * until then the other loops serve and readiness says `workers`. A drain drains every worker.
 */

import { Worker } from 'node:worker_threads'
import net from 'node:net'
import { PorticoError } from '@portico/engine'
import type { Engine, ProxyIR } from '@portico/engine'
import { sharedBackendKeys } from '@portico/engine'
import type { Logger } from 'pino'
import type { MetricObjectWithValues, MetricValue } from 'prom-client'
import { aggregatorRegistry } from '../prom-client.ts'
import { CONTROL, CONTROL_INTS, STALLED_AFTER_MS, TRACE_SLOTS, type FromWorker, type ListenerAddress, type ToWorker, type WorkerInit } from './protocol.ts'
import { SlotTable } from './slot-table.ts'
import { startHandoffServer, type HandoffServer } from './handoff.ts'
import { ConnectionDistributor } from './distributor.ts'
import { WORKER_YOUNG_GENERATION_MB } from '../v8-flags.ts'
import { localSocketPath, socketToken } from './local-socket.ts'
import type { Settings } from '../settings.ts'
import { transferableSettings } from '../worker-settings.ts'
import type { Logs } from '@portico/ops'
import type { ProxyMetrics } from '../metrics.ts'
import type { TraceQuery } from '../admin/trace-stream.ts'
import type { ListenerManager, ListenerSnapshot, PreparedBinds } from '../listeners.ts'
import type { MeshPem } from '../mesh-identity.ts'

const WORKER_URL = new URL('./worker-main.ts', import.meta.url)
/** Restart back-off after a worker that ended within a minute of its start. */
const RESTART_MAX_DELAY_MS = 10_000
/** Answers the admin and metrics servers wait for before going on without a worker. */
const QUERY_TIMEOUT_MS = 5_000

export interface WorkerPoolOptions {
  /** Worker threads: config.workers - 1 (the primary serves as the other loop). */
  count: number
  settings: Settings
  logs: Logs
  engine: Engine
  /** The primary's own data-plane listeners: it serves its share, so reloads open and close its ports with the workers'. */
  listeners: ListenerManager
  metrics: ProxyMetrics
  sessionKey: string
  env: Record<string, string>
  backends: SlotTable
  /** Records a worker relayed (its spans, its OTLP access-log records): the primary exports them. */
  onRecords?: (kind: 'spans' | 'logs', records: unknown[]) => void
}

/** A call's answer never came: the worker ended first (not a refusal of what was asked). */
class WorkerGone extends Error {}

type Metrics = MetricObjectWithValues<MetricValue<string>>[]

interface Slot {
  index: number
  thread: Worker | null
  state: 'starting' | 'running' | 'restarting' | 'stopped'
  /** The config generation this worker has committed. */
  generation: number
  restarts: number
  startedAt: number
  addresses: ListenerAddress[]
  calls: Map<number, { resolve: (value: unknown) => void, reject: (err: Error) => void }>
  /** Its last metrics (kept when it ends, so counters never go backwards). */
  metrics: Metrics | null
  /** The heartbeat last seen, and when it last moved. */
  beat: { value: number, at: number }
  /** WORKER_ACCEPT=primary: its intake socket (kept across restarts). */
  intake: string | null
}

export interface WorkerInfo {
  worker: number
  threadId: number | null
  state: Slot['state']
  restarts: number
  uptimeSeconds: number
  configGeneration: number
  stalled: boolean
}

export class WorkerPool {
  private readonly options: WorkerPoolOptions
  private readonly log: Logger
  private readonly control = new Int32Array(new SharedArrayBuffer(CONTROL_INTS * 4))
  private readonly traceSlots = new Int32Array(new SharedArrayBuffer(TRACE_SLOTS * 4))
  private readonly slots: Slot[] = []
  private readonly traces = new Map<number, (event: unknown) => void>()
  private handoff: HandoffServer | null = null
  /** WORKER_ACCEPT=primary: the primary's listening ports, and the token its hand-overs carry. */
  private readonly distributor: ConnectionDistributor | null
  private readonly intakeToken = socketToken()
  private generation = 0
  private current: { ir: string, buckets: SharedArrayBuffer | null, slots: Record<string, number> } | null = null
  private queue: Promise<unknown> = Promise.resolve()
  private nextCall = 1
  private nextArm = 1
  private stopping = false
  /** The mesh CA's certificate in force, for workers (re)started after it came. */
  private meshPem: MeshPem | null = null
  /** Counters and histograms of workers that ended (summed into /metrics). */
  private retired: Metrics = []
  private retiring: Promise<void> = Promise.resolve()

  constructor (options: WorkerPoolOptions) {
    this.options = options
    this.log = options.logs.for('portico')
    options.logs.onChange.add(level => this.broadcast({ type: 'log-level', level }))
    this.distributor = options.settings.workerAccept === 'primary'
      ? new ConnectionDistributor({
        workers: () => this.running().flatMap(s => s.intake === null ? [] : [s.intake]),
        // The primary's share: served on its own listeners (which listen nowhere themselves).
        self: (bind, socket) => options.listeners.accept(bind, socket),
        token: this.intakeToken,
        log: this.log
      })
      : null
  }

  /** Starts the MCP handoff socket and every worker; resolves once all have loaded. */
  async start (): Promise<void> {
    this.handoff = await startHandoffServer(this.options.engine)
    for (let i = 1; i <= this.options.count; i++) {
      const intake = this.distributor === null ? null : localSocketPath(`worker-${i}`).path
      this.slots.push({ index: i, thread: null, state: 'starting', generation: 0, restarts: 0, startedAt: Date.now(), addresses: [], calls: new Map(), metrics: null, beat: { value: -1, at: Date.now() }, intake })
    }
    await Promise.all(this.slots.map(slot => this.spawn(slot)))
    for (const slot of this.slots) slot.state = 'running'
  }

  private spawn (slot: Slot): Promise<void> {
    const init: WorkerInit = {
      index: slot.index,
      settings: transferableSettings(this.options.settings),
      logLevel: this.options.logs.current,
      sessionKey: this.options.sessionKey,
      env: this.options.env,
      control: this.control.buffer as SharedArrayBuffer,
      traceSlots: this.traceSlots.buffer as SharedArrayBuffer,
      backends: this.options.backends.buffer,
      handoff: { socketPath: this.handoff!.socketPath, token: this.handoff!.token },
      intake: slot.intake === null ? null : { path: slot.intake, token: this.intakeToken }
    }
    const thread = new Worker(WORKER_URL, { workerData: init, stdin: false, name: `portico worker ${slot.index}`, resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB } })
    slot.thread = thread
    slot.startedAt = Date.now()
    return new Promise<void>((resolve, reject) => {
      // How long a worker may take to load before start-up fails (WORKER_START_TIMEOUT).
      const timeoutMs = this.options.settings.workerStartTimeoutMs
      const timer = setTimeout(() => reject(new Error(`worker ${slot.index} did not start within ${timeoutMs / 1000} s (WORKER_START_TIMEOUT)`)), timeoutMs)
      timer.unref()
      thread.on('message', (message: FromWorker) => {
        if (message.type === 'ready') {
          clearTimeout(timer)
          if (this.meshPem !== null) thread.postMessage({ type: 'mesh-certificate', pem: this.meshPem } satisfies ToWorker)
          resolve()
        } else this.onMessage(slot, message)
      })
      thread.on('error', err => this.log.error({ worker: slot.index, err }, 'worker failed'))
      thread.once('exit', code => {
        clearTimeout(timer)
        reject(new Error(`worker ${slot.index} exited (code ${code}) while starting`))
        this.onExit(slot, thread, code)
      })
    })
  }

  private onMessage (slot: Slot, message: FromWorker): void {
    if (message.type === 'reply') {
      const call = slot.calls.get(message.id)
      if (call === undefined) return
      slot.calls.delete(message.id)
      if (message.ok) call.resolve(message.value)
      else call.reject(new Error(message.error))
    } else if (message.type === 'trace-event') {
      this.traces.get(message.arm)?.(message.event)
    } else if (message.type === 'records') {
      this.options.onRecords?.(message.kind, message.records)
    }
  }

  private onExit (slot: Slot, thread: Worker, code: number): void {
    if (slot.thread !== thread) return
    slot.thread = null
    for (const call of slot.calls.values()) call.reject(new WorkerGone(`worker ${slot.index} ended`))
    slot.calls.clear()
    slot.addresses = []
    if (slot.metrics !== null) {
      const last = slot.metrics.filter(m => ['counter', 'histogram'].includes(String(m.type)))
      slot.metrics = null
      this.retiring = this.retiring.then(async () => {
        const AggregatorRegistry = aggregatorRegistry()
        this.retired = await AggregatorRegistry.aggregate([this.retired, last] as Parameters<typeof AggregatorRegistry.aggregate>[0]).getMetricsAsJSON() as unknown as Metrics
      }).catch(() => {})
    }
    if (this.stopping || slot.state === 'stopped') {
      slot.state = 'stopped'
      return
    }
    const quick = Date.now() - slot.startedAt < 60_000
    const delay = quick ? Math.min(RESTART_MAX_DELAY_MS, 250 * 2 ** Math.min(slot.restarts, 6)) : 0
    slot.restarts++
    slot.state = 'restarting'
    this.options.metrics.workerRestarted()
    this.log.error({ worker: slot.index, code, restartInMs: delay }, `worker ${slot.index} ended unexpectedly (code ${code}); its connections were cut; restarting it`)
    setTimeout(() => {
      if (this.stopping) return
      this.spawn(slot).then(
        () => this.enqueue(() => this.bringUp(slot)).catch(err => {
          // It cannot take the version in force (a port it cannot bind, ...): try again later.
          this.log.error({ worker: slot.index, err: (err as Error).message }, `worker ${slot.index} cannot serve the config in force; restarting it`)
          void slot.thread?.terminate()
        }),
        err => this.log.error({ worker: slot.index, err: (err as Error).message }, 'worker restart failed')
      )
    }, delay).unref()
  }

  /** A (re)started worker takes the version in force, then serves. */
  private async bringUp (slot: Slot): Promise<void> {
    if (this.current !== null) {
      const { ir, buckets, slots } = this.current
      await this.call(slot, { type: 'prepare', id: 0, generation: this.generation, ir, buckets, slots })
      slot.addresses = await this.call(slot, { type: 'commit', id: 0, generation: this.generation }) as ListenerAddress[]
      slot.generation = this.generation
    }
    slot.state = 'running'
    this.log.info({ worker: slot.index, version: this.options.engine.config?.ir.version }, `worker ${slot.index} restarted`)
  }

  private enqueue<T> (job: () => Promise<T>): Promise<T> {
    const next = this.queue.then(job, job)
    this.queue = next.catch(() => {})
    return next
  }

  private call (slot: Slot, message: ToWorker, timeoutMs?: number): Promise<unknown> {
    const thread = slot.thread
    if (thread === null) return Promise.reject(new WorkerGone(`worker ${slot.index} is not running`))
    const id = this.nextCall++
    return new Promise((resolve, reject) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => { slot.calls.delete(id); reject(new WorkerGone(`worker ${slot.index} did not answer within ${timeoutMs} ms`)) }, timeoutMs)
      slot.calls.set(id, {
        resolve: v => { clearTimeout(timer); resolve(v) },
        reject: e => { clearTimeout(timer); reject(e) }
      })
      thread.postMessage({ ...message, id })
    })
  }

  /** Puts the mesh CA's certificate in force on every worker, and on those (re)started later. */
  setMeshCertificate (pem: MeshPem): void {
    this.meshPem = pem
    this.broadcast({ type: 'mesh-certificate', pem })
  }

  private broadcast (message: ToWorker): void {
    for (const slot of this.slots) slot.thread?.postMessage(message)
  }

  private running (): Slot[] {
    return this.slots.filter(s => s.state === 'running' && s.thread !== null)
  }

  /**
   * Puts `ir` in force on the primary (its engine and listeners) and every worker, or
   * nowhere: throws (with the first refusal) and changes nothing when the config cannot be
   * prepared.
   */
  apply (ir: ProxyIR): Promise<void> {
    return this.enqueue(() => this.applyNow(ir))
  }

  private async applyNow (ir: ProxyIR): Promise<void> {
    const generation = this.generation + 1
    const keys = sharedBackendKeys(ir)
    const slots = this.options.backends.assign(keys, generation)
    const prepared = this.options.engine.prepare(ir, { slots })
    // WORKER_ACCEPT=primary: the primary binds the new ports itself (and keeps them);
    // otherwise it only checks nobody holds them (probeNewPorts).
    const ports = this.distributor !== null ? await this.distributor.prepare(ir) : null
    if (ports === null) await probeNewPorts(ir, new Set(this.addresses().map(a => a.key)))
    // The primary's own listeners, as a worker's: the ports the config adds (SO_REUSEPORT),
    // or, with the distributor, servers that listen nowhere and take its share.
    const { listeners } = this.options
    let own: PreparedBinds
    try {
      own = await listeners.prepare(ir)
    } catch (err) {
      if (ports !== null) this.distributor!.abort(ports)
      throw err
    }
    const text = JSON.stringify(ir)
    const targets = this.running()
    const results = await Promise.allSettled(targets.map(slot => this.call(slot, { type: 'prepare', id: 0, generation, ir: text, buckets: prepared.buckets, slots })))
    const refused = results.findIndex(r => r.status === 'rejected' && !(r.reason instanceof WorkerGone))
    if (refused !== -1) {
      await Promise.allSettled(targets.map(slot => this.call(slot, { type: 'abort', id: 0, generation })))
      await listeners.abort(own)
      if (ports !== null) this.distributor!.abort(ports)
      throw (results[refused] as PromiseRejectedResult).reason as Error
    }
    // The moment of the switch, for every loop at once.
    this.generation = generation
    Atomics.store(this.control, CONTROL.generation, generation)
    this.options.engine.install(prepared)
    listeners.commit(own)
    this.current = { ir: text, buckets: prepared.buckets, slots }
    await Promise.allSettled(targets.map(async slot => {
      slot.addresses = await this.call(slot, { type: 'commit', id: 0, generation }) as ListenerAddress[]
      slot.generation = generation
    }))
    if (ports !== null) this.distributor!.commit(ports, ir)
    this.options.backends.retain(new Set(keys), generation)
  }

  /** What readiness still waits for: workers not up on the version in force, or whose event loop stalled. */
  pending (): string[] {
    const behind = this.slots.filter(s => s.state !== 'running' || s.generation < this.generation || this.stalled(s))
    return behind.length === 0 ? [] : [`workers (${behind.length} of ${this.slots.length} worker threads not serving)`]
  }

  /** Whether a worker's heartbeat stood still for STALLED_AFTER_MS (judged from what earlier calls saw). */
  private stalled (slot: Slot): boolean {
    const value = Atomics.load(this.control, CONTROL.heartbeat + slot.index)
    const now = Date.now()
    if (value !== slot.beat.value) {
      slot.beat = { value, at: now }
      return false
    }
    return now - slot.beat.at > STALLED_AFTER_MS
  }

  /** The listening ports (every loop, the primary's included, listens on the same ones). */
  addresses (): ListenerAddress[] {
    if (this.distributor !== null) return this.distributor.addresses()
    return this.options.listeners.addresses()
  }

  info (): WorkerInfo[] {
    return this.slots.map(s => ({
      worker: s.index,
      threadId: s.thread?.threadId ?? null,
      state: s.state,
      restarts: s.restarts,
      uptimeSeconds: s.thread === null ? 0 : Math.round((Date.now() - s.startedAt) / 1000),
      configGeneration: s.generation,
      stalled: s.thread !== null && this.stalled(s)
    }))
  }

  /** V8 heap figures of each worker (threads share the process's RSS; this is what each adds). */
  async heaps (): Promise<Array<{ worker: number, heap: unknown }>> {
    return await Promise.all(this.running().map(async s => ({ worker: s.index, heap: await s.thread!.getHeapStatistics().catch(() => null) })))
  }

  /** Ends worker `index` at once, as a crash would (its connections are cut); it is restarted. */
  async terminate (index: number): Promise<boolean> {
    const slot = this.slots.find(s => s.index === index)
    if (slot?.thread == null || slot.state !== 'running') return false
    // Not serving from this moment (readiness), before the thread is even gone.
    slot.state = 'restarting'
    await slot.thread.terminate()
    return true
  }

  /** Every worker's metrics, the last of those that ended, to sum with the primary's. */
  async metrics (): Promise<Metrics[]> {
    await Promise.allSettled(this.running().map(async slot => {
      slot.metrics = await this.call(slot, { type: 'metrics', id: 0 }, QUERY_TIMEOUT_MS) as Metrics
    }))
    await this.retiring
    return [this.retired, ...this.slots.flatMap(s => s.metrics === null ? [] : [s.metrics])]
  }

  /** /debug/tasks of each worker. */
  async tasks (): Promise<Array<{ worker: number } & Record<string, unknown>>> {
    const out = await Promise.allSettled(this.running().map(async slot => ({ worker: slot.index, ...await this.call(slot, { type: 'tasks', id: 0 }, QUERY_TIMEOUT_MS) as Record<string, unknown> })))
    return out.flatMap(r => r.status === 'fulfilled' ? [r.value] : [])
  }

  /** A CPU profile (pprof) of worker `index`. */
  async profile (index: number, seconds: number): Promise<Uint8Array> {
    const slot = this.slots.find(s => s.index === index)
    if (slot === undefined) throw new Error(`no worker ${index} (workers: 1 to ${this.slots.length})`)
    return await this.call(slot, { type: 'profile', id: 0, seconds }, seconds * 1000 + QUERY_TIMEOUT_MS) as Uint8Array
  }

  /**
   * Arms a trace on every worker (resolves once each has it, so a request sent after the
   * tap reports ready is seen wherever it lands). The first thread to `take` it wins.
   */
  async armTrace (query: TraceQuery, deliver: (event: unknown) => void): Promise<{ take: () => boolean, disarm: () => void }> {
    let slot = -1
    for (let i = 0; i < TRACE_SLOTS; i++) {
      if (Atomics.load(this.traceSlots, i) === 0 && ![...this.armedSlots.values()].includes(i)) { slot = i; break }
    }
    if (slot === -1) throw new Error(`too many traces armed at once (${TRACE_SLOTS})`)
    const arm = this.nextArm
    this.nextArm = this.nextArm >= 0x7fffffff ? 1 : this.nextArm + 1
    Atomics.store(this.traceSlots, slot, arm)
    this.armedSlots.set(arm, slot)
    this.traces.set(arm, deliver)
    await Promise.allSettled(this.running().map(s => this.call(s, { type: 'trace-arm', id: 0, arm, slot, query }, QUERY_TIMEOUT_MS)))
    return {
      take: () => Atomics.compareExchange(this.traceSlots, slot, arm, 0) === arm,
      disarm: () => {
        Atomics.compareExchange(this.traceSlots, slot, arm, 0)
        this.armedSlots.delete(arm)
        this.traces.delete(arm)
        this.broadcast({ type: 'trace-disarm', arm })
      }
    }
  }

  private readonly armedSlots = new Map<number, number>()

  /** Stops every worker accepting, lets their requests finish up to `deadlineMs`, ends them. */
  async drain (deadlineMs: number): Promise<void> {
    this.stopping = true
    await this.queue
    this.distributor?.close()
    await Promise.allSettled(this.running().map(slot => this.call(slot, { type: 'drain', id: 0, deadlineMs }, deadlineMs + QUERY_TIMEOUT_MS)))
    for (const slot of this.slots) slot.state = 'stopped'
    await Promise.allSettled(this.slots.map(s => s.thread?.terminate()))
    await this.handoff?.close()
  }

  /** Every loop's connections (the primary's and each worker's), summed per bind. */
  async snapshot (): Promise<ListenerSnapshot[]> {
    const byKey = new Map<string, ListenerSnapshot>()
    for (const t of [{ listeners: this.options.listeners.snapshot() }, ...await this.tasks()]) {
      for (const l of (t.listeners as ListenerSnapshot[] | undefined) ?? []) {
        const seen = byKey.get(l.key)
        if (seen === undefined) byKey.set(l.key, { ...l })
        else seen.connections += l.connections
      }
    }
    return [...byKey.values()]
  }
}

/**
 * SO_REUSEPORT lets any process of the same user join a port: a second gateway started on
 * the same ports by mistake would silently take part of the traffic instead of failing. A
 * port this pool does not hold yet is therefore first bound alone (without the option) for
 * a moment: if anyone listens there, the config is refused as a bind failure.
 */
async function probeNewPorts (ir: ProxyIR, open: Set<string>): Promise<void> {
  for (const bind of ir.binds) {
    if (open.has(bind.key)) continue
    await new Promise<void>((resolve, reject) => {
      const server = net.createServer()
      server.once('error', (err: NodeJS.ErrnoException) => reject(new PorticoError('PORTICO_BIND_FAILED', `cannot listen on ${bind.key}: ${err.code ?? err.message}`, { cause: err })))
      server.listen({ host: bind.address, port: bind.port }, () => server.close(() => resolve()))
    })
  }
}
