/** Overview: the instance (version, uptime, readiness), the mesh identity when there is one, its listeners and ports, and the reload history with the last error. */

import { meshConfigured, meshExpiryText, meshSourceText, meshTone, type MeshStatusShape } from '@portico/trace-view'
import type { Overview } from '../api.ts'
import { ago, Badge, Card, formatDuration, formatTime } from '../common.tsx'

export function OverviewView (props: { overview: Overview | null }) {
  const o = props.overview
  if (o === null) return <p className='muted'>Loading…</p>
  const last = o.lastReloadError
  return (
    <div className='grid' data-testid='view-overview'>
      <Card title='Instance' testId='card-instance'>
        <dl className='kv'>
          <dt>Version</dt><dd data-testid='ov-version'>{o.version} <span className='muted'>(Node {o.node})</span></dd>
          <dt>Uptime</dt><dd data-testid='ov-uptime'>{formatDuration(o.uptimeSeconds)} <span className='muted'>since {formatTime(o.startedAt)}</span></dd>
          <dt>PID</dt><dd>{o.pid}</dd>
          <dt>Config version</dt><dd data-testid='ov-config-version'><code>{o.configVersion ?? 'none'}</code></dd>
          <dt>Readiness</dt>
          <dd data-testid='ov-readiness'>{o.ready ? <Badge tone='ok'>ready</Badge> : <><Badge tone='bad'>not ready</Badge> <span className='muted'>waiting for {o.pending.join(', ')}</span></>}</dd>
          <dt>Tracing</dt><dd>{o.tracing ? 'on' : <span>off <span className='muted'>(DEBUG_TRACE=off)</span></span>}</dd>
          <dt>Log level</dt><dd><code>{o.logLevel}</code></dd>
          <dt>Admin UI</dt><dd data-testid='ov-mode'>{o.adminWrites ? <Badge tone='warn'>writable</Badge> : <Badge tone='muted'>read-only</Badge>}</dd>
        </dl>
      </Card>

      {meshConfigured(o.mesh) ? <MeshCard mesh={o.mesh} /> : null}

      <Card title='Process servers'>
        <table className='table'>
          <thead><tr><th>Server</th><th>Address</th></tr></thead>
          <tbody>
            <tr><td>Admin</td><td><code>{o.addresses.admin}</code></td></tr>
            <tr><td>Metrics</td><td><code>{o.addresses.stats}</code>{o.ports.stats > 0 ? <span className='muted'> /metrics</span> : null}</td></tr>
            <tr><td>Readiness</td><td><code>{o.addresses.readiness}</code>{o.ports.readiness > 0 ? <span className='muted'> /healthz/ready</span> : null}</td></tr>
          </tbody>
        </table>
      </Card>

      <Card title={`Listeners (${o.binds.length} port${o.binds.length === 1 ? '' : 's'})`} testId='card-listeners' className='wide'>
        {o.binds.length === 0
          ? <p className='muted'>No listeners: no config is loaded.</p>
          : (
            <table className='table' data-testid='listeners-table'>
              <thead><tr><th>Port</th><th>Address</th><th>Protocol</th><th>Gateway / listener</th><th>Hostname</th><th>Routes</th><th>State</th></tr></thead>
              <tbody>
                {o.binds.flatMap(b => b.listeners.map((l, i) => (
                  <tr key={`${b.key}/${l.key}`}>
                    {i === 0 ? <td rowSpan={b.listeners.length} className='strong' data-testid='listener-port'>{b.port}</td> : null}
                    {i === 0 ? <td rowSpan={b.listeners.length}><code>{b.address}</code></td> : null}
                    {i === 0 ? <td rowSpan={b.listeners.length}>{b.protocol}</td> : null}
                    <td>{l.key}</td>
                    <td>{l.hostname ?? <span className='muted'>any</span>}</td>
                    <td>{l.routes.length === 0 ? <span className='muted'>none</span> : l.routes.join(', ')}</td>
                    {i === 0 ? <td rowSpan={b.listeners.length}>{b.listening ? <Badge tone='ok'>listening</Badge> : <Badge tone='bad'>not bound</Badge>}</td> : null}
                  </tr>
                )))}
              </tbody>
            </table>
            )}
      </Card>

      <Card title='Reloads' testId='card-reloads' className='wide'>
        {last !== null
          ? (
            <div className='error-box' data-testid='last-reload-error'>
              <strong>Last rejected config</strong> <span className='muted'>({ago(last.at)}, {formatTime(last.at)})</span> — the previous config kept serving:
              <pre>{(last.errors ?? []).join('\n')}</pre>
            </div>
            )
          : <p className='muted' data-testid='no-reload-error'>No rejected config since start.</p>}
        <table className='table' data-testid='reloads-table'>
          <thead><tr><th>When</th><th>Result</th><th>Version</th><th>Errors</th></tr></thead>
          <tbody>
            {o.reloads.map((r, i) => (
              <tr key={`${r.at}-${i}`}>
                <td title={formatTime(r.at)}>{ago(r.at)}</td>
                <td>{r.ok ? <Badge tone='ok'>applied</Badge> : <Badge tone='bad'>rejected</Badge>}</td>
                <td><code>{r.version ?? '—'}</code></td>
                <td className='errors'>{(r.errors ?? []).join('\n')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
    </div>
  )
}

/** The mesh identity (Istio ambient): its state, SPIFFE ID, expiry and, when not ready, why — the words of `porticoctl proxy mesh`. */
function MeshCard (props: { mesh: MeshStatusShape }) {
  const m = props.mesh
  return (
    <Card title='Mesh' testId='card-mesh'>
      <dl className='kv'>
        <dt>State</dt><dd data-testid='mesh-state'><Badge tone={meshTone(m.state)}>{m.state ?? 'unknown'}</Badge></dd>
        <dt>SPIFFE ID</dt><dd data-testid='mesh-spiffe-id' className='wrap'>{m.spiffeId !== undefined ? <code>{m.spiffeId}</code> : <span className='muted'>none yet</span>}</dd>
        <dt>Certificate expires</dt><dd data-testid='mesh-expiry'>{meshExpiryText(m.notAfter)}</dd>
        <dt>Source</dt><dd className='wrap'><code>{meshSourceText(m)}</code></dd>
        {m.reason !== undefined && m.reason !== ''
          ? <><dt>Reason</dt><dd data-testid='mesh-reason' className={m.state === 'ready' ? 'muted' : 'reason-bad'}>{m.reason}</dd></>
          : null}
      </dl>
    </Card>
  )
}
