/** Backends: kind, target, health, request and failure counts, latency — live from /config_dump (the data of `porticoctl proxy config backends`). */

import { Fragment, useState } from 'react'
import { getJson, type BackendInfo, type ConfigDump } from '../api.ts'
import { Badge, ErrorBox, Json, usePoll } from '../common.tsx'
import { healthTone } from './Routes.tsx'
import { backendTargetText, backendTypeText, healthText, HEALTH_EXPLAINED } from '@portico/trace-view'


export function BackendsView () {
  const dump = usePoll(signal => getJson<ConfigDump>('/config_dump', signal), 2000)
  const [open, setOpen] = useState<string | null>(null)
  const d = dump.data
  const usedBy = new Map<string, string[]>()
  for (const r of d?.routes ?? []) for (const ref of r.backends.flatMap(x => x.failover?.flat() ?? [x])) usedBy.set(ref.backend, [...(usedBy.get(ref.backend) ?? []), r.key])
  return (
    <div data-testid='view-backends'>
      <div className='toolbar'>
        <span className='muted'>{d === null ? 'Loading…' : `${d.backends.length} backends · refreshed every 2 s`}</span>
      </div>
      <p className='muted small' data-testid='health-explained'>{HEALTH_EXPLAINED}</p>
      <ErrorBox error={dump.error} title='GET /config_dump' />
      {d !== null
        ? (
          <table className='table' data-testid='backends-table'>
            <thead>
              <tr><th>Name</th><th>Kind</th><th>Target</th><th>Health</th><th className='num'>Requests</th><th className='num'>Failures</th><th className='num'>Latency</th><th>Routes</th><th /></tr>
            </thead>
            <tbody>
              {d.backends.map(b => (
                <Fragment key={b.key}>
                  <tr data-testid={`backend-${b.name}`}>
                    <td className='strong'>{b.name}</td>
                    <td>{backendTypeText(b)}</td>
                    <td data-testid='backend-target'><code>{backendTargetText(b)}</code></td>
                    <td>{b.kind === 'invalid' ? <Badge tone='bad'>invalid</Badge> : <Badge tone={healthTone(b.stats)} testId='backend-health' title={HEALTH_EXPLAINED}>{healthText(b.stats)}</Badge>}</td>
                    <td className='num' data-testid='backend-requests'>{b.stats.requests}</td>
                    <td className='num'>{b.stats.failures}</td>
                    <td className='num' data-testid='backend-latency'>{b.stats.latencyMs === null ? '—' : `${b.stats.latencyMs.toFixed(2)} ms`}</td>
                    <td>{(usedBy.get(b.key) ?? []).join(', ')}</td>
                    <td><button type='button' className='link' onClick={() => setOpen(open === b.key ? null : b.key)}>{open === b.key ? 'hide' : 'details'}</button></td>
                  </tr>
                  {open === b.key ? <tr><td colSpan={9}><Json value={b} /></td></tr> : null}
                </Fragment>
              ))}
            </tbody>
          </table>
          )
        : null}
    </div>
  )
}
