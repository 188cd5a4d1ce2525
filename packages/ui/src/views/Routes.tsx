/** Routes: for each route, its listener, hostnames, matches, policies (by phase) and backends, from /config_dump. */

import { useState } from 'react'
import { getJson, type BackendInfo, type ConfigDump, type PolicySet, type RouteInfo, type RouteMatch } from '../api.ts'
import { Badge, Card, ErrorBox, Json, usePoll } from '../common.tsx'
import { healthLevel, healthText, HEALTH_EXPLAINED, type HealthStats } from '@portico/trace-view'

export function matchText (m: RouteMatch): string {
  // As `porticoctl proxy config routes` writes them: `GET prefix /api`, then header and query matches.
  const parts = [m.method ?? '', `${m.path.kind} ${m.path.value}`]
  for (const h of m.headers) parts.push(`header ${h.name}${h.kind === 'regex' ? ' ~ ' : ' = '}${h.value}`)
  for (const q of m.query) parts.push(`query ${q.name}${q.kind === 'regex' ? ' ~ ' : ' = '}${q.value}`)
  return parts.filter(p => p !== '').join(' ')
}

function PolicyList (props: { policies: PolicySet, phase: string }) {
  const kinds = Object.keys(props.policies).filter(k => props.policies[k] !== null && props.policies[k] !== undefined)
  const [open, setOpen] = useState<string | null>(null)
  if (kinds.length === 0) return null
  return (
    <div className='policies'>
      <span className='muted'>{props.phase}:</span>
      {kinds.map(k => (
        <button type='button' key={k} className={open === k ? 'chip active' : 'chip'} onClick={() => setOpen(open === k ? null : k)} data-testid={`policy-${k}`}>{k}</button>
      ))}
      {open !== null ? <Json value={props.policies[open]} /> : null}
    </div>
  )
}

/** HEALTH's colour, by the thresholds `porticoctl proxy config backends` uses too. */
export function healthTone (stats: HealthStats): 'ok' | 'warn' | 'bad' | 'muted' {
  return ({ good: 'ok', degraded: 'warn', poor: 'bad', none: 'muted' } as const)[healthLevel(stats)]
}

function RouteCard (props: { route: RouteInfo, backends: Map<string, BackendInfo>, gatewayPolicies: PolicySet | undefined }) {
  const r = props.route
  return (
    <Card title={<><span data-testid='route-name'>{r.key}</span> <span className='muted small'>on {r.listener}</span></>} testId={`route-${r.key}`}>
      <dl className='kv'>
        <dt>Hostnames</dt><dd>{r.hostnames.length === 0 ? <span className='muted'>any</span> : r.hostnames.join(', ')}</dd>
        <dt>Matches</dt>
        <dd>
          <ul className='plain'>
            {r.matches.map((m, i) => <li key={i}><code data-testid='route-match'>{matchText(m)}</code></li>)}
          </ul>
        </dd>
        {r.timeouts !== undefined && Object.keys(r.timeouts).length > 0
          ? <><dt>Timeouts</dt><dd>{Object.entries(r.timeouts).map(([k, v]) => `${k} ${v} ms`).join(', ')}</dd></>
          : null}
        <dt>Policies</dt>
        <dd>
          {props.gatewayPolicies !== undefined ? <PolicyList policies={props.gatewayPolicies} phase='gateway' /> : null}
          <PolicyList policies={r.policies} phase='route' />
          {Object.keys(r.policies).length === 0 && (props.gatewayPolicies === undefined || Object.keys(props.gatewayPolicies).length === 0) ? <span className='muted'>none</span> : null}
        </dd>
        <dt>Backends</dt>
        <dd>
          {r.backends.length === 0
            ? <span className='muted'>none (answered by the route itself or 500)</span>
            : (
              <table className='table compact'>
                <thead><tr><th>Backend</th><th>Kind</th><th>Target</th><th>Weight</th><th>Health</th><th>Policies</th></tr></thead>
                <tbody>
                  {r.backends.flatMap(ref => ref.failover === undefined
                    ? [{ ...ref, group: null as number | null }]
                    // An ai backend's failover groups: a row per provider, its group (priority) beside the weight.
                    : ref.failover.flatMap((g, i) => g.map(p => ({ ...p, weight: ref.weight, group: i + 1 })))).map(ref => {
                    const b = props.backends.get(ref.backend)
                    return (
                      <tr key={ref.backend} data-testid='route-backend'>
                        <td>{b?.name ?? ref.backend}</td>
                        <td>{b?.kind ?? '?'}</td>
                        <td><code>{b === undefined ? '' : b.kind === 'mcp' ? (b.mcp?.targets ?? []).map(t => t.name).join(', ') : b.target}</code></td>
                        <td>{ref.group === null ? ref.weight : `${ref.weight} · failover group ${ref.group}`}</td>
                        <td>{b === undefined ? null : b.kind === 'invalid' ? <Badge tone='bad' title={b.invalidReason}>invalid</Badge> : <Badge tone={healthTone(b.stats)} title={HEALTH_EXPLAINED}>{healthText(b.stats)}</Badge>}</td>
                        <td><PolicyList policies={ref.policies} phase='backend' /></td>
                      </tr>
                    )
                  })}
                </tbody>
              </table>
              )}
        </dd>
      </dl>
    </Card>
  )
}

export function RoutesView () {
  const dump = usePoll(signal => getJson<ConfigDump>('/config_dump', signal), 5000)
  const [filter, setFilter] = useState('')
  const d = dump.data
  const backends = new Map((d?.backends ?? []).map(b => [b.key, b]))
  const gatewayPolicies = new Map((d?.policies ?? []).filter(p => p.phase === 'gateway').map(p => [p.target.slice('gateway/'.length), p.policies]))
  const routes = (d?.routes ?? []).filter(r => filter === '' || `${r.key} ${r.listener} ${r.hostnames.join(' ')} ${r.matches.map(matchText).join(' ')}`.toLowerCase().includes(filter.toLowerCase()))
  return (
    <div data-testid='view-routes'>
      <div className='toolbar'>
        <input type='search' placeholder='filter routes (name, host, path)' value={filter} onChange={e => setFilter(e.target.value)} aria-label='filter routes' />
        <span className='muted'>{d === null ? '' : `${routes.length} of ${d.routes.length} routes · config ${d.version.configVersion ?? 'none'}`}</span>
      </div>
      <ErrorBox error={dump.error} title='GET /config_dump' />
      {d !== null && d.routes.length === 0 ? <p className='muted'>No routes.</p> : null}
      <div className='stack'>
        {routes.map(r => <RouteCard key={`${r.listener}/${r.key}`} route={r} backends={backends} gatewayPolicies={gatewayPolicies.get(r.listener)} />)}
      </div>
    </div>
  )
}
