/**
 * The trace event union (src/trace/events.ts): `TraceRecorder.emit` takes only events it
 * defines — the `@ts-expect-error` lines below are compile errors, and `pnpm run typecheck`
 * fails if one of them ever compiles — and the module stays free of imports, so trace-view
 * and the web UI can take its types without loading the engine.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { TraceRecorder } from '../src/trace/recorder.ts'
import type { TraceEvent, TraceMessage } from '../src/trace/events.ts'

test('emit records typed events; a misspelt type or field does not compile', () => {
  const recorder = new TraceRecorder()
  const seen: TraceEvent[] = []
  recorder.attach(e => seen.push(e))
  recorder.emit({ type: 'routeSelection', selectedRoute: 'app', evaluatedRoutes: ['app'] })
  recorder.emit({ type: 'backendCallResult', status: null, error: 'refused' }, { severity: 'error', eventStart: 0 })
  // @ts-expect-error a field that routeSelection does not have
  recorder.emit({ type: 'routeSelection', selectedRoute: 'app', evaluatedRoute: ['app'] })
  // @ts-expect-error an event type that does not exist
  recorder.emit({ type: 'routeSelected', selectedRoute: 'app' })
  // @ts-expect-error a policy kind that does not exist
  recorder.emit({ type: 'policy', kind: 'cros', result: { type: 'apply', details: '' } })
  // @ts-expect-error a field of the wrong type
  recorder.emit({ type: 'backendCallStart', target: 8080 })
  recorder.emit({ type: 'requestFinished' })
  recorder.emit({ type: 'requestStarted' })
  assert.deepEqual(seen.map(e => e.message.type), ['routeSelection', 'backendCallResult', 'routeSelection', 'routeSelected', 'policy', 'backendCallStart', 'requestFinished'])
  assert.equal(seen[1]!.severity, 'error')
  assert.equal(seen[1]!.eventStart, 0)
})

test('narrowing by type gives the event\'s fields', () => {
  const m = { type: 'bodySnapshot', stage: 'response', body: 'aGk=', truncated: false } as TraceMessage
  if (m.type === 'bodySnapshot') assert.equal(Buffer.from(m.body, 'base64').toString(), 'hi')
  else assert.fail('not narrowed')
})

test('events.ts imports nothing (trace-view and the browser bundle load it alone)', () => {
  const text = readFileSync(new URL('../src/trace/events.ts', import.meta.url), 'utf8')
  assert.doesNotMatch(text, /^\s*(import|export\s+[^\n]*\bfrom\b)/m)
})
