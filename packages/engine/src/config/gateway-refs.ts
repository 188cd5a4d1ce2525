/**
 * A route's `gateways` → the listeners it attaches to, for every route kind (routes,
 * tcpRoutes, tlsRoutes): one place that says "no gateway named X".
 *
 * A config error is reported once, at its cause. A gateway that is declared but could not be
 * translated (an unreadable certificate, a port clash) already has its error; the routes
 * naming it are skipped without one of their own. Likewise a file with no gateways at all
 * gets the loader's one "no gateways" error, not one per route.
 */

import type { ListenerIR } from '../ir/types.ts'

type Path = Array<string | number>

export interface GatewayRefs {
  /** The gateways that translated. */
  listeners: Map<string, ListenerIR>
  /** Every gateway name the file declares, translated or not. */
  declared: ReadonlySet<string>
  defaultGateway: string
  report: (path: Path, message: string) => void
}

export interface GatewayTarget {
  name: string
  listener: ListenerIR
  /** Where a problem with this attachment is reported: the route's gateways field, or the route. */
  where: Path
}

export function routeGateways (gateways: string | string[] | undefined, path: Path, refs: GatewayRefs): GatewayTarget[] {
  const explicit = gateways !== undefined
  const names = gateways === undefined ? [refs.defaultGateway] : typeof gateways === 'string' ? [gateways] : gateways
  const where = explicit ? [...path, 'gateways'] : path
  const out: GatewayTarget[] = []
  for (const name of names) {
    const listener = refs.listeners.get(name)
    if (listener !== undefined) {
      out.push({ name, listener, where })
      continue
    }
    // Declared but failed, or no gateways at all: the cause has its own error.
    if (refs.declared.has(name) || refs.declared.size === 0) continue
    const msg = explicit ? `no gateway named "${name}"` : `no gateway named "${refs.defaultGateway}"; a route without "gateways" attaches to it`
    refs.report(where, `${msg} (gateways: ${[...refs.declared].join(', ')})`)
  }
  return out
}
