/**
 * How many serving event loops a proxy pod runs — its main thread and `workers − 1` worker
 * threads (the proxy's `WORKERS`, docs/multicore.md).
 *
 * The proxy's own default is the CPUs its cgroup lets it use. That is right when the
 * container has a CPU limit (the quota), but a pod without one sees every CPU of its node:
 * on a 64-core node it would start 64 loops, each worker thread about 20 MB, against a memory request
 * sized for one. Istio's sidecars and Envoy Gateway's proxies face the same choice; we take
 * the CPU the pod asked the scheduler for:
 *
 *   `workers` given (PorticoParameters)   that number
 *   a CPU limit                           unset: the proxy reads the quota itself
 *   a CPU request only                    the request rounded up (100m → 1, 1500m → 2)
 *   neither                               1
 */

/** Never more than the proxy accepts (config.workers' maximum). */
const MAX_WORKERS = 256

/** WORKERS for the pod, or null to let the proxy read its cgroup quota. */
export function proxyWorkers (given: number | undefined, resources: Record<string, unknown>): number | null {
  if (given !== undefined) return given
  const limits = resources.limits as Record<string, unknown> | undefined
  if (limits?.cpu !== undefined && cpuCores(limits.cpu) !== null) return null
  const request = cpuCores((resources.requests as Record<string, unknown> | undefined)?.cpu)
  if (request === null) return 1
  return Math.min(MAX_WORKERS, Math.max(1, Math.ceil(request)))
}

/**
 * A Kubernetes CPU quantity in cores: `2`, `1.5`, `250m`, or a number; null for anything
 * else (the API server has validated the pod's quantities, but these come from a
 * PorticoParameters object, which may say anything).
 */
export function cpuCores (q: unknown): number | null {
  if (typeof q === 'number') return Number.isFinite(q) && q > 0 ? q : null
  if (typeof q !== 'string') return null
  const m = /^(\d{1,9}(?:\.\d{1,9})?)(m?)$/.exec(q)
  if (m === null) return null
  const cores = Number(m[1]) / (m[2] === 'm' ? 1000 : 1)
  return cores > 0 ? cores : null
}
