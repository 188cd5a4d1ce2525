/**
 * CEL playground: try an `authorization` rule against a pasted token and sample request
 * variables, evaluated by the proxy with the engine's own CEL (the same compile step and
 * the same "a rule that fails to evaluate does not match"). The token is only decoded —
 * its signature is not checked here.
 */

import { useEffect, useState } from 'react'
import { getJson, postJson, type CelResult } from '../api.ts'
import { Badge, Card, ErrorBox, Json } from '../common.tsx'

const EXAMPLES = [
  '"read" in jwt.permissions',
  'jwt.sub == "alice"',
  'request.path.startsWith("/api") && request.method == "GET"',
  'source.address.startsWith("127.")',
  'has(jwt.email) && jwt.email.endsWith("@example.com")',
  'mcp.tool.name == "echo"'
]

const SAMPLE_MCP = { method: 'tools/call', tool: { name: 'echo', target: 'everything' } }

export function CelView () {
  const [expression, setExpression] = useState(EXAMPLES[0]!)
  const [token, setToken] = useState('')
  const [varsText, setVarsText] = useState('')
  const [mcpOn, setMcpOn] = useState(false)
  const [result, setResult] = useState<CelResult | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  useEffect(() => {
    getJson<{ sample: Record<string, unknown> }>('/api/cel').then(s => {
      const { mcp: _mcp, ...rest } = s.sample
      setVarsText(JSON.stringify(rest, null, 2))
    }, err => setError((err as Error).message))
  }, [])

  const evaluate = async () => {
    setError(null)
    let vars: Record<string, unknown>
    try {
      vars = varsText.trim() === '' ? {} : JSON.parse(varsText) as Record<string, unknown>
      if (typeof vars !== 'object' || vars === null || Array.isArray(vars)) throw new Error('not an object')
    } catch (err) {
      setError(`sample variables: not a JSON object (${(err as Error).message})`)
      return
    }
    vars = { ...vars, mcp: mcpOn ? SAMPLE_MCP : null }
    setBusy(true)
    try {
      setResult(await postJson<CelResult>('/api/cel', { expression, token, vars }))
    } catch (err) {
      setResult(null)
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }

  return (
    <div className='grid' data-testid='view-cel'>
      <Card title='Expression' testId='cel-card'>
        <label className='row'>
          <span className='muted small'>CEL, as in an <code>authorization</code> rule — variables <code>jwt</code>, <code>request</code>, <code>source</code>, <code>apiKey</code>, <code>basicAuth</code>, <code>mcp</code></span>
          <textarea
            rows={3}
            className='mono'
            value={expression}
            onChange={e => setExpression(e.target.value)}
            onKeyDown={e => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); void evaluate() } }}
            data-testid='cel-expression'
            spellCheck={false}
          />
        </label>
        <div className='chips'>
          {EXAMPLES.map(x => <button type='button' key={x} className='chip' onClick={() => setExpression(x)}>{x}</button>)}
        </div>
        <label className='row'>
          <span>Token (JWT) <span className='muted small'>— decoded only, <strong>not verified</strong>: its claims become <code>jwt</code> (without one, <code>jwt</code> is <code>{'{}'}</code>)</span></span>
          <textarea rows={3} className='mono' value={token} onChange={e => setToken(e.target.value)} placeholder='eyJhbGciOi…' data-testid='cel-token' spellCheck={false} />
        </label>
        <div className='buttons'>
          <button type='button' className='primary' onClick={() => { void evaluate() }} disabled={busy} data-testid='cel-evaluate'>Evaluate</button>
          <span className='muted small'>Ctrl+Enter</span>
        </div>
        <ErrorBox error={error} />
        {result !== null ? <CelResultView result={result} /> : null}
      </Card>
      <Card title='Sample variables'>
        <label className='row'>
          <span className='muted small'>JSON: <code>request</code>, <code>source</code>, <code>apiKey</code>, <code>basicAuth</code> (and <code>jwt</code>, when no token is given)</span>
          <textarea rows={14} className='mono' value={varsText} onChange={e => setVarsText(e.target.value)} data-testid='cel-vars' spellCheck={false} />
        </label>
        <label className='check'>
          <input type='checkbox' checked={mcpOn} onChange={e => setMcpOn(e.target.checked)} data-testid='cel-mcp' />
          <span>as an MCP item: <code>mcp = {JSON.stringify(SAMPLE_MCP)}</code> (otherwise <code>mcp</code> is null)</span>
        </label>
      </Card>
    </div>
  )
}

function CelResultView (props: { result: CelResult }) {
  const r = props.result
  return (
    <div className='cel-result' data-testid='cel-result'>
      {r.ok
        ? (
          <>
            <div className='cel-verdict'>
              <span className='muted'>value</span>
              <code className='big' data-testid='cel-value'>{JSON.stringify(r.value)}</code>
              <span className='muted small'>({r.type})</span>
            </div>
            <div className='cel-verdict'>
              <span className='muted'>as a rule</span>
              {r.matches === true ? <Badge tone='ok' testId='cel-matches'>matches</Badge> : <Badge tone='bad' testId='cel-matches'>does not match</Badge>}
              {r.ruleError !== null && r.ruleError !== undefined ? <span className='muted small'>{r.ruleError}</span> : null}
            </div>
          </>
          )
        : (
          <div className='cel-verdict'>
            <Badge tone='bad' testId='cel-matches'>{r.stage === 'compile' ? 'invalid expression' : 'evaluation failed: does not match'}</Badge>
            <span data-testid='cel-error'>{r.error}</span>
          </div>
          )}
      {r.jwt !== null
        ? (
          <details open>
            <summary className='small'>Decoded token <Badge tone='warn'>not verified</Badge></summary>
            <div className='two'>
              <div><span className='muted small'>header</span><Json value={r.jwt.header} /></div>
              <div><span className='muted small'>claims (<code>jwt</code>)</span><Json value={r.jwt.claims} testId='cel-claims' /></div>
            </div>
          </details>
          )
        : null}
    </div>
  )
}
