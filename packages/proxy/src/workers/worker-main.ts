/**
 * A data-plane worker (worker thread, config.workers > 1): its own event loop running the
 * engine, listening on every port of the config with SO_REUSEPORT, writing its access log
 * and keeping its metrics; everything else -- config sources, admin, metrics and readiness
 * servers, MCP sessions -- is the primary's, which drives this thread with the messages of
 * protocol.ts.
 */

import { enableCompileCache } from 'node:module'
import { fileURLToPath } from 'node:url'
import { parentPort, workerData } from 'node:worker_threads'
import { Logs } from '@portico/ops'
import { renewEmitterInit, type PreparedConfig, type ProxyIR } from '@portico/engine/serving'
import { DataPlane, startTracing } from '../data-plane.ts'
import { receivedSettings } from '../worker-settings.ts'
import { meshCertificateOf } from '../mesh-identity.ts'
import { CONTROL, HEARTBEAT_MS, type FromWorker, type ToWorker, type WorkerInit } from './protocol.ts'
import { handoffRelay } from './handoff.ts'
import { startIntake } from './intake.ts'
import { traceFilter } from '../admin/trace-stream.ts'
import { tasksDump } from '../admin/tasks.ts'
import { collectWorkerStartupGarbage, reduceWorkerHeap } from '../startup-gc.ts'
import { memoryReducerTurnedOff, startWorkerIdleCollection } from '../idle-trim.ts'
import { holdTickObjectMaps } from '../tick-maps.ts'
import type { PreparedBinds } from '../listeners.ts'

enableCompileCache(fileURLToPath(new URL('../../node_modules/.cache/node-compile-cache', import.meta.url)))
// This thread's own nextTick feedback: one tick object held before any full GC (../tick-maps.ts).
holdTickObjectMaps()

const init = workerData as WorkerInit
const port = parentPort!
const control = new Int32Array(init.control)
const traceSlots = new Int32Array(init.traceSlots)
// JSON lines without pino in a worker (ops/json-logger.ts: pino in each worker's isolate costs ~1.7 MiB).
const logs = new Logs({ level: init.logLevel, format: init.settings.logFormat, bindings: { worker: init.index }, sharedOutput: true, withoutPino: true })
const log = logs.for('portico')
process.on('uncaughtException', err => log.error({ err }, 'uncaught exception'))
process.on('unhandledRejection', err => log.error({ err }, 'unhandled rejection'))

const relay = handoffRelay(init.handoff)
const settings = { ...receivedSettings(init.settings), sessionKey: init.sessionKey }
// The data path only (data-plane.ts): config sources, servers and the worker pool are the primary's.
const dataPlane = new DataPlane({
  settings,
  logs,
  env: init.env,
  sharedBackends: init.backends,
  worker: { index: init.index, handoff: relay.relay, intake: init.intake !== null },
  // The spans (and OTLP access-log records) of the requests this worker serves go to the
  // primary, whose export thread sends them: no Worker is made in a thread serving requests.
  ...await startTracing(settings, logs, (kind, records) => port.postMessage({ type: 'records', kind, records } satisfies FromWorker))
})
const { engine, listeners } = dataPlane
// WORKER_ACCEPT=primary: connections come from the primary (a file socket of an earlier run
// of this worker is replaced).
const intake = init.intake === null
  ? null
  : await startIntake(init.intake.path, init.intake.token, (bind, socket) => listeners.accept(bind, socket), why => log.warn({ why }, 'intake connection refused'))

/** Configs prepared and waiting for the primary's commit (or abort), by generation. */
const pending = new Map<number, { prepared: PreparedConfig, binds: PreparedBinds }>()
const traces = new Map<number, () => void>()

const send = (message: FromWorker): void => port.postMessage(message)
/** Whether this thread has installed a config (its first one schedules the start-up collection). */
let installed = false

async function handle (message: ToWorker): Promise<unknown> {
  switch (message.type) {
    case 'prepare': {
      const ir = JSON.parse(message.ir) as ProxyIR
      // The primary prepared (and so checked) this IR before sending it (workers/pool.ts).
      const prepared = engine.prepare(ir, { ...(message.buckets !== null ? { buckets: message.buckets } : {}), slots: message.slots, validated: true })
      const binds = await listeners.prepare(ir)
      const generation = message.generation
      engine.stage(prepared, () => Atomics.load(control, CONTROL.generation) >= generation)
      pending.set(generation, { prepared, binds })
      return null
    }
    case 'commit': {
      const p = pending.get(message.generation)
      if (p === undefined) throw new Error(`no prepared config of generation ${message.generation}`)
      pending.delete(message.generation)
      if (engine.config !== p.prepared.compiled) engine.install(p.prepared)
      listeners.commit(p.binds)
      dataPlane.noteEndpoints(p.prepared.compiled.ir)
      // This thread serves from its first config on (as Portico.start does; the first call counts).
      renewEmitterInit()
      if (!installed) {
        installed = true
        // What loading and the first config let go, collected before the thread idles (startup-gc.ts).
        collectWorkerStartupGarbage(report => log.debug(report, 'start-up collection'))
        // And after each spell of work, as V8's memory reducer does in the primary (idle-trim.ts).
        if (!memoryReducerTurnedOff(process.execArgv, process.env.NODE_OPTIONS)) startWorkerIdleCollection(reduceWorkerHeap, { onCollect: report => log.debug(report, 'idle collection') })
      }
      return listeners.addresses()
    }
    case 'abort': {
      const p = pending.get(message.generation)
      if (p === undefined) return null
      pending.delete(message.generation)
      engine.unstage()
      await listeners.abort(p.binds)
      return null
    }
    case 'trace-arm': {
      const { arm, slot } = message
      const filter = traceFilter(message.query)
      if (typeof filter === 'string') throw new Error(filter)
      traces.set(arm, engine.hub.arm({
        accepts: filter,
        take: () => Atomics.compareExchange(traceSlots, slot, arm, 0) === arm,
        deliver: event => send({ type: 'trace-event', arm, event })
      }))
      return null
    }
    case 'trace-disarm':
      traces.get(message.arm)?.()
      traces.delete(message.arm)
      return null
    case 'metrics':
      return await dataPlane.metrics.registry.getMetricsAsJSON()
    case 'tasks':
      return tasksDump(dataPlane)
    case 'profile':
      return await (await import('../admin/pprof.ts')).cpuProfile(message.seconds)
    case 'log-level':
      logs.set(message.level)
      return null
    case 'mesh-certificate': {
      // The same certificate may come twice (at start and by broadcast): a new one only is a rotation.
      const mesh = dataPlane.meshIdentity
      if (mesh !== null && mesh.current()?.certChain !== message.pem.cert) mesh.rotate(meshCertificateOf(message.pem))
      return null
    }
    case 'drain':
      log.info({ reason: 'primary', drainTimeoutMs: settings.drainTimeoutMs }, 'shutting down: draining in-flight requests')
      await dataPlane.close()
      log.info('shutdown complete')
      logs.flush()
      await intake?.close()
      await relay.close()
      return null
  }
}

port.on('message', (message: ToWorker) => {
  handle(message).then(
    value => { if ('id' in message) send({ type: 'reply', id: message.id, ok: true, value }) },
    err => { if ('id' in message) send({ type: 'reply', id: message.id, ok: false, error: (err as Error).message ?? String(err) }) }
  )
})
// A loop that stops turning (a request stuck in a loop, say) stops this too: the primary's
// readiness then names the worker.
setInterval(() => Atomics.add(control, CONTROL.heartbeat + init.index, 1), HEARTBEAT_MS).unref()
send({ type: 'ready' })
