/**
 * The parts of prom-client the proxy uses, required one by one instead of through its index
 * (issue 54, start-up). The index loads all of prom-client -- the histogram, summary (with its
 * t-digest), push gateway and cluster modules -- and, through the default metrics' process-CPU
 * counters, the OpenTelemetry API (51 modules, ~20 ms of CPU at start), which those counters
 * use only for exemplars, which Portico never turns on. Every thread that counts (the primary
 * and each data-plane worker) paid for it. The default metrics are prom-client's own modules,
 * less that one, whose three counters are made here the way prom-client makes them without
 * exemplars: the same names, help and values.
 *
 * prom-client 15 has no "exports" map, so its lib/ files are reachable; its index.d.ts types
 * them. A prom-client upgrade that moves them fails at start and in every metrics test.
 */

import { createRequire } from 'node:module'
import type * as PromClient from 'prom-client'

const require = createRequire(import.meta.url)

export const Registry = require('prom-client/lib/registry') as typeof PromClient.Registry
export type Registry = PromClient.Registry
export const Counter = require('prom-client/lib/counter') as typeof PromClient.Counter
export type Counter<T extends string = string> = PromClient.Counter<T>
export const Gauge = require('prom-client/lib/gauge') as typeof PromClient.Gauge
export type Gauge<T extends string = string> = PromClient.Gauge<T>

/** prom-client's cluster aggregation (node:cluster's module comes with it): required when first used. */
export function aggregatorRegistry (): typeof PromClient.AggregatorRegistry {
  return require('prom-client/lib/cluster') as typeof PromClient.AggregatorRegistry
}

/** prom-client's default metrics (lib/defaultMetrics.js's list), process CPU aside. */
const DEFAULT_METRICS = ['processStartTime', 'osMemoryHeap', 'processOpenFileDescriptors', 'processMaxFileDescriptors', 'eventLoopLag', 'processResources', 'processHandles', 'processRequests', 'heapSizeAndUsed', 'heapSpacesSizeAndUsed', 'version', 'gc'] as const

type DefaultMetric = (registry: Registry, config: { prefix: string, eventLoopMonitoringPrecision: number }) => void

/** prom-client's collectDefaultMetrics, without exemplars (and so without the OpenTelemetry API). */
export function collectDefaultMetrics (options: { register: Registry, prefix: string }): void {
  const config = { eventLoopMonitoringPrecision: 10, prefix: options.prefix }
  processCpuTotal(options.register, options.prefix)
  for (const name of DEFAULT_METRICS) {
    if (name === 'processResources' && typeof process.getActiveResourcesInfo !== 'function') continue
    ;(require(`prom-client/lib/metrics/${name}`) as DefaultMetric)(options.register, config)
  }
}

/** prom-client's lib/metrics/processCpuTotal.js without exemplars: one collect sets all three. */
function processCpuTotal (registry: Registry, prefix: string): void {
  const registers = [registry]
  let last = process.cpuUsage()
  const user = new Counter({
    name: `${prefix}process_cpu_user_seconds_total`,
    help: 'Total user CPU time spent in seconds.',
    registers,
    collect () {
      const now = process.cpuUsage()
      const userMicros = now.user - last.user
      const systemMicros = now.system - last.system
      last = now
      user.inc(userMicros / 1e6)
      system.inc(systemMicros / 1e6)
      total.inc((userMicros + systemMicros) / 1e6)
    }
  })
  const system = new Counter({ name: `${prefix}process_cpu_system_seconds_total`, help: 'Total system CPU time spent in seconds.', registers })
  const total = new Counter({ name: `${prefix}process_cpu_seconds_total`, help: 'Total user and system CPU time spent in seconds.', registers })
}
