/**
 * Output of `proxy config all` (routes, backends and policies as JSON, YAML or short tables)
 * and `proxy config backends` (TYPE NAME NAMESPACE ENDPOINT HEALTH REQUESTS LATENCY) and
 * `proxy config models` (NAME MATCH VISIBILITY SERVES LISTENER ROUTE).
 */

import { stringify } from 'yaml'
import { backendTargetText, backendTypeText, healthLevel, healthText, type HealthLevel } from '@portico/trace-view'
import { formatTable } from '../util/table.ts'
import type { ConfigDump, DumpBackend, DumpMatch, DumpModel, DumpPolicy, DumpRoute } from './dump.ts'

export type OutputFormat = 'short' | 'json' | 'yaml'
export const OUTPUT_FORMATS: OutputFormat[] = ['short', 'json', 'yaml']

/** HEALTH's terminal colours: green, yellow, red (the web UI's, by the same thresholds). */
const HEALTH_COLOURS: Record<HealthLevel, string | null> = { good: '\x1b[32m', degraded: '\x1b[33m', poor: '\x1b[31m', none: null }

export function formatLatency (ms: number | null | undefined): string {
  return ms === null || ms === undefined ? '-' : `${Number(ms.toFixed(3))}ms`
}

export function backendRows (backends: DumpBackend[]): string[][] {
  return backends.map(b => [
    backendTypeText(b),
    b.name,
    b.namespace ?? '-',
    backendTargetText(b) || '-',
    healthText(b.stats),
    b.stats === undefined ? '-' : String(b.stats.requests),
    formatLatency(b.stats?.latencyMs)
  ])
}

export const BACKEND_HEADERS = ['TYPE', 'NAME', 'NAMESPACE', 'ENDPOINT', 'HEALTH', 'REQUESTS', 'LATENCY']

/** `colour`: HEALTH in green, yellow or red (on a terminal). */
export function backendsTable (dump: ConfigDump, options: { colour?: boolean } = {}): string {
  const backends = dump.backends ?? []
  const column = BACKEND_HEADERS.indexOf('HEALTH')
  return formatTable(BACKEND_HEADERS, backendRows(backends), options.colour === true
    ? (row, col, cell) => {
        const code = col === column ? HEALTH_COLOURS[healthLevel(backends[row]?.stats)] : null
        return code === null ? cell : `${code}${cell}\x1b[39m`
      }
    : undefined)
}

function matchText (m: DumpMatch): string {
  const parts: string[] = []
  if (m.method !== undefined) parts.push(m.method)
  if (m.path !== undefined) parts.push(`${m.path.kind === 'prefix' ? 'prefix' : m.path.kind} ${m.path.value}`)
  if ((m.headers?.length ?? 0) > 0) parts.push(`+${m.headers!.length} header${m.headers!.length === 1 ? '' : 's'}`)
  if ((m.query?.length ?? 0) > 0) parts.push(`+${m.query!.length} query`)
  return parts.join(' ')
}

/** The policies set, each attached by another resource followed by where from: `cors(PorticoPolicy apps/web)`. */
function policyNames (set: Record<string, unknown> | undefined, sources?: Record<string, string>): string {
  const names = Object.keys(set ?? {}).filter(k => set![k] !== null && set![k] !== undefined)
  return names.length === 0 ? '-' : names.map(n => sources?.[n] !== undefined ? `${n}(${sources[n]})` : n).join(',')
}

/** Route rows; backends are shown by name (`backends` maps keys to names). */
export function routeRows (routes: DumpRoute[], backends: DumpBackend[] = []): string[][] {
  const names = new Map(backends.map(b => [b.key, b.namespace !== undefined ? `${b.namespace}/${b.name}` : b.name]))
  const backendName = (key: string) => names.get(key) ?? key
  return routes.map(r => [
    r.name,
    r.namespace ?? '-',
    r.listener ?? '-',
    (r.hostnames ?? []).length === 0 ? '*' : r.hostnames!.join(','),
    r.kind === 'tcp' || r.kind === 'tls' ? `(${r.kind} connections)` : (r.matches ?? []).map(matchText).join('; ') || '-',
    (r.models as unknown[] | undefined)?.length ? `(models: ${(r.models as Array<{ name: string, attached: boolean }>).filter(m => m.attached).map(m => m.name).join(', ')})` : (r.backends ?? []).map(b => {
      // Failover groups: providers of a group by `|`, groups in priority order by `>`.
      const name = b.failover !== undefined ? b.failover.map(g => g.map(p => backendName(p.backend)).join('|')).join(' > ') : backendName(b.backend)
      return r.backends!.length > 1 ? `${name} (weight ${b.weight})` : name
    }).join(', ') || '-',
    policyNames(r.policies)
  ])
}

/** What a model serves with: its backend (by name), or its virtual choice in one line. */
function modelServes (m: DumpModel, backends: DumpBackend[]): string {
  if (m.backend !== undefined) return backends.find(b => b.key === m.backend)?.name ?? m.backend
  const v = m.virtual
  if (v === undefined) return '-'
  if (v.kind === 'weighted') return `weighted ${v.targets.map(t => `${t.model}=${t.weight}`).join(' ')}`
  if (v.kind === 'failover') return `failover ${v.groups.map(g => g.join('|')).join(' > ')}`
  return `conditional ${v.rules.map(r => r.model).join(', ')}; else ${v.fallback}`
}

export const MODEL_HEADERS = ['NAME', 'MATCH', 'VISIBILITY', 'SERVES', 'LISTENER', 'ROUTE']

/** Models as attached: one row per model and route (a target reached only through a virtual model is marked `(target)`). */
export function modelRows (models: DumpModel[], backends: DumpBackend[] = []): string[][] {
  return models.map(m => [m.name, m.attached ? m.match : `${m.match} (target)`, m.visibility, modelServes(m, backends), m.listener, m.route])
}

export function modelsTable (dump: ConfigDump): string {
  return formatTable(MODEL_HEADERS, modelRows(dump.models ?? [], dump.backends ?? []))
}

export function policyRows (policies: DumpPolicy[]): string[][] {
  return policies.map(p => [p.target, p.phase, policyNames(p.policies, p.sources)])
}

/** The three sections `proxy config all` shows. */
export function configSections (dump: ConfigDump): { routes: unknown[], backends: unknown[], models?: unknown[], policies: unknown[] } {
  return { routes: dump.routes ?? [], backends: dump.backends ?? [], ...((dump.models?.length ?? 0) > 0 ? { models: dump.models } : {}), policies: dump.policies ?? [] }
}

export function formatConfigAll (dump: ConfigDump, format: OutputFormat): string {
  const sections = configSections(dump)
  if (format === 'json') return JSON.stringify(sections, null, 2) + '\n'
  if (format === 'yaml') return stringify(sections, { lineWidth: 0 })
  const out = [
    'ROUTES',
    formatTable(['NAME', 'NAMESPACE', 'LISTENER', 'HOSTNAMES', 'MATCHES', 'BACKENDS', 'POLICIES'], routeRows(dump.routes ?? [], dump.backends ?? [])),
    'BACKENDS',
    backendsTable(dump),
    ...((dump.models?.length ?? 0) > 0 ? ['MODELS', modelsTable(dump)] : []),
    'POLICIES',
    formatTable(['TARGET', 'PHASE', 'POLICIES'], policyRows(dump.policies ?? []))
  ]
  return out.join('\n')
}
