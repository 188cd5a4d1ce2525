/**
 * `tcpRoutes` and `tlsRoutes` of a standalone file → stream routes on TCP and TLS listeners.
 *
 * agentgateway has one list, `tcpRoutes`, whose hostnames are SNI names on TLS listeners;
 * the Gateway API has TCPRoute (no hostnames) and TLSRoute (SNI). Both spellings are taken
 * and become the same StreamRouteIR, so configs move across: `tcpRoutes` attach to TCP
 * gateways, and to TLS gateways by SNI; `tlsRoutes` only to TLS gateways.
 */

import type { StreamRouteConfig, UdpRouteConfig } from './schema.ts'
import type { BackendIR, BackendRefIR, StreamRouteIR } from '../ir/types.ts'
import { routeGateways, type GatewayRefs } from './gateway-refs.ts'
import { intersectHostnamesWithOrigins } from '../routing/hostname.ts'
import { hostPort } from '../util/host-port.ts'
import { backendSettingsToIR } from './traffic-to-ir.ts'
import { meshBackend } from './mesh-to-ir.ts'
import { parseHostTarget } from './to-ir.ts'

type Path = Array<string | number>
type Report = (path: Path, message: string) => void

export interface StreamRoutesContext {
  gatewayRefs: GatewayRefs
  backends: Map<string, BackendIR>
  options: { baseDir: string, readFile: (path: string) => string }
  report: Report
}

export function streamRoutesToIR (kind: 'tcp' | 'tls', routes: StreamRouteConfig[], ctx: StreamRoutesContext): void {
  const field = kind === 'tcp' ? 'tcpRoutes' : 'tlsRoutes'
  const keys = new Set<string>()
  routes.forEach((route, index) => {
    const path: Path = [field, index]
    const name = route.name ?? `${kind}route${index}`
    const key = `${kind}:${route.namespace !== undefined ? `${route.namespace}/` : ''}${name}`
    if (keys.has(key)) {
      ctx.report([...path, 'name'], `duplicate ${field} name "${name}"`)
      return
    }
    keys.add(key)
    const backends: BackendRefIR[] = []
    route.backends.forEach((b, i) => {
      const backend = streamBackend(b, [...path, 'backends', i], ctx)
      if (backend === undefined) return
      if (!ctx.backends.has(backend.key)) ctx.backends.set(backend.key, backend)
      backends.push({ backend: backend.key, weight: b.weight ?? 1, policies: {} })
    })
    const ir: StreamRouteIR = { key, name, kind, hostnames: (route.hostnames ?? []).map(h => h.toLowerCase()), backends, order: index }
    if (route.namespace !== undefined) ir.namespace = route.namespace

    for (const { name: gwName, listener, where } of routeGateways(route.gateways, path, ctx.gatewayRefs)) {
      const fits = listener.protocol === 'TLS' || (listener.protocol === 'TCP' && kind === 'tcp')
      if (listener.protocol === 'UDP') {
        ctx.report(where, `gateway "${gwName}" has protocol UDP; ${field} attach to ${kind === 'tcp' ? 'TCP or TLS' : 'TLS'} gateways (datagrams go in udpRoutes)`)
        continue
      }
      if (!fits) {
        ctx.report(where, `gateway "${gwName}" has protocol ${listener.protocol}; ${field} attach to ${kind === 'tcp' ? 'TCP or TLS' : 'TLS'} gateways${listener.protocol === 'HTTP' || listener.protocol === 'HTTPS' ? ' (HTTP traffic goes in routes)' : ''}`)
        continue
      }
      if (listener.protocol === 'TCP' && ir.hostnames.length > 0) {
        ctx.report([...path, 'hostnames'], `gateway "${gwName}" has protocol TCP: a plain TCP connection carries no name to match (hostnames need a TLS gateway)`)
        continue
      }
      const served = intersectHostnamesWithOrigins(listener.hostname, ir.hostnames)
      if (served === null) {
        ctx.report([...path, 'hostnames'], `none of the route's hostnames is served by gateway "${gwName}" (hostname ${listener.hostname ?? ''})`)
        continue
      }
      ;(listener.streamRoutes ??= []).push({ ...ir, ...served })
    }
  })
}

/**
 * `udpRoutes` → stream routes of kind `udp` on UDP listeners: the first route of a listener
 * takes every flow (a datagram carries no name to tell routes apart), its backend chosen by
 * weight per flow (stream/udp-proxy.ts).
 */
export function udpRoutesToIR (routes: UdpRouteConfig[], ctx: StreamRoutesContext): void {
  const keys = new Set<string>()
  routes.forEach((route, index) => {
    const path: Path = ['udpRoutes', index]
    const name = route.name ?? `udproute${index}`
    const key = `udp:${route.namespace !== undefined ? `${route.namespace}/` : ''}${name}`
    if (keys.has(key)) {
      ctx.report([...path, 'name'], `duplicate udpRoutes name "${name}"`)
      return
    }
    keys.add(key)
    const backends: BackendRefIR[] = []
    route.backends.forEach((b, i) => {
      const backend = staticBackend('udp', b, [...path, 'backends', i], ctx)
      if (backend === undefined) return
      if (!ctx.backends.has(backend.key)) ctx.backends.set(backend.key, backend)
      backends.push({ backend: backend.key, weight: b.weight ?? 1, policies: {} })
    })
    const ir: StreamRouteIR = { key, name, kind: 'udp', hostnames: [], backends, order: index }
    if (route.namespace !== undefined) ir.namespace = route.namespace
    for (const { name: gwName, listener, where } of routeGateways(route.gateways, path, ctx.gatewayRefs)) {
      if (listener.protocol !== 'UDP') {
        ctx.report(where, `gateway "${gwName}" has protocol ${listener.protocol}; udpRoutes attach to UDP gateways`)
        continue
      }
      ;(listener.streamRoutes ??= []).push(ir)
    }
  })
}

/** `host:port` or `endpoints`, with backendTLS: a static backend whose key says TCP. */
function streamBackend (b: StreamRouteConfig['backends'][number], path: Path, ctx: StreamRoutesContext): BackendIR | undefined {
  const plain = staticBackend('tcp', b, path, ctx)
  if (plain === undefined) return undefined
  const backend = b.mesh === undefined ? plain : meshBackend(plain, b.mesh)
  const backendTLS = b.policies?.backendTLS
  return backendTLS === undefined ? backend : backendSettingsToIR(backend, { backendTLS }, [...path, 'policies'], ctx.options, ctx.report)
}

/** `host:port` or `endpoints`: a static backend whose key says TCP or UDP. */
function staticBackend (scheme: 'tcp' | 'udp', b: { host?: string, endpoints?: string[] }, path: Path, ctx: StreamRoutesContext): BackendIR | undefined {
  if ((b.host === undefined) === (b.endpoints === undefined)) {
    ctx.report(path, 'needs exactly one of host or endpoints')
    return undefined
  }
  const texts = b.host !== undefined ? [b.host] : b.endpoints!
  const endpoints: Array<{ host: string, port: number }> = []
  texts.forEach((text, i) => {
    const where = b.host !== undefined ? [...path, 'host'] : [...path, 'endpoints', i]
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
      ctx.report(where, scheme === 'udp' ? `"${text}": a UDP backend is host:port` : `"${text}": a connection backend is host:port (the bytes are forwarded as they are; for TLS to the backend use policies.backendTLS)`)
      return
    }
    const parsed = parseHostTarget(text)
    if (typeof parsed === 'string') ctx.report(where, parsed)
    else endpoints.push({ host: parsed.host, port: parsed.port })
  })
  if (endpoints.length !== texts.length) return undefined
  const labels = endpoints.map(e => hostPort(e.host, e.port))
  if (new Set(labels).size !== labels.length) {
    ctx.report([...path, 'endpoints'], 'endpoints must be distinct')
    return undefined
  }
  const target = labels.join(',')
  return { key: `${scheme}://${target}`, kind: 'static', name: target, protocol: 'http', endpoints, target }
}
