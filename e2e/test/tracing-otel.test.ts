/**
 * OpenTelemetry tracing against a real OpenTelemetry Collector (OTLP receiver, file
 * exporter; scripts/test-tools builds it): the server span continues the caller's W3C trace,
 * the backend gets the call span's traceparent (and the caller's baggage), child spans have
 * the request's span as parent — the backend call, ext_authz, an MCP tool call to a target,
 * an LLM call with GenAI attributes — the access log and the debug trace carry the trace id,
 * and sampling follows randomSampling / clientSampling, over OTLP/gRPC and OTLP/HTTP.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { ConfigFile } from '@portico/engine'
import { freePort, gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { findTool } from '@portico/testkit/tools'
import { startLlmServer, type LlmServer } from '../lib/llm.ts'
import { connectClient, startSdkServer, textOf, type SdkServer } from '../lib/mcp.ts'
import { OK, startAuthzServer, type AuthzServer } from '../lib/ext-authz.ts'
import { startCollector, type CollectedSpan, type Collector } from '../lib/otel-collector.ts'
import { startIdp, type Idp } from '../lib/idp.ts'
import { startExtProcServer, type ExtProcServer } from '../lib/ext-proc.ts'
import { startRecordingRateLimitService, type RecordingRateLimitService } from '../lib/ratelimit.ts'

// Missing in CI is a failure; missing locally skips these tests with the reason.
const OTELCOL = findTool('OTELCOL', 'otelcol')
if (OTELCOL === null && process.env.CI === 'true') throw new Error('otelcol not found: run ./scripts/test (it builds it) or set OTELCOL')
const skip = OTELCOL === null ? 'otelcol not found: run ./scripts/test-tools (it builds it) or set OTELCOL' : false

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'
const SERVER = 2
const CLIENT = 3

/** A fresh W3C trace id (32 hex digits). */
function traceId (): string {
  return [...crypto.getRandomValues(new Uint8Array(16))].map(b => b.toString(16).padStart(2, '0')).join('')
}

function parseTraceparent (value: unknown): { traceId: string, parentId: string, flags: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(value))
  assert.ok(m !== null, `not a traceparent: ${String(value)}`)
  return { traceId: m[1]!, parentId: m[2]!, flags: m[3]! }
}

describe('OpenTelemetry tracing', { skip }, () => {
  let collector: Collector
  let echo: Backend
  let llm: LlmServer
  let mcp: SdkServer
  let authz: AuthzServer
  let idp: Idp
  let processor: ExtProcServer
  let limiter: RecordingRateLimitService
  let authzHttp: Backend
  let portico: PorticoProcess
  let admin: string
  let stats: string
  const alice = { id: 'alice', secret: 'alice-secret-123', permissions: [] }

  before(async () => {
    collector = await startCollector(OTELCOL!)
    echo = await startEchoBackend('echo')
    llm = await startLlmServer({ reply: 'one two three' })
    mcp = await startSdkServer('tools')
    authz = await startAuthzServer(() => OK)
    idp = await startIdp({ clients: [alice] })
    processor = await startExtProcServer()
    limiter = await startRecordingRateLimitService()
    authzHttp = await startEchoBackend('authz-http')
    const adminPort = await freePort()
    admin = `http://127.0.0.1:${adminPort}`
    const statsPort = await freePort()
    stats = `http://127.0.0.1:${statsPort}`
    const deadPort = await freePort()
    portico = await startPortico({
      // OpenTelemetry's batch delay variables, shortened: spans and log records leave in ~0.1 s.
      env: { LOG_LEVEL: 'info', ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_BLRP_SCHEDULE_DELAY: '100' },
      config: (port): ConfigFile => ({
        config: {
          tracing: {
            otlpEndpoint: collector.grpcEndpoint,
            randomSampling: true,
            resources: { 'deployment.environment.name': 'e2e' },
            // Server-span attributes from CEL, and a built-in one left out.
            fields: { add: { 'app.path': 'request.path', 'app.status_class': 'string(response.code / 100) + "xx"', 'app.tool': 'mcp.tool.name' }, remove: ['user_agent.original'] }
          },
          // The access log too, as OTLP log records (over OTLP/HTTP), with a CEL field.
          accessLog: { fields: { add: { tool: 'mcp.tool.name' } }, otlp: { otlpEndpoint: collector.httpEndpoint, otlpProtocol: 'http' } }
        },
        gateways: { default: gateway(port) },
        routes: [
          { name: 'echo', matches: [{ path: { pathPrefix: '/echo' } }], backends: [{ host: echo.host }] },
          { name: 'jwt', matches: [{ path: { pathPrefix: '/jwt' } }], policies: { jwtAuth: { mode: 'strict', issuer: idp.issuer, audiences: [idp.audience], jwks: { url: idp.jwksUrl } } }, backends: [{ host: echo.host }] },
          { name: 'processed', matches: [{ path: { pathPrefix: '/processed' } }], policies: { extProc: { host: processor.host, processingMode: { responseHeaderMode: 'skip' } } }, backends: [{ host: echo.host }] },
          // A rate limit service that is not there, failing open: the request goes on, its span says why.
          { name: 'limited', matches: [{ path: { pathPrefix: '/limited' } }], policies: { remoteRateLimit: { host: `http://127.0.0.1:${deadPort}`, domain: 'portico', descriptors: [{ entries: [{ key: 'route', value: '"limited"' }] }], failureMode: 'failOpen', timeout: '500ms' } }, backends: [{ host: echo.host }] },
          { name: 'counted', matches: [{ path: { pathPrefix: '/counted' } }], policies: { remoteRateLimit: { host: `http://${limiter.host}`, domain: 'portico', descriptors: [{ entries: [{ key: 'route', value: '"counted"' }] }], timeout: '2s' } }, backends: [{ host: echo.host }] },
          { name: 'authz-http', matches: [{ path: { pathPrefix: '/http-authz' } }], policies: { extAuthz: { host: `http://${authzHttp.host}`, protocol: { http: {} } } }, backends: [{ host: echo.host }] },
          { name: 'authz', matches: [{ path: { pathPrefix: '/authz' } }], policies: { extAuthz: { host: `http://${authz.host}`, protocol: { grpc: {} } } }, backends: [{ host: echo.host }] },
          { name: 'chat', matches: [{ path: { pathPrefix: '/openai' } }], backends: [{ ai: { name: 'local-llm', provider: { openAI: {} }, hostOverride: llm.host } }] },
          { name: 'tools', matches: [{ path: { pathPrefix: '/mcp' } }], backends: [{ mcp: { targets: [{ name: 'tools', mcp: { host: mcp.url } }] } }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await Promise.all([echo?.close(), llm?.close(), mcp?.close(), authz?.close(), idp?.stop(), processor?.close(), limiter?.close(), authzHttp?.close()])
    await collector?.close()
  })

  const spansOf = async (trace: string, count: number): Promise<CollectedSpan[]> =>
    (await collector.waitForSpans(all => all.filter(s => s.traceId === trace).length >= count)).filter(s => s.traceId === trace)

  test('the server span continues the caller\'s trace; the backend gets the call span\'s traceparent and the baggage', async () => {
    const res = await fetch(`${portico.url}/echo/a?token=secret&x=1`, { headers: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: 'vendor=abc', baggage: 'user=ada' } })
    assert.equal(res.status, 200)
    const got = await res.json() as { headers: Record<string, string> }
    const sent = parseTraceparent(got.headers.traceparent)
    assert.equal(sent.traceId, TRACE_ID)
    assert.equal(sent.flags, '01')
    assert.equal(got.headers.tracestate, 'vendor=abc')
    assert.equal(got.headers.baggage, 'user=ada')

    const spans = await spansOf(TRACE_ID, 2)
    const server = spans.find(s => s.kind === SERVER)!
    const call = spans.find(s => s.kind === CLIENT)!
    assert.ok(server !== undefined && call !== undefined, JSON.stringify(spans))
    assert.equal(server.parentSpanId, CALLER_SPAN, 'the server span is the caller\'s child')
    assert.equal(call.parentSpanId, server.spanId, 'the backend call is the server span\'s child')
    assert.equal(sent.parentId, call.spanId, 'the backend sees the call span as its parent')
    assert.equal(server.name, 'GET /echo/*')
    assert.equal(server.attributes['http.request.method'], 'GET')
    assert.equal(server.attributes['http.route'], '/echo/*')
    assert.equal(server.attributes['url.path'], '/echo/a')
    assert.equal(server.attributes['url.query'], 'token=REDACTED&x=1', 'credential-like query values never leave in a span')
    assert.equal(server.attributes['http.response.status_code'], 200)
    assert.equal(server.attributes['portico.route'], 'echo')
    // config.tracing.fields: added with CEL, removed; an expression that fails (no MCP call here) is left out.
    assert.equal(server.attributes['app.path'], '/echo/a')
    assert.equal(server.attributes['app.status_class'], '2xx')
    assert.ok(!('app.tool' in server.attributes))
    assert.ok(!('user_agent.original' in server.attributes), 'removed by tracing.fields.remove')
    assert.equal(call.name, 'GET')
    assert.equal(call.attributes['http.response.status_code'], 200)
    assert.equal(call.attributes['server.address'], '127.0.0.1')
    assert.equal(server.resource['service.name'], 'portico')
    assert.equal(server.resource['deployment.environment.name'], 'e2e')

    // The access log line joins the trace.
    await portico.waitForOutput(new RegExp(`"traceId":"${TRACE_ID}"`))
  })

  test('portico_tracing_spans_total counts the spans the collector took', async () => {
    const res = await fetch(`${portico.url}/echo/counted`)
    const sent = parseTraceparent((await res.json() as { headers: Record<string, string> }).headers.traceparent)
    await spansOf(sent.traceId, 2)
    let exported = 0
    for (let i = 0; i < 100 && exported < 2; i++) {
      const text = await (await fetch(`${stats}/metrics`)).text()
      exported = Number(/^portico_tracing_spans_total\{result="exported"\} (\d+)$/m.exec(text)?.[1] ?? 0)
      if (exported < 2) await new Promise(resolve => setTimeout(resolve, 50))
    }
    assert.ok(exported >= 2, `exported ${exported}`)
  })

  test('a request without a trace starts one (randomSampling true); the debug trace\'s requestStarted carries its id', async () => {
    const watch = await openTrace(admin, 'path=/echo/debug')
    await watch.ready
    const res = await fetch(`${portico.url}/echo/debug`)
    const got = await res.json() as { headers: Record<string, string> }
    const sent = parseTraceparent(got.headers.traceparent)
    assert.equal(sent.flags, '01')
    const spans = await spansOf(sent.traceId, 2)
    const server = spans.find(s => s.kind === SERVER)!
    assert.equal(server.parentSpanId, '', 'a new trace: the server span is its root')
    // The access line reaches stdout at the next batched write (at most 250 ms after).
    await portico.waitForOutput(sent.traceId, { timeoutMs: 5000 })
    const line = portico.logs().find(l => l.msg === 'request' && l.path === '/echo/debug')
    assert.equal(line?.traceId, sent.traceId)
    const events = await watch.done
    const started = events.find(e => e.message.type === 'requestStarted')
    assert.equal(started?.message.traceId, sent.traceId)
  })

  test('ext_authz: the Check call is a client span of the request', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/authz/x`, { headers: { traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200)
    const spans = await spansOf(trace, 3)
    const server = spans.find(s => s.kind === SERVER)!
    const check = spans.find(s => s.name === 'envoy.service.auth.v3.Authorization/Check')
    assert.ok(check !== undefined, JSON.stringify(spans.map(s => s.name)))
    assert.equal(check.kind, CLIENT)
    assert.equal(check.parentSpanId, server.spanId)
    assert.equal(check.attributes['rpc.system'], 'grpc')
    assert.equal(check.attributes['rpc.method'], 'Check')
    assert.equal(check.attributes['portico.decision'], 'allow')
    // The service got the Check span's context as gRPC metadata: its spans join the trace under it.
    const sent = parseTraceparent(authz.calls.at(-1)!.metadata.traceparent)
    assert.equal(sent.traceId, trace)
    assert.equal(sent.parentId, check.spanId)
  })

  test('ext_authz over HTTP: the service gets the check span\'s traceparent, not the caller\'s', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/http-authz/x`, { headers: { traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200)
    const spans = await spansOf(trace, 3)
    const check = spans.find(s => s.attributes['portico.policy'] === 'extAuthz')
    assert.ok(check !== undefined, JSON.stringify(spans.map(s => s.name)))
    const sent = parseTraceparent(authzHttp.requests.at(-1)!.headers.traceparent)
    assert.equal(sent.traceId, trace)
    assert.equal(sent.parentId, check.spanId)
  })

  test('remote rate limit: the service gets the ShouldRateLimit span\'s trace context as gRPC metadata', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/counted/x`, { headers: { traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200)
    const spans = await spansOf(trace, 3)
    const call = spans.find(s => s.name === 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit')
    assert.ok(call !== undefined, JSON.stringify(spans.map(s => s.name)))
    assert.equal(call.attributes['portico.decision'], 'ok')
    const sent = parseTraceparent(limiter.calls.at(-1)!.metadata.traceparent)
    assert.equal(sent.traceId, trace)
    assert.equal(sent.parentId, call.spanId)
    assert.equal(sent.flags, '01')
  })

  test('remote rate limit: the ShouldRateLimit call is a client span, failed when the service is down', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/limited/x`, { headers: { traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200, 'failureMode failOpen')
    const spans = await spansOf(trace, 3)
    const server = spans.find(s => s.kind === SERVER)!
    const call = spans.find(s => s.name === 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit')
    assert.ok(call !== undefined, JSON.stringify(spans.map(s => s.name)))
    assert.equal(call.parentSpanId, server.spanId)
    assert.equal(call.attributes['portico.decision'], 'error')
    assert.equal(call.attributes['error.type'], 'error')
    assert.equal(call.status.code, 2, 'ERROR status')
  })

  test('ext_proc: each message exchanged on the stream is a client span, named for its phase', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/processed/x`, { headers: { traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200)
    const spans = await spansOf(trace, 3)
    const server = spans.find(s => s.kind === SERVER)!
    const exchange = spans.find(s => s.name === 'envoy.service.ext_proc.v3.ExternalProcessor/Process request_headers')
    assert.ok(exchange !== undefined, JSON.stringify(spans.map(s => s.name)))
    assert.equal(exchange.parentSpanId, server.spanId)
    assert.equal(exchange.attributes['rpc.service'], 'envoy.service.ext_proc.v3.ExternalProcessor')
    assert.equal(exchange.attributes['portico.decision'], 'response')
    // The stream was opened with its first exchange's trace context as gRPC metadata.
    const sent = parseTraceparent(processor.metadata.at(-1)!.traceparent)
    assert.equal(sent.traceId, trace)
    assert.equal(sent.parentId, exchange.spanId)
  })

  test('the JWKS fetch a request waited for is a client span of it', async () => {
    const token = await idp.token(alice)
    const trace = traceId()
    const res = await fetch(`${portico.url}/jwt/x`, { headers: { authorization: `Bearer ${token}`, traceparent: `00-${trace}-${CALLER_SPAN}-01` } })
    assert.equal(res.status, 200)
    const spans = await spansOf(trace, 3)
    const server = spans.find(s => s.kind === SERVER)!
    const jwks = spans.find(s => s.attributes['portico.jwks.issuer'] !== undefined)
    assert.ok(jwks !== undefined, JSON.stringify(spans.map(s => [s.name, s.attributes])))
    assert.equal(jwks.kind, CLIENT)
    assert.equal(jwks.name, 'GET')
    assert.equal(jwks.parentSpanId, server.spanId)
    assert.equal(jwks.attributes['url.full'], idp.jwksUrl)
    assert.equal(jwks.attributes['http.response.status_code'], 200)
  })

  test('an LLM call is a GenAI client span: operation, provider, models and tokens', async () => {
    const trace = traceId()
    const res = await fetch(`${portico.url}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${CALLER_SPAN}-01` },
      body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'count to three' }] })
    })
    assert.equal(res.status, 200)
    await res.text()
    assert.equal(parseTraceparent(llm.headers.at(-1)!.traceparent).traceId, trace)
    const spans = await spansOf(trace, 2)
    const server = spans.find(s => s.kind === SERVER)!
    const chat = spans.find(s => s.kind === CLIENT)!
    assert.equal(chat.name, 'chat gpt-test')
    assert.equal(chat.parentSpanId, server.spanId)
    assert.equal(chat.attributes['gen_ai.operation.name'], 'chat')
    assert.equal(chat.attributes['gen_ai.provider.name'], 'openai')
    assert.equal(chat.attributes['gen_ai.request.model'], 'gpt-test')
    assert.equal(chat.attributes['gen_ai.response.model'], 'gpt-test-2024')
    assert.equal(chat.attributes['gen_ai.usage.input_tokens'], 3)
    assert.equal(chat.attributes['gen_ai.usage.output_tokens'], 3)
  })

  test('an MCP tool call to a target is a client span: method, tool, target session', async () => {
    const { client } = await connectClient(`${portico.url}/mcp`)
    try {
      const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })
      assert.equal(textOf(result), '5')
    } finally {
      await client.close()
    }
    const spans = await collector.waitForSpans(all => all.some(s => s.name === 'tools/call add'))
    const call = spans.find(s => s.name === 'tools/call add')!
    assert.equal(call.kind, CLIENT)
    assert.equal(call.attributes['mcp.method.name'], 'tools/call')
    assert.equal(call.attributes['gen_ai.tool.name'], 'add')
    assert.equal(call.attributes['gen_ai.operation.name'], 'execute_tool')
    assert.equal(call.attributes['portico.mcp.target'], 'tools')
    assert.equal(typeof call.attributes['mcp.session.id'], 'string')
    assert.ok(String(call.attributes['mcp.session.id']).length > 0)
    assert.equal(call.attributes['network.transport'], 'tcp')
    // The target gets the call span as the parent, in params._meta (MCP's trace context).
    const meta = mcp.toolCallMeta.at(-1)!
    const sent = parseTraceparent(meta.traceparent)
    assert.equal(sent.traceId, call.traceId)
    assert.equal(sent.parentId, call.spanId)
    const server = spans.find(s => s.spanId === call.parentSpanId)
    assert.ok(server !== undefined, 'the tool call\'s parent is the request\'s server span')
    assert.equal(server.kind, SERVER)
    assert.equal(server.attributes['mcp.method.name'], 'tools/call')
    assert.equal(server.attributes['gen_ai.tool.name'], 'add')
    assert.equal(server.attributes['app.tool'], 'add', 'a tracing.fields attribute over the mcp variable')

    // The access-log line of that request, with its CEL field, as a log record of the same trace.
    const logs = await collector.waitForLogs(all => all.some(l => l.attributes.tool === 'add'))
    const record = logs.find(l => l.attributes.tool === 'add')!
    assert.equal(record.body, 'request')
    assert.equal(record.traceId, call.traceId)
    assert.equal(record.spanId, server.spanId, 'the record\'s span is the request\'s server span')
    assert.equal(record.severityText, 'INFO')
    assert.equal(record.severityNumber, 9)
    assert.equal(record.scope, 'portico.access')
    const at = Number(BigInt(record.timeUnixNano) / 1_000_000n)
    assert.ok(Math.abs(at - Date.now()) < 60_000, `the record's time is now (${record.timeUnixNano})`)
    assert.equal(record.attributes['mcp.method'], 'tools/call')
    assert.equal(record.resource['service.name'], 'portico')
    await portico.waitForOutput(call.traceId, { timeoutMs: 5000 })
    assert.ok(portico.logs().some(l => l.msg === 'request' && l.tool === 'add' && l.traceId === call.traceId))
  })
})

describe('OpenTelemetry sampling over OTLP/HTTP', { skip }, () => {
  let collector: Collector
  let echo: Backend
  let portico: PorticoProcess
  let internalPort: number
  let mutedPort: number

  before(async () => {
    collector = await startCollector(OTELCOL!)
    echo = await startEchoBackend('echo')
    internalPort = await freePort()
    mutedPort = await freePort()
    portico = await startPortico({
      env: { LOG_LEVEL: 'info', OTEL_BSP_SCHEDULE_DELAY: '100' },
      config: (port): ConfigFile => ({
        // agentgateway's defaults: randomSampling false, clientSampling true.
        config: { tracing: { otlpEndpoint: collector.httpEndpoint, otlpProtocol: 'http', headers: { 'x-tenant': 'e2e' } } },
        gateways: {
          default: gateway(port),
          // A gateway's own sampling over the global one: every request of an internal
          // listener; none of a muted one, whatever the caller sampled.
          internal: { ...gateway(internalPort), tracing: { randomSampling: true } },
          muted: { ...gateway(mutedPort), tracing: { clientSampling: false } }
        },
        routes: [{ name: 'echo', gateways: ['default', 'internal', 'muted'], backends: [{ host: echo.host }] }]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    await echo?.close()
    await collector?.close()
  })

  test('only the caller\'s sampled traces are recorded; every request still propagates a trace id', async () => {
    const sampled = traceId()
    const unsampled = traceId()
    const none = await (await fetch(`${portico.url}/a`)).json() as { headers: Record<string, string> }
    const dropped = await (await fetch(`${portico.url}/b`, { headers: { traceparent: `00-${unsampled}-${CALLER_SPAN}-00` } })).json() as { headers: Record<string, string> }
    const kept = await (await fetch(`${portico.url}/c`, { headers: { traceparent: `00-${sampled}-${CALLER_SPAN}-01` } })).json() as { headers: Record<string, string> }

    // Not sampled: the backend still gets a traceparent (flags 00), so it does not start a trace of its own.
    const fresh = parseTraceparent(none.headers.traceparent)
    assert.equal(fresh.flags, '00')
    const continued = parseTraceparent(dropped.headers.traceparent)
    assert.equal(continued.traceId, unsampled)
    assert.equal(continued.flags, '00')
    assert.equal(parseTraceparent(kept.headers.traceparent).flags, '01')

    const spans = await collector.waitForSpans(all => all.some(s => s.traceId === sampled && s.kind === CLIENT))
    // A later batch could still bring the others: wait past one export interval.
    await new Promise(resolve => setTimeout(resolve, 1500))
    const ids = new Set(collector.spans().map(s => s.traceId))
    assert.ok(ids.has(sampled))
    assert.ok(!ids.has(unsampled), 'a trace the caller did not sample is not exported')
    assert.ok(!ids.has(fresh.traceId), 'randomSampling false: a request without a trace is not exported')
    assert.ok(spans.length >= 2)
    // Unsampled requests still log their trace id.
    await portico.waitForOutput(unsampled, { timeoutMs: 5000 })
    assert.ok(portico.logs().some(l => l.msg === 'request' && l.traceId === unsampled))
  })

  test('a gateway\'s tracing sampling wins over the global one for its requests', async () => {
    const base = (port: number) => `http://127.0.0.1:${port}`
    const internal = await (await fetch(`${base(internalPort)}/i`)).json() as { headers: Record<string, string> }
    const callerSampled = traceId()
    const muted = await (await fetch(`${base(mutedPort)}/m`, { headers: { traceparent: `00-${callerSampled}-${CALLER_SPAN}-01` } })).json() as { headers: Record<string, string> }
    const fresh = parseTraceparent(internal.headers.traceparent)
    assert.equal(fresh.flags, '01', 'randomSampling true on the internal gateway (false globally)')
    const kept = parseTraceparent(muted.headers.traceparent)
    assert.equal(kept.traceId, callerSampled, 'the trace still goes on')
    assert.equal(kept.flags, '00', 'clientSampling false on the muted gateway: the caller\'s flag is not followed')
    await collector.waitForSpans(all => all.some(s => s.traceId === fresh.traceId && s.kind === SERVER))
    await new Promise(resolve => setTimeout(resolve, 1500))
    assert.ok(!collector.spans().some(s => s.traceId === callerSampled), 'nothing exported for the muted gateway\'s request')
  })
})
