/**
 * The tracing pieces that decide without a collector: Portico's sampler (agentgateway's
 * randomSampling / clientSampling), the W3C propagation of a request's span (continued trace,
 * unsampled flag, the caller's tracestate and baggage), `http.route` templates and the query
 * redaction of span attributes.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ROOT_CONTEXT, trace, TraceFlags, SamplingDecision } from '@opentelemetry/api'
import { createRequestTracing, PorticoSampler } from '../src/trace/otel-sdk.ts'
import { httpRoute, redactQuery } from '../src/trace/otel.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const remote = (sampled: boolean) => trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE, spanId: '00f067aa0ba902b7', traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true })
const decide = (s: PorticoSampler, context = ROOT_CONTEXT) => s.shouldSample(context, TRACE).decision === SamplingDecision.RECORD_AND_SAMPLED

test('sampler: randomSampling for requests without a trace, clientSampling for the others', () => {
  assert.equal(decide(new PorticoSampler(false, true)), false)
  assert.equal(decide(new PorticoSampler(true, true)), true)
  assert.equal(decide(new PorticoSampler(false, true), remote(true)), true, 'the caller sampled it')
  assert.equal(decide(new PorticoSampler(true, true), remote(false)), false, 'the caller did not')
  assert.equal(decide(new PorticoSampler(true, false), remote(false)), true, 'clientSampling false: randomSampling decides')
  assert.equal(decide(new PorticoSampler(false, false), remote(true)), false)
  assert.equal(decide(new PorticoSampler(false, 0), remote(true)), false, 'a ratio of 0 keeps none')
  let kept = 0
  const half = new PorticoSampler(0.5, true)
  for (let i = 0; i < 2000; i++) if (decide(half)) kept++
  assert.ok(kept > 800 && kept < 1200, `${kept} of 2000 at 0.5`)
})

test('a request span continues the caller\'s trace and writes the call\'s traceparent, tracestate and baggage', async () => {
  const spans: unknown[] = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: false, clientSampling: true, resources: {}, exporter: { export: (s, cb) => { spans.push(...s); cb({ code: 0 }) }, shutdown: async () => {} } })
  const span = tracing.startRequest({ traceparent: `00-${TRACE}-00f067aa0ba902b7-00`, tracestate: 'v=1', baggage: 'user=ada' }, 'GET')
  assert.equal(span.traceId, TRACE)
  assert.equal(span.recording, false)
  assert.equal(span.child('GET', 'client', {}), null, 'no child spans of an unsampled request')
  const headers: Record<string, string> = { traceparent: 'stale', tracestate: 'stale' }
  span.inject(headers)
  assert.match(headers.traceparent!, new RegExp(`^00-${TRACE}-(?!00f067aa0ba902b7)[0-9a-f]{16}-00$`))
  assert.equal(headers.tracestate, 'v=1')
  assert.equal(headers.baggage, 'user=ada')
  // A broken traceparent starts a new trace; its tracestate is not carried over.
  const fresh = tracing.startRequest({ traceparent: 'garbage', tracestate: 'v=1' }, 'GET')
  const out: Record<string, string> = { tracestate: 'v=1' }
  fresh.inject(out)
  assert.notEqual(fresh.traceId, TRACE)
  assert.equal(out.tracestate, undefined)
  // No trace at all: a new one, flagged unsampled, with ids of its own each time.
  const seen = new Set<string>()
  for (let i = 0; i < 600; i++) {
    const own = tracing.startRequest({}, 'GET')
    const h: Record<string, string> = {}
    own.inject(h)
    assert.match(h.traceparent!, new RegExp(`^00-${own.traceId}-${own.spanId}-00$`))
    assert.match(own.traceId, /^(?!0+$)[0-9a-f]{32}$/)
    assert.match(own.spanId, /^(?!0+$)[0-9a-f]{16}$/)
    seen.add(own.traceId)
    own.end()
  }
  assert.equal(seen.size, 600, 'every request a trace id of its own')
  await tracing.shutdown()
  assert.equal(spans.length, 0)
})

test('a sampled request is decided once: its span and the children under it are all recorded', async () => {
  const spans: Array<{ name: string, parentSpanContext?: { spanId: string } }> = []
  const tracing = await createRequestTracing({ otlpEndpoint: 'http://unused:1', otlpProtocol: 'http', headers: {}, randomSampling: 0.5, clientSampling: true, resources: {}, scheduledDelayMs: 10, exporter: { export: (s, cb) => { spans.push(...s as never[]); cb({ code: 0 }) }, shutdown: async () => {} } })
  let recorded = 0
  for (let i = 0; i < 400; i++) {
    const span = tracing.startRequest({}, 'GET')
    const child = span.child('GET', 'client', {})
    assert.equal(child !== null, span.recording, 'a child exactly when the request is recorded')
    if (span.recording) recorded++
    child?.end()
    span.end()
  }
  await tracing.shutdown()
  assert.ok(recorded > 140 && recorded < 260, `${recorded} of 400 at 0.5`)
  assert.equal(spans.length, 2 * recorded, 'each recorded request exported with its child')
})

test('http.route is the route\'s template, never the request path; credential-like query values are redacted', () => {
  assert.equal(httpRoute({ kind: 'prefix', value: '/api/' }), '/api/*')
  assert.equal(httpRoute({ kind: 'prefix', value: '/' }), '/*')
  assert.equal(httpRoute({ kind: 'exact', value: '/login' }), '/login')
  assert.equal(httpRoute({ kind: 'regex', value: '/u/[0-9]+' }), undefined)
  assert.equal(httpRoute(null), undefined)
  assert.equal(redactQuery('a=1&api_key=k&Signature=s&x-amz-signature=z&access_token=t&token&b'), 'a=1&api_key=REDACTED&Signature=REDACTED&x-amz-signature=REDACTED&access_token=REDACTED&token&b')
  assert.equal(redactQuery('%74oken=secret'), '%74oken=REDACTED', 'an escaped name is decoded before it is checked')
})
