/**
 * The shell: a header with the instance (version, config version, readiness, read-only or
 * writable), the navigation, and the current view. The overview is polled here so every
 * view knows the listeners and whether changes are allowed.
 */

import { getJson, type Overview } from './api.ts'
import { Badge, ErrorBox, usePoll, useView, VIEWS, type ViewName } from './common.tsx'
import { OverviewView } from './views/Overview.tsx'
import { RoutesView } from './views/Routes.tsx'
import { BackendsView } from './views/Backends.tsx'
import { TraceView } from './views/Trace.tsx'
import { McpView } from './views/Mcp.tsx'
import { LoggingView } from './views/Logging.tsx'
import { CelView } from './views/Cel.tsx'

export function App () {
  const [view, go] = useView()
  const overview = usePoll(signal => getJson<Overview>('/api/overview', signal), 3000)
  const o = overview.data
  return (
    <div className='app'>
      <header className='topbar'>
        <div className='brand'>
          <span className='logo' aria-hidden='true'>▚</span>
          <span className='name'>Portico</span>
          <span className='sub'>admin</span>
        </div>
        <div className='instance' data-testid='instance'>
          {o === null
            ? <span className='muted'>{overview.error === null ? 'connecting…' : 'admin server unreachable'}</span>
            : <>
                <span title='proxy version'>v{o.version}</span>
                <span className='muted' title='config version'>config {o.configVersion ?? 'none'}</span>
                {o.ready ? <Badge tone='ok' testId='ready-badge'>ready</Badge> : <Badge tone='bad' testId='ready-badge' title={`waiting for: ${o.pending.join(', ')}`}>not ready</Badge>}
                {o.adminWrites
                  ? <Badge tone='warn' testId='mode-badge' title='config.adminWrites is on: this UI can send requests, use MCP routes and change the log level'>writable</Badge>
                  : <Badge tone='muted' testId='mode-badge' title='config.adminWrites is off: nothing can be changed from here'>read-only</Badge>}
              </>}
        </div>
      </header>
      <nav className='tabs' aria-label='views'>
        {VIEWS.map(([name, label]) => (
          <a
            key={name}
            href={`/ui/${name}`}
            className={name === view ? 'tab active' : 'tab'}
            aria-current={name === view ? 'page' : undefined}
            data-testid={`nav-${name}`}
            onClick={e => { e.preventDefault(); go(name) }}
          >{label}</a>
        ))}
      </nav>
      <main className='content'>
        <ErrorBox error={o === null ? overview.error : null} title='Cannot reach the admin server' />
        {o !== null && !o.adminWrites ? <div className='readonly-banner' data-testid='readonly-banner'>Read-only mode: this UI shows everything but changes nothing (sending requests, the MCP playground and setting the log level are off). Start Portico with <code>config.adminWrites: true</code> or <code>ADMIN_WRITES=true</code> to allow them.</div> : null}
        <CurrentView view={view} overview={o} refreshOverview={overview.refresh} />
      </main>
    </div>
  )
}

function CurrentView (props: { view: ViewName, overview: Overview | null, refreshOverview: () => void }) {
  const o = props.overview
  switch (props.view) {
    case 'overview': return <OverviewView overview={o} />
    case 'routes': return <RoutesView />
    case 'backends': return <BackendsView />
    case 'trace': return <TraceView overview={o} />
    case 'mcp': return <McpView overview={o} />
    case 'logging': return <LoggingView overview={o} onChange={props.refreshOverview} />
    case 'cel': return <CelView />
  }
}
