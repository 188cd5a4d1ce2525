/**
 * How many CPUs this process may use: the default of config.workers. A container's CPU
 * limit is a CFS quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`),
 * which `os.availableParallelism()` does not see (it counts the CPUs the process may be
 * scheduled on); a pod limited to 2 CPUs on a 64-core node must get 2 workers, not 64.
 */

import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'

/** What the cgroup files said (undefined: not there). */
export interface CgroupCpuFiles {
  /** cgroup v2 `cpu.max`: `max 100000` or `200000 100000`. */
  cpuMax?: string
  /** cgroup v1 `cpu.cfs_quota_us` (-1: none) and `cpu.cfs_period_us`. */
  cfsQuota?: string
  cfsPeriod?: string
}

/** CPUs the quota allows (fractions rounded up), or null without one. */
export function quotaCpus (files: CgroupCpuFiles): number | null {
  if (files.cpuMax !== undefined) {
    const [quota, period] = files.cpuMax.trim().split(/\s+/)
    if (quota !== undefined && quota !== 'max' && period !== undefined) return fromQuota(Number(quota), Number(period))
  }
  if (files.cfsQuota !== undefined && files.cfsPeriod !== undefined) return fromQuota(Number(files.cfsQuota.trim()), Number(files.cfsPeriod.trim()))
  return null
}

function fromQuota (quota: number, period: number): number | null {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return null
  return Math.max(1, Math.ceil(quota / period))
}

/** The CPUs available: the scheduler's count, lowered by a cgroup quota. */
export function availableCpus (read: (path: string) => string | undefined = readOptional, parallelism = availableParallelism()): number {
  const quota = quotaCpus(cgroupFiles(read))
  return Math.max(1, quota === null ? parallelism : Math.min(quota, parallelism))
}

/** The cgroup CPU files of this process: its own cgroup's first, then the mount's root (a container's own cgroup). */
function cgroupFiles (read: (path: string) => string | undefined): CgroupCpuFiles {
  const own = read('/proc/self/cgroup') ?? ''
  let v2Path = ''
  let v1Path = ''
  for (const line of own.split('\n')) {
    const [, controllers, path] = line.split(':')
    if (controllers === '' && path !== undefined) v2Path = path
    if (controllers !== undefined && controllers.split(',').includes('cpu') && path !== undefined) v1Path = path
  }
  const first = (...paths: string[]) => {
    for (const p of paths) {
      const text = read(p)
      if (text !== undefined) return text
    }
    return undefined
  }
  const cpuMax = first(`/sys/fs/cgroup${v2Path === '/' ? '' : v2Path}/cpu.max`, '/sys/fs/cgroup/cpu.max')
  if (cpuMax !== undefined) return { cpuMax }
  const v1 = (file: string) => first(...['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct'].flatMap(root => [`${root}${v1Path === '/' ? '' : v1Path}/${file}`, `${root}/${file}`]))
  const cfsQuota = v1('cpu.cfs_quota_us')
  const cfsPeriod = v1('cpu.cfs_period_us')
  return { ...(cfsQuota !== undefined ? { cfsQuota } : {}), ...(cfsPeriod !== undefined ? { cfsPeriod } : {}) }
}

function readOptional (path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}
