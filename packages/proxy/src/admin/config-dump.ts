/**
 * `/config_dump`: what the proxy has loaded, in one JSON document — binds, listeners,
 * routes, backends (with live stats), policies by attachment point, workloads and services
 * (cluster mode), the version, the static settings and the reload history. Secrets are
 * redacted.
 */

import { REDACTED_VALUE, redactSecrets, type BackendStat, type ModelIR, type PolicySetIR } from '@portico/engine'
import type { AdminView } from './view.ts'
import { formatAddress, type Settings } from '../settings.ts'
import { version } from '../version.ts'

export interface PolicyAttachment {
  /** `gateway/<listener>`, `route/<route>` or `backend/<route>/<backend>`. */
  target: string
  phase: 'gateway' | 'route' | 'backend'
  policies: PolicySetIR
  /** Policies another resource attached (a PorticoPolicy): policy key → where from. */
  sources?: Record<string, string>
}

export function configDump (view: AdminView): Record<string, unknown> {
  const engine = view.engine
  const ir = engine.config?.ir
  const binds = ir?.binds ?? []
  const listeners = binds.flatMap(b => b.listeners.map(l => ({
    bind: b.key,
    key: l.key,
    gateway: l.gateway,
    name: l.name,
    hostname: l.hostname ?? null,
    protocol: l.protocol,
    ...(l.tlsMode !== undefined ? { tlsMode: l.tlsMode } : {}),
    // Listener filters run before every policy: shown with the listener (they hold no secrets).
    ...(l.filters !== undefined ? { filters: l.filters } : {}),
    routes: [...l.routes.map(r => r.key), ...(l.streamRoutes ?? []).map(r => r.key)]
  })))
  // Stream routes (TCP/TLS listeners) are listed with the HTTP ones: `kind` tells them apart,
  // and they have no matches (a connection is chosen by SNI name, or taken as it comes).
  const routes = binds.flatMap(b => b.listeners.flatMap(l => [
    ...l.routes.map(r => ({ listener: l.key, ...r })),
    ...(l.streamRoutes ?? []).map(r => ({ listener: l.key, ...r, matches: [], policies: {} }))
  ]))
  const policies: PolicyAttachment[] = []
  for (const b of binds) {
    for (const l of b.listeners) {
      if (Object.keys(l.policies).length > 0) policies.push({ target: `gateway/${l.key}`, phase: 'gateway', policies: l.policies, ...sourcesOf(l) })
      for (const r of l.routes) {
        if (Object.keys(r.policies).length > 0) policies.push({ target: `route/${r.key}`, phase: 'route', policies: r.policies, ...sourcesOf(r) })
        // An ai backend's failover groups: each provider has policies of its own.
        for (const ref of r.backends.flatMap(x => x.failover !== undefined ? x.failover.flat() : [x])) {
          if (Object.keys(ref.policies).length > 0) policies.push({ target: `backend/${r.key}/${ref.backend}`, phase: 'backend', policies: ref.policies, ...sourcesOf(ref) })
        }
        // Models (the model API): each concrete model's backend policies, a failover virtual model's per target.
        for (const m of r.models ?? []) {
          const refs = m.backend !== undefined ? [m.backend] : m.virtual?.kind === 'failover' ? m.virtual.groups.flat() : []
          for (const ref of refs) {
            if (Object.keys(ref.policies).length > 0) policies.push({ target: `backend/${r.key}/${ref.backend}`, phase: 'backend', policies: ref.policies, ...sourcesOf(ref) })
          }
        }
      }
    }
  }
  const backends = (ir?.backends ?? []).map(b => ({ ...b, stats: formatStats(engine.backendStats.get(b.key)) }))
  // The model API: every model of every route's table, where it is served, and what it is.
  const models = binds.flatMap(b => b.listeners.flatMap(l => l.routes.flatMap(r => (r.models ?? []).map(m => ({
    listener: l.key,
    route: r.key,
    name: m.name,
    match: m.match,
    visibility: m.visibility,
    attached: m.attached,
    ...(m.backend !== undefined ? { kind: 'concrete', backend: m.backend.backend } : {}),
    ...(m.virtual !== undefined ? { kind: 'virtual', virtual: modelChoice(m.virtual) } : {})
  })))))
  return redactSecrets({
    version: { version, node: process.version, configVersion: ir?.version ?? null },
    config: staticConfig(view.settings),
    mesh: view.meshStatus(),
    binds: binds.map(b => ({ key: b.key, address: b.address, port: b.port, protocol: b.protocol, tls: b.tls ?? null, listeners: b.listeners.map(l => l.key) })),
    listeners,
    routes,
    backends,
    models,
    policies,
    workloads: [],
    services: backends.filter(b => b.kind === 'service'),
    env: engine.env,
    reloads: view.reloads
  })
}

/** A virtual model's choice as the dump shows it: targets by name (failover: groups of names, not backend keys). */
function modelChoice (v: NonNullable<ModelIR['virtual']>): Record<string, unknown> {
  if (v.kind === 'failover') return { kind: 'failover', groups: v.models }
  return { ...v }
}

function sourcesOf (o: { policySources?: Record<string, string> }): { sources?: Record<string, string> } {
  return o.policySources !== undefined ? { sources: o.policySources } : {}
}

function formatStats (s: BackendStat): Record<string, unknown> {
  const out: Record<string, unknown> = { requests: s.requests, failures: s.failures, health: Math.round(s.health * 100) / 100, latencyMs: s.latencyMs === null ? null : Math.round(s.latencyMs * 1000) / 1000 }
  // Passive health: endpoints not ejected, all of them, and the ejected ones.
  if (s.endpoints !== undefined) out.endpoints = s.endpoints
  return out
}

export function staticConfig (settings: Settings): Record<string, unknown> {
  return {
    adminAddr: settings.adminAddr === null ? 'off' : formatAddress(settings.adminAddr),
    adminWrites: settings.adminWrites,
    adminAllowedHosts: settings.adminAllowedHosts,
    statsAddr: settings.statsAddr === null ? 'off' : formatAddress(settings.statsAddr),
    readinessAddr: settings.readinessAddr === null ? 'off' : formatAddress(settings.readinessAddr),
    logging: { level: settings.logLevel, format: settings.logFormat },
    drainTimeoutMs: settings.drainTimeoutMs,
    ...(settings.tracing !== null ? { tracing: { ...settings.tracing, headers: redactedValues(settings.tracing.headers) } } : {}),
    ...(settings.accessLog.config !== undefined ? { accessLog: withRedactedOtlpHeaders(settings.accessLog.config) } : {})
  }
}

/** Export headers carry API keys: their names show, never their values. */
function redactedValues (headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(headers).map(k => [k, REDACTED_VALUE]))
}

function withRedactedOtlpHeaders (a: NonNullable<Settings['accessLog']['config']>): Record<string, unknown> {
  return a.otlp === undefined ? a : { ...a, otlp: { ...a.otlp, headers: redactedValues(a.otlp.headers ?? {}) } }
}

