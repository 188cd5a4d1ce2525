/**
 * The addresses of an InferencePool's endpoint picker as one gRPC channel target: `target`
 * alone, or with `fallbackTargets` written as gRPC's address list (`ipv4:a:p,b:p`,
 * `ipv6:[a]:p,[b]:p`) -- the key of the one channel that walks them in order, as pick_first
 * does (inference/picker-client.ts, traffic/grpc-stream-channel.ts). In ir/ so that IR
 * validation and the controller check the same rule without loading the client.
 */

import { isIP } from 'node:net'
import type { InferencePoolIR } from './types.ts'

/** At most this many fallback addresses (a picker is run as one leader or a few replicas). */
export const MAX_FALLBACK_TARGETS = 15

/** `ip:port` / `[v6]:port` -> the address family, or 0 for a name or a bad port. */
function familyOf (target: string): 4 | 6 | 0 {
  const at = target.lastIndexOf(':')
  const port = Number(target.slice(at + 1))
  if (at <= 0 || !/^\d{1,5}$/.test(target.slice(at + 1)) || port < 1 || port > 65535) return 0
  const host = target.slice(0, at)
  if (host.startsWith('[') && host.endsWith(']')) return isIP(host.slice(1, -1)) === 6 ? 6 : 0
  return isIP(host) === 4 ? 4 : 0
}

/**
 * Why `fallbackTargets` cannot be one channel with `target` (ir/validate.ts reports it), or
 * null: they must be IP literals of `target`'s family, since gRPC's address-list target
 * (`ipv4:a,b` / `ipv6:a,b`) takes one family and no names.
 */
export function fallbackTargetsProblem (picker: Pick<InferencePoolIR['picker'], 'target' | 'fallbackTargets'>): string | null {
  const more = picker.fallbackTargets ?? []
  if (more.length === 0) return null
  if (more.length > MAX_FALLBACK_TARGETS) return `more than ${MAX_FALLBACK_TARGETS} fallbackTargets`
  const family = familyOf(picker.target)
  if (family === 0) return `fallbackTargets need target to be an IP address and port, not ${picker.target}`
  const odd = more.find(t => familyOf(t) !== family)
  return odd === undefined ? null : `${odd} is not an IPv${family} address and port like target ${picker.target}`
}

/** The gRPC channel target: `target`, or gRPC's address list of target and fallbackTargets. */
export function channelTarget (picker: Pick<InferencePoolIR['picker'], 'target' | 'fallbackTargets'>): string {
  const more = picker.fallbackTargets ?? []
  if (more.length === 0 || fallbackTargetsProblem(picker) !== null) return picker.target
  return `ipv${familyOf(picker.target)}:${[picker.target, ...more].join(',')}`
}
