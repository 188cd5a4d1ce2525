/**
 * What a finished TCP/TLS connection (stream-proxy.ts) and a finished UDP flow (udp-proxy.ts)
 * both report to the access log and the metrics: where the traffic went and how it ended.
 * One base type and one builder, so the two records name and fill these fields the same way.
 */

import type { BackendIR } from '../ir/types.ts'
import type { CompiledBind, CompiledListener, CompiledStreamRoute } from '../request/compiled.ts'

/** Where a connection or flow went: null/'' for what it never reached. */
export interface StreamPlacement {
  bind: string
  gateway: string
  listener: string
  route: string | null
  backend: string | null
  /** The endpoint connected to (`host:port`). */
  target: string | null
}

/** A finished connection or flow: its placement, the client, how long and why it ended. */
export interface StreamRecordBase<Reason extends string> extends StreamPlacement {
  source: { address: string, port: number }
  durationMs: number
  reason: Reason
  error: string | null
}

/** The placement fields from the compiled config a connection or flow was served by. */
export function streamPlacement (
  bind: CompiledBind,
  listener: CompiledListener | null,
  route: CompiledStreamRoute | null,
  backend: BackendIR | null,
  target: string | null
): StreamPlacement {
  return {
    bind: bind.ir.key,
    gateway: listener?.ir.gateway ?? '',
    listener: listener?.ir.name ?? '',
    route: route?.ir.key ?? null,
    backend: backend?.name ?? null,
    target
  }
}
