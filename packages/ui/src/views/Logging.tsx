/**
 * Log level: the current filter (`info`, or `info,engine=debug`), a global level and one per
 * component, or a filter typed as text. Setting it needs adminWrites (porticoctl's
 * `/logging` POST is separate and unchanged).
 */

import { useState } from 'react'
import { getJson, postJson, type LoggingState, type Overview } from '../api.ts'
import { Badge, Card, ErrorBox, ReadOnlyNote, usePoll } from '../common.tsx'

function parseFilter (text: string): { global: string, modules: Record<string, string> } {
  const out = { global: 'info', modules: {} as Record<string, string> }
  for (const part of text.split(',')) {
    const p = part.trim()
    if (p === '') continue
    const sep = p.search(/[=:]/)
    if (sep === -1) out.global = p
    else out.modules[p.slice(0, sep).trim()] = p.slice(sep + 1).trim()
  }
  return out
}

function formatFilter (global: string, modules: Record<string, string>): string {
  return [global, ...Object.entries(modules).filter(([, l]) => l !== '').map(([m, l]) => `${m}=${l}`)].join(',')
}

export function LoggingView (props: { overview: Overview | null, onChange: () => void }) {
  const state = usePoll(signal => getJson<LoggingState>('/api/logging', signal), 5000)
  const s = state.data
  const writes = s?.writable ?? props.overview?.adminWrites ?? false
  // The form follows the proxy's filter until edited (draft), and again after Apply.
  const [draft, setDraft] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [saved, setSaved] = useState<string | null>(null)
  const current = s?.level ?? ''
  const text = draft ?? current
  const { global, modules } = parseFilter(text)

  const apply = async (level: string) => {
    setError(null)
    setSaved(null)
    try {
      const next = await postJson<LoggingState>('/api/logging', { level })
      state.set(next)
      setSaved(next.level)
      setDraft(null)
      props.onChange()
    } catch (err) {
      setError((err as Error).message)
    }
  }

  return (
    <div className='grid' data-testid='view-logging'>
      <Card title='Log level' testId='logging-card'>
        <p>Current filter: <code className='big' data-testid='log-current'>{current === '' ? '…' : current}</code></p>
        {!writes ? <ReadOnlyNote what='Changing the log level from here' /> : null}
        <div className='form-grid'>
          <label>
            <span>global</span>
            <select value={global} onChange={e => setDraft(formatFilter(e.target.value, modules))} disabled={!writes} data-testid='log-global'>
              {(s?.levels ?? []).map(l => <option key={l}>{l}</option>)}
            </select>
          </label>
          {(s?.components ?? []).map(c => (
            <label key={c}>
              <span>{c}{c === 'request' ? <span className='muted small'> (access log)</span> : null}</span>
              <select
                value={modules[c] ?? ''}
                disabled={!writes}
                onChange={e => setDraft(formatFilter(global, { ...modules, [c]: e.target.value }))}
                data-testid={`log-${c}`}
              >
                <option value=''>(global)</option>
                {(s?.levels ?? []).map(l => <option key={l}>{l}</option>)}
              </select>
            </label>
          ))}
          <label className='row'>
            <span>filter</span>
            <input value={text} onChange={e => setDraft(e.target.value)} disabled={!writes} placeholder='info,engine=debug' data-testid='log-text' />
          </label>
        </div>
        <div className='buttons'>
          <button type='button' className='primary' disabled={!writes || text.trim() === ''} onClick={() => { void apply(text.trim()) }} data-testid='log-apply'>Apply</button>
          {saved !== null ? <span data-testid='log-saved'><Badge tone='ok'>set</Badge> now <code>{saved}</code></span> : null}
        </div>
        <ErrorBox error={error ?? state.error} />
      </Card>
      <Card title='About levels'>
        <p className='small'>Levels: <code>error</code>, <code>warn</code>, <code>info</code>, <code>debug</code>, <code>trace</code>, <code>off</code>. A filter sets a global level and per-component overrides: <code>warn,request=info</code> keeps the access log while quieting the rest.</p>
        <p className='small muted'>Same as <code>porticoctl proxy log --local --level …</code>. The level is not saved: a restart goes back to <code>LOG_LEVEL</code> / <code>config.logging.level</code>.</p>
      </Card>
    </div>
  )
}
