import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TraceEvent } from '@portico/engine'
import { summarize, typeLabel, formatMicros } from '../src/trace/summary.ts'
import { listRow, paneSizes, windowStart } from '../src/tui/layout.ts'
import { fixtureEvents } from './fixtures.ts'

const events = fixtureEvents('get-200.jsonl')

function ev (message: TraceEvent['message'], extra: Partial<TraceEvent> = {}): TraceEvent {
  return { eventStart: null, eventEnd: 100, severity: 'info', message, ...extra }
}

test('type labels: the seven kinds of the list', () => {
  assert.deepEqual(events.map(e => typeLabel(e.message.type)), [
    'Request Start', 'Snapshot', 'Policies', 'Snapshot', 'Route', 'Policies', 'Snapshot', 'Policies', 'Snapshot',
    'Backend Start', 'Backend Result', 'Snapshot', 'Snapshot', 'Snapshot', 'Snapshot', 'Request Done'
  ])
  assert.equal(typeLabel('somethingNew'), 'somethingNew')
})

test('summaries of a real GET trace', () => {
  const s = events.map((_e, i) => summarize(events, i))
  assert.equal(s[0], 'GET /?q=1  host=example.test')
  assert.equal(s[1], 'request · initial request  GET /?q=1')
  assert.equal(s[2], 'gateway: none')
  assert.equal(s[4], 'selected app (2 evaluated)')
  assert.equal(s[5], 'route: requestHeaderModifier')
  assert.match(s[9]!, /^target=127\.0\.0\.1:\d+$/)
  assert.match(s[10]!, /^status=200  \d+\.\d\dms$/)
  assert.equal(s[11], 'response · raw response  status=200')
  assert.match(s[14]!, /^body · response  \d+(\.\d)? (B|KiB)$/)
  assert.match(s[15]!, /^status=200  \d+\.\d\dms$/)
})

test('requestStarted names the OpenTelemetry trace id when tracing is on', () => {
  const traced = [ev({ type: 'requestStarted', traceId: '4bf92f3577b34da6a3ce929d0e0e4736' }), ...events.slice(1)]
  assert.equal(summarize(traced, 0), 'GET /?q=1  host=example.test  trace=4bf92f3577b34da6a3ce929d0e0e4736')
})

test('summaries of failures: no route, a refused backend, a truncated body', () => {
  assert.equal(summarize([ev({ type: 'routeSelection', selectedRoute: null, evaluatedRoutes: ['a', 'b', 'c'] })], 0), 'no route matched (3 evaluated)')
  const refused = ev({ type: 'backendCallResult', status: null, error: 'connect ECONNREFUSED 127.0.0.1:9' }, { eventStart: 100, eventEnd: 1600, severity: 'error' })
  assert.equal(summarize([refused], 0), 'status=- error=connect ECONNREFUSED 127.0.0.1:9  1.50ms')
  const body = ev({ type: 'bodySnapshot', stage: 'final request', body: Buffer.alloc(2048).toString('base64'), truncated: true })
  assert.equal(summarize([body], 0), 'body · final request  2.0 KiB (truncated)')
  assert.equal(summarize([ev({ type: 'requestFinished' }, { eventEnd: 2_500_000 })], 0), 'no response  2.50s')
  // A type this build does not know (a newer proxy's): its fields as key=value.
  assert.equal(summarize([ev({ type: 'custom', a: 1, b: { c: 2 } } as unknown as TraceEvent['message'])], 0), 'a=1 b={"c":2}')
})

test('formatMicros', () => {
  assert.equal(formatMicros(420), '0.42ms')
  assert.equal(formatMicros(1_234_567), '1.23s')
})

test('list rows: #, Type, Summary; the selected row is marked', () => {
  assert.equal(listRow(events, 4, false), '   5  Route           selected app (2 evaluated)')
  assert.equal(listRow(events, 4, true), '›  5  Route           selected app (2 evaluated)')
})

test('pane sizes fit the terminal; the list window keeps the selection in view', () => {
  assert.deepEqual(paneSizes(50, 16), { listRows: 16, detailRows: 25 })
  assert.deepEqual(paneSizes(24, 16), { listRows: 6, detailRows: 9 })
  assert.deepEqual(paneSizes(24, 0), { listRows: 1, detailRows: 14 })
  assert.equal(windowStart(16, 6, 0), 0)
  assert.equal(windowStart(16, 6, 10), 7)
  assert.equal(windowStart(16, 6, 15), 10)
  assert.equal(windowStart(4, 6, 3), 0)
})

test('an inference pick and a model selection read as sentences', () => {
  const where = 'pool=llama picker=10.0.0.20:9002'
  assert.equal(typeLabel('inferencePick'), 'Inference Pick')
  assert.equal(summarize([ev({ type: 'inferencePick', pool: 'llama', picker: '10.0.0.20:9002', outcome: 'picked', endpoint: '10.0.0.11:8000', endpoints: ['10.0.0.11:8000', '10.0.0.12:8000'], source: 'header', latencyMs: 1.234, refused: ['10.9.9.9:80'] })], 0),
    `picked 10.0.0.11:8000 (then 10.0.0.12:8000)  ${where}  1.23ms  refused=10.9.9.9:80`)
  assert.equal(summarize([ev({ type: 'inferencePick', pool: 'llama', picker: '10.0.0.20:9002', outcome: 'fallback', from: '10.0.0.11:8000', endpoint: '10.0.0.12:8000', reason: 'ECONNREFUSED' })], 0),
    `fallback 10.0.0.11:8000 → 10.0.0.12:8000: ECONNREFUSED  ${where}`)
  assert.equal(summarize([ev({ type: 'inferencePick', pool: 'llama', picker: '10.0.0.20:9002', outcome: 'failClose', reason: 'timeout', latencyMs: 10 })], 0),
    `picker failed, 503: timeout  ${where}  10.00ms`)
  assert.equal(summarize([ev({ type: 'inferencePick', pool: 'llama', picker: '10.0.0.20:9002', outcome: 'immediate', status: 429 })], 0), `picker answered status=429  ${where}`)
  assert.equal(typeLabel('modelSelection'), 'Model')
  assert.equal(summarize([ev({ type: 'modelSelection', requestModel: 'smart', matched: 'smart', model: 'llama-3', why: ['smart: weight 3 of 4'] })], 0), 'smart → llama-3  smart: weight 3 of 4')
})
