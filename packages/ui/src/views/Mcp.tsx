/**
 * MCP playground: connect to an MCP route of this gateway (the admin server runs the MCP SDK
 * client against one of its own listeners, so the browser stays same-origin), list tools,
 * prompts and resources, call a tool through a form generated from its input schema, get a
 * prompt, read a resource, and see each result.
 */

import { useEffect, useRef, useState, type ReactNode } from 'react'
import { getJson, postJson, type ConfigDump, type McpConnected, type McpLists, type McpPrompt, type McpResource, type McpTool, type Overview } from '../api.ts'
import { Badge, Card, ErrorBox, Json, ReadOnlyNote } from '../common.tsx'
import { formArguments, initialValues, SchemaForm, type FieldValues } from '../schema-form.tsx'

interface McpRouteChoice {
  route: string
  port: number
  path: string
  host: string
}

/** MCP routes of the loaded config, with a listener port and a path that reaches them. */
function mcpRoutes (dump: ConfigDump, overview: Overview): McpRouteChoice[] {
  const mcpBackends = new Set(dump.backends.filter(b => b.kind === 'mcp').map(b => b.key))
  const out: McpRouteChoice[] = []
  for (const r of dump.routes) {
    if (!r.backends.some(ref => mcpBackends.has(ref.backend))) continue
    const bind = overview.binds.find(b => b.listeners.some(l => l.key === r.listener))
    if (bind === undefined) continue
    const m = r.matches.find(x => x.path.kind !== 'regex') ?? r.matches[0]
    const path = m === undefined || m.path.kind === 'regex' ? '/mcp' : m.path.value === '/' ? '/mcp' : m.path.value
    const listener = bind.listeners.find(l => l.key === r.listener)
    const host = (r.hostnames[0] ?? listener?.hostname ?? 'localhost').replace(/^\*\./, 'www.')
    out.push({ route: r.key, port: bind.port, path, host })
  }
  return out
}

function ContentView (props: { result: unknown }) {
  const r = props.result as { content?: Array<Record<string, unknown>>, isError?: boolean, structuredContent?: unknown, messages?: Array<{ role: string, content: Record<string, unknown> }>, contents?: Array<Record<string, unknown>> }
  const blocks: Array<Record<string, unknown>> = r.content ?? r.contents ?? (r.messages ?? []).map(m => ({ ...m.content, role: m.role }))
  return (
    <div className='mcp-result' data-testid='mcp-result'>
      {r.isError === true ? <Badge tone='bad'>isError</Badge> : null}
      {blocks.map((b, i) => (
        <div key={i} className='content-block'>
          <span className='muted small'>{String(b.role ?? '')} {String(b.type ?? b.mimeType ?? '')}</span>
          {typeof b.text === 'string'
            ? <pre className='result-text' data-testid='mcp-result-text'>{b.text}</pre>
            : (b.type === 'image' && typeof b.data === 'string' && typeof b.mimeType === 'string')
                ? <img alt='tool result' src={`data:${b.mimeType};base64,${b.data}`} />
                : <Json value={b} />}
        </div>
      ))}
      {r.structuredContent !== undefined ? <><span className='muted small'>structuredContent</span><Json value={r.structuredContent} /></> : null}
      <details><summary className='muted small'>raw result</summary><Json value={props.result} /></details>
    </div>
  )
}

export function McpView (props: { overview: Overview | null }) {
  const o = props.overview
  const writes = o?.adminWrites === true
  const [routes, setRoutes] = useState<McpRouteChoice[]>([])
  const [port, setPort] = useState<number | null>(null)
  const [path, setPath] = useState('/mcp')
  const [host, setHost] = useState('localhost')
  const [headerText, setHeaderText] = useState('')
  const [conn, setConn] = useState<McpConnected | null>(null)
  const [lists, setLists] = useState<McpLists | null>(null)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [tab, setTab] = useState<'tools' | 'prompts' | 'resources'>('tools')
  const [tool, setTool] = useState<McpTool | null>(null)
  const [values, setValues] = useState<FieldValues>({})
  const [result, setResult] = useState<unknown>(null)
  const [resultOf, setResultOf] = useState('')
  const touched = useRef(false)

  useEffect(() => {
    if (o === null) return
    const controller = new AbortController()
    getJson<ConfigDump>('/config_dump', controller.signal).then(d => {
      const found = mcpRoutes(d, o)
      setRoutes(found)
      // Defaults from the first MCP route, unless the form was already filled in.
      if (!touched.current) {
        const first = found[0]
        if (first !== undefined) { setPort(first.port); setPath(first.path); setHost(first.host) } else if (o.binds[0] !== undefined) setPort(p => p ?? o.binds[0]!.port)
      }
    }, () => {})
    return () => controller.abort()
  }, [o?.configVersion]) // eslint-disable-line react-hooks/exhaustive-deps

  // Close the playground's MCP session when leaving the view.
  useEffect(() => () => {
    if (conn !== null) void postJson('/api/mcp/close', { session: conn.session }).catch(() => {})
  }, [conn])

  const run = async (what: () => Promise<void>) => {
    setBusy(true)
    setError(null)
    try {
      await what()
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }

  const connect = () => run(async () => {
    const headers: Record<string, string> = {}
    for (const line of headerText.split('\n')) {
      if (line.trim() === '') continue
      const c = line.indexOf(':')
      if (c <= 0) throw new Error(`header line "${line}" is not "Name: value"`)
      headers[line.slice(0, c).trim()] = line.slice(c + 1).trim()
    }
    if (conn !== null) await postJson('/api/mcp/close', { session: conn.session }).catch(() => {})
    setConn(null)
    setLists(null)
    setTool(null)
    setResult(null)
    const c = await postJson<McpConnected>('/api/mcp/connect', { port, path, host, headers })
    setConn(c)
    setLists(await postJson<McpLists>('/api/mcp/list', { session: c.session }))
  })

  const refresh = () => run(async () => {
    if (conn === null) return
    setLists(await postJson<McpLists>('/api/mcp/list', { session: conn.session }))
  })

  const disconnect = () => run(async () => {
    if (conn !== null) await postJson('/api/mcp/close', { session: conn.session })
    setConn(null)
    setLists(null)
    setTool(null)
    setResult(null)
  })

  const pickTool = (t: McpTool) => {
    setTool(t)
    setValues(initialValues(t.inputSchema))
    setResult(null)
  }

  const callTool = () => run(async () => {
    if (conn === null || tool === null) return
    const args = formArguments(tool.inputSchema, values)
    setResult(null)
    setResult(await postJson('/api/mcp/call', { session: conn.session, name: tool.name, arguments: args }))
    setResultOf(`tools/call ${tool.name}`)
  })

  const getPrompt = (p: McpPrompt, args: Record<string, string>) => run(async () => {
    if (conn === null) return
    setResult(await postJson('/api/mcp/prompt', { session: conn.session, name: p.name, arguments: args }))
    setResultOf(`prompts/get ${p.name}`)
  })

  const readResource = (r: McpResource) => run(async () => {
    if (conn === null) return
    setResult(await postJson('/api/mcp/read', { session: conn.session, uri: r.uri }))
    setResultOf(`resources/read ${r.uri}`)
  })

  return (
    <div data-testid='view-mcp'>
      <Card title='Connect to an MCP route' testId='mcp-connect'>
        {!writes ? <ReadOnlyNote what='The MCP playground' /> : null}
        <div className='form-grid'>
          <label>
            <span>route</span>
            <select
              value={routes.findIndex(r => r.port === port && r.path === path)}
              onChange={e => { const r = routes[Number(e.target.value)]; touched.current = true; if (r !== undefined) { setPort(r.port); setPath(r.path); setHost(r.host) } }}
              data-testid='mcp-route'
            >
              {routes.length === 0 ? <option value={-1}>(no MCP route in the config)</option> : null}
              {routes.findIndex(r => r.port === port && r.path === path) === -1 && routes.length > 0 ? <option value={-1}>(custom)</option> : null}
              {routes.map((r, i) => <option key={`${r.route}-${r.port}`} value={i}>{r.route} — :{r.port}{r.path}</option>)}
            </select>
          </label>
          <label>
            <span>listener port</span>
            <select value={port ?? ''} onChange={e => { touched.current = true; setPort(Number(e.target.value)) }} data-testid='mcp-port'>
              {(o?.binds ?? []).map(b => <option key={b.port} value={b.port}>{b.port} ({b.protocol})</option>)}
            </select>
          </label>
          <label><span>path</span><input value={path} onChange={e => { touched.current = true; setPath(e.target.value) }} data-testid='mcp-path' /></label>
          <label><span>Host</span><input value={host} onChange={e => { touched.current = true; setHost(e.target.value) }} data-testid='mcp-host' /></label>
          <label className='row'>
            <span>headers</span>
            <textarea rows={2} value={headerText} onChange={e => setHeaderText(e.target.value)} placeholder='Authorization: Bearer …' data-testid='mcp-headers' />
          </label>
        </div>
        <div className='buttons'>
          <button type='button' className='primary' onClick={() => { void connect() }} disabled={!writes || busy || port === null} data-testid='mcp-connect-button'>{conn === null ? 'Connect' : 'Reconnect'}</button>
          {conn !== null ? <button type='button' onClick={() => { void refresh() }} disabled={busy}>Refresh lists</button> : null}
          {conn !== null ? <button type='button' onClick={() => { void disconnect() }} disabled={busy} data-testid='mcp-disconnect'>Disconnect</button> : null}
          {busy ? <span className='spinner' aria-hidden='true' /> : null}
        </div>
        {conn !== null
          ? (
            <p className='small' data-testid='mcp-connected'>
              <Badge tone='ok'>connected</Badge> {conn.serverInfo?.name ?? '?'} {conn.serverInfo?.version ?? ''} · protocol {conn.protocolVersion ?? '?'} · <code>{conn.url}</code>
              {conn.mcpSessionId !== null ? <span className='muted'> · session {conn.mcpSessionId.slice(0, 16)}…</span> : null}
            </p>
            )
          : null}
      </Card>
      <ErrorBox error={error} />
      {lists !== null
        ? (
          <div className='mcp-main'>
            <div className='mcp-lists'>
              <nav className='subtabs'>
                {(['tools', 'prompts', 'resources'] as const).map(t => (
                  <button type='button' key={t} className={tab === t ? 'seg active' : 'seg'} onClick={() => setTab(t)} data-testid={`mcp-tab-${t}`}>
                    {t} ({lists[t].items.length})
                  </button>
                ))}
              </nav>
              {tab === 'tools' ? <ItemList part={lists.tools} render={t => <button type='button' className={tool?.name === t.name ? 'item active' : 'item'} onClick={() => pickTool(t)} data-testid={`tool-${t.name}`}><strong>{t.title ?? t.name}</strong>{t.title !== undefined ? <code className='small'> {t.name}</code> : null}<span className='muted small'>{t.description}</span></button>} keyOf={t => t.name} /> : null}
              {tab === 'prompts' ? <ItemList part={lists.prompts} render={p => <PromptItem prompt={p} onGet={getPrompt} busy={busy} />} keyOf={p => p.name} /> : null}
              {tab === 'resources'
                ? (
                  <>
                    <ItemList part={lists.resources} render={r => <button type='button' className='item' onClick={() => { void readResource(r) }} data-testid='resource-item'><strong>{r.name}</strong><code className='small'>{r.uri}</code><span className='muted small'>{r.description ?? r.mimeType ?? ''}</span></button>} keyOf={r => r.uri} />
                    {lists.resourceTemplates.items.length > 0 ? <p className='muted small'>Templates: {lists.resourceTemplates.items.map(t => t.uriTemplate).join(', ')}</p> : null}
                  </>
                  )
                : null}
            </div>
            <div className='mcp-work'>
              {tab === 'tools' && tool !== null
                ? (
                  <Card title={<>Call <code>{tool.name}</code></>} testId='tool-form'>
                    {tool.description !== undefined ? <p className='muted small'>{tool.description}</p> : null}
                    <SchemaForm schema={tool.inputSchema} values={values} onChange={setValues} idPrefix={`tool-${tool.name}`} />
                    <div className='buttons'>
                      <button type='button' className='primary' onClick={() => { void callTool() }} disabled={busy} data-testid='tool-call'>Call tool</button>
                    </div>
                    <details><summary className='muted small'>input schema</summary><Json value={tool.inputSchema} /></details>
                  </Card>
                  )
                : null}
              {result !== null ? <Card title={<>Result of <code>{resultOf}</code></>}><ContentView result={result} /></Card> : null}
              {lists.notifications.length > 0
                ? <Card title={`Notifications (${lists.notifications.length})`}><Json value={lists.notifications} /></Card>
                : null}
            </div>
          </div>
          )
        : null}
    </div>
  )
}

function ItemList<T> (props: { part: { items: T[], error?: string, unsupported?: boolean }, render: (t: T) => ReactNode, keyOf: (t: T) => string }) {
  if (props.part.error !== undefined) return <ErrorBox error={props.part.error} />
  if (props.part.unsupported === true) return <p className='muted small'>The server does not offer these.</p>
  if (props.part.items.length === 0) return <p className='muted small'>None.</p>
  return <ul className='items'>{props.part.items.map(t => <li key={props.keyOf(t)}>{props.render(t)}</li>)}</ul>
}

function PromptItem (props: { prompt: McpPrompt, onGet: (p: McpPrompt, args: Record<string, string>) => void, busy: boolean }) {
  const p = props.prompt
  const [args, setArgs] = useState<Record<string, string>>({})
  return (
    <div className='item prompt'>
      <strong>{p.title ?? p.name}</strong>
      <span className='muted small'>{p.description}</span>
      {(p.arguments ?? []).map(a => (
        <label key={a.name} className='row small'>
          <span>{a.name}{a.required === true ? <span className='req'>*</span> : null}</span>
          <input value={args[a.name] ?? ''} onChange={e => setArgs({ ...args, [a.name]: e.target.value })} placeholder={a.description} />
        </label>
      ))}
      <div><button type='button' onClick={() => props.onGet(p, Object.fromEntries(Object.entries(args).filter(([, v]) => v !== '')))} disabled={props.busy}>Get prompt</button></div>
    </div>
  )
}
