/**
 * Small pieces every view uses: polling a JSON endpoint, error and status boxes, badges,
 * a collapsible JSON view, and the path router (views live at /ui/<view>; the admin server
 * answers any /ui/… path with index.html).
 */

import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react'

export const BASE = '/ui'

export type ViewName = 'overview' | 'routes' | 'backends' | 'trace' | 'mcp' | 'logging' | 'cel'

export const VIEWS: Array<[ViewName, string]> = [
  ['overview', 'Overview'],
  ['routes', 'Routes'],
  ['backends', 'Backends'],
  ['trace', 'Trace'],
  ['mcp', 'MCP playground'],
  ['logging', 'Log level'],
  ['cel', 'CEL playground']
]

function viewFromLocation (): ViewName {
  const rest = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) : ''
  const name = rest.replace(/^\/+/, '').split('/')[0] ?? ''
  return (VIEWS.find(([v]) => v === name)?.[0]) ?? 'overview'
}

export function useView (): [ViewName, (v: ViewName) => void] {
  const [view, setView] = useState<ViewName>(viewFromLocation)
  useEffect(() => {
    const onPop = () => setView(viewFromLocation())
    window.addEventListener('popstate', onPop)
    return () => window.removeEventListener('popstate', onPop)
  }, [])
  const go = useCallback((v: ViewName) => {
    if (v !== viewFromLocation()) window.history.pushState(null, '', `${BASE}/${v}`)
    setView(v)
  }, [])
  return [view, go]
}

export interface Polled<T> {
  data: T | null
  error: string | null
  loading: boolean
  refresh(): void
  /** Replaces the data until the next poll (say, with what a POST answered). */
  set(value: T): void
  updatedAt: Date | null
}

/** Fetches now and every `intervalMs` (0 = once) while mounted. */
export function usePoll<T> (load: (signal: AbortSignal) => Promise<T>, intervalMs: number, deps: unknown[] = []): Polled<T> {
  const [data, setData] = useState<T | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [loading, setLoading] = useState(true)
  const [updatedAt, setUpdatedAt] = useState<Date | null>(null)
  const [tick, setTick] = useState(0)
  const loadRef = useRef(load)
  loadRef.current = load
  // set() bumps this: an answer to a fetch started before it is stale and dropped.
  const generation = useRef(0)
  useEffect(() => {
    const controller = new AbortController()
    let timer: number | undefined
    const run = async () => {
      const started = generation.current
      try {
        const value = await loadRef.current(controller.signal)
        if (controller.signal.aborted || started !== generation.current) return
        setData(value)
        setError(null)
        setUpdatedAt(new Date())
      } catch (err) {
        if (controller.signal.aborted) return
        setError((err as Error).message)
      } finally {
        if (!controller.signal.aborted) {
          setLoading(false)
          if (intervalMs > 0) timer = window.setTimeout(() => { void run() }, intervalMs)
        }
      }
    }
    void run()
    return () => {
      controller.abort()
      window.clearTimeout(timer)
    }
  // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [intervalMs, tick, ...deps])
  return { data, error, loading, updatedAt, refresh: () => setTick(t => t + 1), set: value => { generation.current++; setData(value); setError(null) } }
}

export function ErrorBox (props: { error: string | null, title?: string }) {
  if (props.error === null) return null
  return <div className='error-box' role='alert'>{props.title !== undefined ? <strong>{props.title}: </strong> : null}{props.error}</div>
}

export function Badge (props: { tone: 'ok' | 'warn' | 'bad' | 'muted' | 'info', children: ReactNode, testId?: string, title?: string }) {
  return <span className={`badge badge-${props.tone}`} data-testid={props.testId} title={props.title}>{props.children}</span>
}

export function Card (props: { title: ReactNode, children: ReactNode, actions?: ReactNode, testId?: string, className?: string }) {
  return (
    <section className={`card ${props.className ?? ''}`} data-testid={props.testId}>
      <header className='card-head'>
        <h2>{props.title}</h2>
        {props.actions !== undefined ? <div className='card-actions'>{props.actions}</div> : null}
      </header>
      <div className='card-body'>{props.children}</div>
    </section>
  )
}

export function Json (props: { value: unknown, testId?: string }) {
  return <pre className='json' data-testid={props.testId}>{JSON.stringify(props.value, null, 2)}</pre>
}

export function ReadOnlyNote (props: { what: string }) {
  return (
    <div className='readonly-note' data-testid='readonly-note'>
      <strong>Read-only.</strong> {props.what} needs an admin server that allows changes: start Portico with <code>config.adminWrites: true</code> or <code>ADMIN_WRITES=true</code>.
    </div>
  )
}

export function formatDuration (seconds: number): string {
  const d = Math.floor(seconds / 86400)
  const h = Math.floor((seconds % 86400) / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = seconds % 60
  return [d > 0 ? `${d}d` : '', h > 0 ? `${h}h` : '', m > 0 ? `${m}m` : '', `${s}s`].filter(x => x !== '').slice(0, 3).join(' ')
}

export function formatTime (iso: string): string {
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString()
}

export function ago (iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000))
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : s < 86400 ? `${Math.floor(s / 3600)}h ago` : `${Math.floor(s / 86400)}d ago`
}
