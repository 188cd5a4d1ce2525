/**
 * Live trace viewer: arm `/debug/trace` (optionally filtered), then either wait for the next
 * matching request from any client, or send one through a listener of this proxy (tagged so
 * the trace catches exactly it — `porticoctl proxy trace -- URL` does the same). Events show
 * as a timeline; the detail pane has the raw event, the snapshot at that point and its diff
 * against the previous stage (the same text as porticoctl's, from @portico/trace-view).
 * Traces can be saved as JSON Lines (`porticoctl proxy trace -f FILE` reads them) and opened.
 */

import { useEffect, useMemo, useRef, useState, type KeyboardEvent } from 'react'
import { detailLines, formatMicros, summarize, typeLabel, type DetailMode, type TraceEvent } from '@portico/trace-view'
import { ApiError, postJson, type FireResult, type Overview } from '../api.ts'
import { Badge, Card, ErrorBox, ReadOnlyNote } from '../common.tsx'
import { armTrace, fromJsonLines, toJsonLines, type ArmedTrace, type TraceFilters } from '../trace-stream.ts'

const MODES: Array<[key: string, mode: DetailMode, label: string]> = [
  ['e', 'event', 'Event'],
  ['s', 'snapshot', 'Snapshot'],
  ['d', 'diff', 'Diff']
]

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']

/** Not crypto.randomUUID: that needs a secure context, and a port-forward may not be one. */
function randomTag (): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return [...bytes].map(b => b.toString(16).padStart(2, '0')).join('')
}

function parseHeaderLines (text: string): Array<[string, string]> {
  const out: Array<[string, string]> = []
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    const colon = line.indexOf(':')
    if (colon <= 0) throw new Error(`header line "${line}" is not "Name: value"`)
    out.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()])
  }
  return out
}

type Phase = 'idle' | 'arming' | 'waiting' | 'sending' | 'done' | 'failed'

export function TraceView (props: { overview: Overview | null }) {
  const o = props.overview
  const writes = o?.adminWrites === true
  const ports = (o?.binds ?? []).map(b => ({ port: b.port, protocol: b.protocol, hostname: b.listeners.find(l => l.hostname !== null)?.hostname ?? null }))

  const [filters, setFilters] = useState<TraceFilters>({})
  const [method, setMethod] = useState('GET')
  const [url, setUrl] = useState('')
  const [port, setPort] = useState<number | null>(null)
  const [headerText, setHeaderText] = useState('')
  const [body, setBody] = useState('')
  const [insecure, setInsecure] = useState(false)

  const [events, setEvents] = useState<TraceEvent[]>([])
  const [selected, setSelected] = useState(0)
  const [mode, setMode] = useState<DetailMode>('diff')
  const [phase, setPhase] = useState<Phase>('idle')
  const [status, setStatus] = useState('Not armed.')
  const [error, setError] = useState<string | null>(null)
  const [response, setResponse] = useState<FireResult | null>(null)
  const armed = useRef<ArmedTrace | null>(null)
  const fileInput = useRef<HTMLInputElement | null>(null)

  // Defaults from the first listener once the overview is there; never over what was typed.
  useEffect(() => {
    if (ports.length === 0) return
    const first = ports.find(p => p.protocol === 'HTTP') ?? ports[0]!
    setPort(p => p ?? first.port)
    setUrl(u => u !== '' ? u : `${first.protocol === 'HTTPS' ? 'https' : 'http'}://${first.hostname?.replace(/^\*\./, 'www.') ?? 'localhost'}/`)
  }, [ports.length]) // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => () => armed.current?.stop(), [])

  const busy = phase === 'arming' || phase === 'waiting' || phase === 'sending'

  const start = async (send: boolean) => {
    armed.current?.stop()
    setEvents([])
    setSelected(0)
    setError(null)
    setResponse(null)
    const collected: TraceEvent[] = []
    const tag = randomTag()
    const f: TraceFilters = { ...filters }
    let headers: Array<[string, string]> = []
    if (send) {
      try {
        headers = parseHeaderLines(headerText)
      } catch (err) {
        setError((err as Error).message)
        return
      }
      f.header = `${o?.traceHeader ?? 'x-portico-ui-trace'}:${tag}`
    }
    setPhase('arming')
    setStatus('Arming the trace…')
    const t = armTrace(f, e => {
      collected.push(e)
      setEvents([...collected])
    })
    armed.current = t
    try {
      await t.ready
    } catch (err) {
      setPhase('failed')
      setError((err as Error).message)
      setStatus('Could not arm the trace.')
      return
    }
    if (!send) {
      const what = Object.entries(f).filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => `${k}=${String(v)}`).join(', ')
      setPhase('waiting')
      setStatus(`Armed: waiting for the next request${what === '' ? ' from any client' : ` (${what})`}…`)
      try {
        await t.finished
        setPhase(collected.length > 0 ? 'done' : 'idle')
        setStatus(collected.length > 0 ? `Traced ${collected.length} events.` : 'Stopped.')
      } catch (err) {
        setPhase('failed')
        setError((err as Error).message)
      }
      return
    }
    setPhase('sending')
    setStatus(`Sending ${method} ${url} to port ${String(port)}…`)
    try {
      const res = await postJson<FireResult>('/api/trace/fire', { url, method, headers, body, port, tag, insecure })
      setResponse(res)
      setStatus(`Sent ${method} ${url} → ${res.status}; waiting for the trace to finish…`)
      const grace = new Promise<'late'>(resolve => window.setTimeout(() => resolve('late'), 2000))
      const result = await Promise.race([t.finished.then(() => 'done' as const), grace])
      if (result === 'late' && collected.length === 0) {
        t.stop()
        setPhase('failed')
        setError(`port ${String(port)} answered ${res.status}, but the proxy traced no request`)
        return
      }
      await t.finished
      setPhase('done')
      setStatus(`Sent ${method} ${url} → ${res.status} in ${res.durationMs} ms · traced ${collected.length} events.`)
    } catch (err) {
      t.stop()
      setPhase('failed')
      setError(err instanceof ApiError ? err.message : (err as Error).message)
      setStatus('The request failed.')
    }
  }

  const stop = () => {
    armed.current?.stop()
    armed.current = null
    setPhase('idle')
    setStatus('Stopped.')
  }

  const save = () => {
    const blob = new Blob([toJsonLines(events)], { type: 'application/x-ndjson' })
    const a = document.createElement('a')
    a.href = URL.createObjectURL(blob)
    a.download = `trace-${new Date().toISOString().replace(/[:.]/g, '-')}.jsonl`
    a.click()
    window.setTimeout(() => URL.revokeObjectURL(a.href), 1000)
  }

  const open = async (file: File) => {
    try {
      const loaded = fromJsonLines(await file.text())
      armed.current?.stop()
      setEvents(loaded)
      setSelected(0)
      setResponse(null)
      setError(null)
      setPhase('done')
      setStatus(`Opened ${file.name}: ${loaded.length} events.`)
    } catch (err) {
      setError(`${file.name}: ${(err as Error).message}`)
    }
  }

  return (
    <div className='trace' data-testid='view-trace'>
      <div className='grid'>
        <Card title='1 · Which request' testId='trace-filters'>
          <p className='muted small'>Filters of <code>/debug/trace</code>; all given must hold. Empty: the next request of any client.</p>
          <div className='form-grid'>
            {(['path', 'route', 'method', 'host', 'header'] as const).map(k => (
              <label key={k}>
                <span>{k}</span>
                <input
                  value={filters[k] ?? ''}
                  placeholder={{ path: '/api/* (prefix with *)', route: 'route key', method: 'GET', host: 'example.com', header: 'name:value' }[k]}
                  onChange={e => setFilters({ ...filters, [k]: e.target.value })}
                  data-testid={`filter-${k}`}
                />
              </label>
            ))}
          </div>
          <div className='buttons'>
            <button type='button' onClick={() => { void start(false) }} disabled={busy || o?.tracing === false} data-testid='trace-watch'>Wait for next request</button>
          </div>
        </Card>

        <Card title='2 · Or send one through the gateway' testId='trace-send'>
          {!writes ? <ReadOnlyNote what='Sending a request from the admin server' /> : null}
          <div className='form-grid'>
            <label className='row'>
              <span>request</span>
              <div className='inline'>
                <select value={method} onChange={e => setMethod(e.target.value)} data-testid='send-method'>
                  {METHODS.map(m => <option key={m}>{m}</option>)}
                </select>
                <input className='grow' value={url} onChange={e => setUrl(e.target.value)} placeholder='http://example.com/path?q=1' data-testid='send-url' />
              </div>
            </label>
            <label>
              <span>listener</span>
              <select value={port ?? ''} onChange={e => setPort(Number(e.target.value))} data-testid='send-port'>
                {ports.map(p => <option key={p.port} value={p.port}>{p.port} ({p.protocol})</option>)}
              </select>
            </label>
            <label className='row'>
              <span>headers</span>
              <textarea rows={2} value={headerText} onChange={e => setHeaderText(e.target.value)} placeholder={'Authorization: Bearer …\nx-demo: 1'} data-testid='send-headers' />
            </label>
            {method !== 'GET' && method !== 'HEAD'
              ? <label className='row'><span>body</span><textarea rows={3} value={body} onChange={e => setBody(e.target.value)} data-testid='send-body' /></label>
              : null}
            {url.startsWith('https:') || ports.find(p => p.port === port)?.protocol === 'HTTPS' ? <label className='check'><input type='checkbox' checked={insecure} onChange={e => setInsecure(e.target.checked)} /> skip certificate verification</label> : null}
          </div>
          <p className='muted small'>The URL's host is the Host header (and TLS server name); the connection goes to the chosen listener of this proxy, over TLS when it is an HTTPS listener (the name is never resolved).</p>
          <div className='buttons'>
            <button type='button' className='primary' onClick={() => { void start(true) }} disabled={busy || !writes || port === null || o?.tracing === false} data-testid='trace-send-button'>Send and trace</button>
          </div>
        </Card>
      </div>

      <div className='statusbar' data-testid='trace-status'>
        {busy ? <span className='spinner' aria-hidden='true' /> : null}
        <span>{o?.tracing === false ? 'Tracing is disabled on this proxy (DEBUG_TRACE=off).' : status}</span>
        <span className='spacer' />
        {busy ? <button type='button' onClick={stop} data-testid='trace-stop'>Stop</button> : null}
        <button type='button' onClick={save} disabled={events.length === 0} data-testid='trace-save'>Save .jsonl</button>
        <button type='button' onClick={() => fileInput.current?.click()}>Open .jsonl</button>
        <input ref={fileInput} type='file' accept='.jsonl,.json,.txt' hidden onChange={e => { const f = e.target.files?.[0]; if (f !== undefined) void open(f); e.target.value = '' }} />
      </div>
      <ErrorBox error={error} />
      {response !== null ? <ResponseBox response={response} /> : null}
      {events.length > 0
        ? <Timeline events={events} selected={selected} onSelect={setSelected} mode={mode} onMode={setMode} />
        : phase === 'idle' || phase === 'failed' ? null : <p className='muted'>No events yet.</p>}
    </div>
  )
}

function ResponseBox (props: { response: FireResult }) {
  const r = props.response
  const [open, setOpen] = useState(false)
  return (
    <div className='response' data-testid='fire-response'>
      <div className='response-head' onClick={() => setOpen(!open)}>
        <Badge tone={r.status < 400 ? 'ok' : r.status < 500 ? 'warn' : 'bad'} testId='fire-status'>{r.status}</Badge>
        <span>{r.sent.method} {r.sent.url} <span className='muted'>→ {r.sent.to} · {r.durationMs} ms · {r.bodyBytes} bytes{r.truncated ? ' (cut)' : ''}</span></span>
        <button type='button' className='link'>{open ? 'hide response' : 'show response'}</button>
      </div>
      {open
        ? (
          <pre className='json'>
            {Object.entries(r.headers).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`).join('\n')}
            {'\n\n'}
            {r.body}
          </pre>
          )
        : null}
    </div>
  )
}

function severityClass (e: TraceEvent): string {
  return e.severity === 'error' ? 'sev-error' : e.severity === 'warn' ? 'sev-warn' : ''
}

function Timeline (props: { events: TraceEvent[], selected: number, onSelect: (i: number) => void, mode: DetailMode, onMode: (m: DetailMode) => void }) {
  const { events, selected, onSelect, mode, onMode } = props
  const total = Math.max(1, ...events.map(e => e.eventEnd))
  const summaries = useMemo(() => events.map((_e, i) => summarize(events, i)), [events])
  const lines = useMemo(() => detailLines(events, selected, mode), [events, selected, mode])
  const event = events[selected]
  const listRef = useRef<HTMLDivElement | null>(null)
  useEffect(() => {
    listRef.current?.querySelector<HTMLElement>(`[data-index="${selected}"]`)?.scrollIntoView({ block: 'nearest' })
  }, [selected])
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'ArrowDown' || e.key === 'j') { onSelect(Math.min(events.length - 1, selected + 1)); e.preventDefault() }
    if (e.key === 'ArrowUp' || e.key === 'k') { onSelect(Math.max(0, selected - 1)); e.preventDefault() }
    if (e.key === 'Home') onSelect(0)
    if (e.key === 'End') onSelect(events.length - 1)
    const m = MODES.find(([key]) => key === e.key)
    if (m !== undefined) onMode(m[1])
  }
  return (
    <div className='timeline-wrap' onKeyDown={onKey}>
      <div className='timeline' ref={listRef} tabIndex={0} data-testid='trace-timeline' aria-label='trace events (↑/↓ to move, e/s/d for the detail mode)'>
        <div className='tl-row tl-head'>
          <span className='tl-n'>#</span><span className='tl-t'>at</span><span className='tl-type'>Type</span><span className='tl-sum'>Summary</span><span className='tl-bar'>timeline · {formatMicros(total)}</span>
        </div>
        {events.map((e, i) => {
          const start = e.eventStart ?? e.eventEnd
          const left = (start / total) * 100
          const width = Math.max(0.6, ((e.eventEnd - start) / total) * 100)
          return (
            <div
              key={i}
              data-index={i}
              data-type={e.message.type}
              data-testid='trace-event'
              className={`tl-row ${i === selected ? 'selected' : ''} ${severityClass(e)}`}
              onClick={() => onSelect(i)}
            >
              <span className='tl-n'>{i + 1}</span>
              <span className='tl-t'>{formatMicros(e.eventEnd)}</span>
              <span className='tl-type' title={e.message.type}>{typeLabel(e.message.type)}</span>
              <span className='tl-sum' title={summaries[i]}>{summaries[i]}</span>
              <span className='tl-bar'><span className={`bar ${e.eventStart === null ? 'point' : 'span'}`} style={{ left: `${Math.min(left, 99.4)}%`, width: `${width}%` }} /></span>
            </div>
          )
        })}
      </div>
      <div className='detail' data-testid='trace-detail'>
        <div className='detail-head'>
          <strong>{event === undefined ? '' : `#${selected + 1} ${typeLabel(event.message.type)}`}</strong>
          <span className='spacer' />
          {MODES.map(([key, m, label]) => (
            <button type='button' key={m} className={m === mode ? 'seg active' : 'seg'} onClick={() => onMode(m)} data-testid={`detail-${m}`} title={`key ${key}`}>
              {label} <kbd>{key}</kbd>
            </button>
          ))}
        </div>
        <pre className='detail-body' data-testid='detail-body'>
          {lines.map((l, i) => <div key={i} className={l.color === undefined ? '' : `c-${l.color}`}>{l.text === '' ? ' ' : l.text}</div>)}
        </pre>
      </div>
    </div>
  )
}
