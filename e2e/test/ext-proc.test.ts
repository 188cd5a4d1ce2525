/**
 * extProc against a real gRPC external processing server (Envoy's ExternalProcessor/Process
 * with the repository's protos, @grpc/grpc-js) in front of a real backend: header mutations
 * on the request and the response, body replacement both ways (content-length fixed), a
 * body added at the headers (CONTINUE_AND_REPLACE), immediate responses, a processor that
 * hangs (on the request or the response), errors, ends the stream, or is down — failClosed
 * 500 and failOpen through — bodies over the limit, the trace and config errors. The
 * response phase runs on every answer, as Envoy runs ext_proc on local replies: a
 * directResponse, a redirect, a 503 when the backend is down, a 404 with no route (the
 * gateway's extProc), and MCP answers (JSON and an SSE stream) — and a response body mode
 * on an MCP route is refused at load.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import * as grpc from '@grpc/grpc-js'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, sha256, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { answer, headersOf, phaseOf, startExtProcServer, type ExtProcServer, type ProcessingReply, type ProcessingRequest } from '../lib/ext-proc.ts'
import { startSdkServer, type SdkServer } from '../lib/mcp.ts'

let backend: Backend
let processor: ExtProcServer
let portico: PorticoProcess
let admin: string
let sdk: SdkServer
let edge: string

const set = (key: string, value: string, appendAction = 2) => ({ header: { key, raw_value: Buffer.from(value) }, append_action: appendAction })
/** Neither `append` nor `append_action` (as the reference endpoint picker sends its headers): replaces, as Envoy's ext_proc does. */
const plain = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) } })
/** The deprecated `append: true`: appends. */
const appended = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) }, append: { value: true } })

/** The processor's behaviour, by the request path (from the stream's first message). */
function behave (m: ProcessingRequest, stream: ProcessingRequest[]): ProcessingReply {
  const path = headersOf(stream[0]!.request_headers?.headers)[':path'] ?? ''
  const phase = phaseOf(m)
  const prefix = path.split('/')[1]
  switch (prefix) {
    case 'headers':
      if (phase === 'request_headers') return answer(phase, { header_mutation: { set_headers: [set('x-added', 'yes'), appended('x-multi', 'b'), plain('x-client', 'replaced')], remove_headers: ['x-remove-me'] } })
      return answer(phase, { header_mutation: { set_headers: [set('x-resp', 'processed'), set(':status', '203')], remove_headers: ['x-drop'] } })
    case 'bodies':
      if (phase === 'request_body') return answer(phase, { body_mutation: { body: Buffer.from(`REPLACED:${m.request_body!.body!.toString('utf8').toUpperCase()}`) } })
      if (phase === 'response_body') return answer(phase, { header_mutation: { set_headers: [set('x-body-seen', String(m.response_body!.body!.length))] }, body_mutation: { body: Buffer.from('a new response body') } })
      return answer(phase)
    case 'clear':
      if (phase === 'response_body') return answer(phase, { body_mutation: { clear_body: true } })
      return answer(phase)
    case 'add-body':
      if (phase === 'request_headers') return answer(phase, { status: 1, header_mutation: { set_headers: [set('content-type', 'text/plain')] }, body_mutation: { body: Buffer.from('added by the processor') } })
      return answer(phase)
    case 'immediate':
      return { immediate_response: { status: { code: 403 }, headers: { set_headers: [set('x-why', 'blocked')] }, body: Buffer.from('go away'), details: 'policy' } }
    case 'resp-immediate':
      if (phase === 'response_headers') return { immediate_response: { status: { code: 502 }, body: Buffer.from('backend answer refused') } }
      return answer(phase)
    case 'hang-closed':
    case 'hang-open':
      return 'hang'
    case 'resp-hang':
      return phase === 'response_headers' ? 'hang' : answer(phase)
    case 'local':
    case 'redirect':
    case 'dead-backend':
    case 'nothing':
    case 'mcp-ext':
    case 'dead.Svc':
      // What the processor saw of each answer comes back in a header the client sees.
      if (phase === 'response_headers') return answer(phase, { header_mutation: { set_headers: [set('x-processed', `status ${headersOf(m.response_headers!.headers)[':status']}`)] } })
      return answer(phase)
    case 'local-body':
      if (phase === 'response_body') return answer(phase, { body_mutation: { body: Buffer.from(`processed: ${m.response_body!.body!.toString('utf8')}`) } })
      return answer(phase)
    case 'local-immediate':
      if (phase === 'response_headers') return { immediate_response: { status: { code: 418 }, body: Buffer.from('the processor answers instead') } }
      return answer(phase)
    case 'error':
      return 'error'
    case 'close':
      return 'close'
    default:
      return answer(phase)
  }
}

before(async () => {
  backend = await startEchoBackend('app', { 'x-drop': 'me' })
  processor = await startExtProcServer(behave)
  sdk = await startSdkServer('sdk')
  const deadPort = await freePort()
  const adminPort = await freePort()
  const edgePort = await freePort()
  edge = `http://127.0.0.1:${edgePort}`
  admin = `http://127.0.0.1:${adminPort}`
  const ep = (extra: Record<string, unknown> = {}) => ({ host: processor.host, timeout: '2s', ...extra })
  const route = (name: string, extProc: Record<string, unknown>) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], policies: { extProc } as never, backends: [{ host: backend.host }] })
  const buffered = { requestBodyMode: 'buffered', responseBodyMode: 'buffered' }
  const local = (name: string, policies: Record<string, unknown>, extProc: Record<string, unknown> = ep()) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], policies: { extProc, ...policies } as never, backends: [{ host: backend.host }] })
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: {
        default: { port, address: '127.0.0.1' },
        // The gateway's own extProc: it sees the 404 of a request no route takes.
        edge: { port: edgePort, address: '127.0.0.1', policies: { extProc: ep() } as never }
      },
      routes: [
        local('local', { directResponse: { status: 200, body: 'from the gateway', headers: { 'x-local': 'yes' } } }),
        local('local-body', { directResponse: { status: 201, body: 'local body' } }, ep({ processingMode: { responseBodyMode: 'buffered' } })),
        local('local-immediate', { directResponse: { status: 200, body: 'never sent' } }),
        local('redirect', { requestRedirect: { hostname: 'example.com', status: 301 } }),
        { name: 'dead-backend', matches: [{ path: { pathPrefix: '/dead-backend' } }], policies: { extProc: ep() } as never, backends: [{ host: `127.0.0.1:${deadPort}` }] },
        { name: 'dead-grpc', matches: [{ path: { pathPrefix: '/dead.Svc' } }], policies: { extProc: ep() } as never, backends: [{ host: `127.0.0.1:${deadPort}` }] },
        { name: 'mcp-ext', matches: [{ path: { pathPrefix: '/mcp-ext' } }], policies: { extProc: ep() } as never, backends: [{ mcp: { targets: [{ name: 'sdk', mcp: { host: sdk.url } }] } as never }] },
        { name: 'edge-only', gateways: ['edge'], matches: [{ path: { pathPrefix: '/edge-only' } }], backends: [{ host: backend.host }] },
        route('headers', ep()),
        route('bodies', ep({ processingMode: buffered, maxBodyBytes: 4096 })),
        route('clear', ep({ processingMode: { responseBodyMode: 'buffered' } })),
        route('add-body', ep()),
        route('immediate', ep()),
        route('resp-immediate', ep()),
        route('hang-closed', ep({ timeout: '300ms' })),
        route('hang-open', ep({ timeout: '300ms', failureMode: 'failOpen' })),
        route('resp-hang', ep({ timeout: '300ms' })),
        route('error', ep()),
        route('close', ep()),
        route('down-closed', { host: `127.0.0.1:${deadPort}` }),
        route('down-open', { host: `127.0.0.1:${deadPort}`, failureMode: 'failOpen' }),
        { name: 'backend-level', matches: [{ path: { pathPrefix: '/backend-level' } }], backends: [{ host: backend.host, policies: { extProc: { host: processor.host, processingMode: { responseHeaderMode: 'skip' } } } }] }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await processor?.close()
  await backend?.close()
  await sdk?.close()
})

async function send (path: string, options: { method?: string, headers?: Record<string, string | string[]>, body?: string | Buffer } = {}) {
  const res = await request(`${portico.url}${path}`, { method: (options.method ?? 'GET') as 'GET', headers: options.headers, body: options.body })
  const raw = Buffer.from(await res.body.arrayBuffer())
  const text = raw.toString('utf8')
  let echo: EchoedRequest | null = null
  try {
    echo = res.headers['x-backend'] !== undefined ? JSON.parse(text) as EchoedRequest : null
  } catch {}
  return { status: res.statusCode, headers: res.headers, text, raw, echo }
}

/** The messages of the stream whose request path is `path`. */
function streamFor (path: string): ProcessingRequest[] {
  const s = processor.streams.find(st => headersOf(st[0]?.request_headers?.headers)[':path'] === path)
  assert.ok(s !== undefined, `no stream for ${path}`)
  return s
}

test('headers: the processor sets and removes request and response headers, and changes the status', async () => {
  const r = await send('/headers/a?q=1', { headers: { 'x-remove-me': 'secret', 'x-multi': 'a', 'x-client': 'c' } })
  assert.equal(r.status, 203)
  assert.equal(r.headers['x-resp'], 'processed')
  assert.equal(r.headers['x-drop'], undefined)
  assert.equal(r.echo!.headers['x-added'], 'yes')
  assert.equal(r.echo!.headers['x-multi'], 'a,b', 'append: true appends')
  assert.equal(r.echo!.headers['x-remove-me'], undefined)
  assert.equal(r.echo!.headers['x-client'], 'replaced', 'neither append nor append_action: replaced (Envoy ext_proc\'s default), not \'c,replaced\'')
  const s = streamFor('/headers/a?q=1')
  assert.deepEqual(s.map(phaseOf), ['request_headers', 'response_headers'])
  const reqHeaders = headersOf(s[0]!.request_headers!.headers)
  assert.equal(reqHeaders[':method'], 'GET')
  assert.equal(reqHeaders[':scheme'], 'http')
  assert.equal(reqHeaders[':authority'], `127.0.0.1:${portico.port}`)
  assert.equal(reqHeaders['x-remove-me'], 'secret')
  assert.equal(s[0]!.request_headers!.end_of_stream, true, 'a GET without a body ends the stream at the headers')
  assert.equal(s[0]!.protocol_config?.request_body_mode ?? 0, 0, 'request body mode NONE')
  assert.equal(s[0]!.protocol_config?.response_body_mode ?? 0, 0, 'response body mode NONE')
  assert.equal(s[1]!.protocol_config, undefined, 'protocol_config only in the first message')
  const respHeaders = headersOf(s[1]!.response_headers!.headers)
  assert.equal(respHeaders[':status'], '200')
  assert.equal(respHeaders['x-drop'], 'me')
  assert.equal(respHeaders['x-backend'], 'app')
})

test('bodies: request and response bodies replaced, content-length fixed both ways', async () => {
  const r = await send('/bodies', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello world' })
  assert.equal(r.status, 200)
  assert.equal(r.text, 'a new response body')
  assert.equal(r.headers['content-length'], String(Buffer.byteLength('a new response body')))
  const s = streamFor('/bodies')
  assert.deepEqual(s.map(phaseOf), ['request_headers', 'request_body', 'response_headers', 'response_body'])
  assert.equal(s[0]!.request_headers!.end_of_stream, false)
  assert.deepEqual(s[0]!.protocol_config, { request_body_mode: 2, response_body_mode: 2 })
  assert.equal(s[1]!.request_body!.body!.toString('utf8'), 'hello world')
  assert.equal(s[1]!.request_body!.end_of_stream, true)
  // The backend got the replaced body with a matching content-length (its echo is what the processor saw).
  const echoed = JSON.parse(s[3]!.response_body!.body!.toString('utf8')) as EchoedRequest
  assert.equal(echoed.bodySha256, sha256('REPLACED:HELLO WORLD'))
  assert.equal(echoed.headers['content-length'], String('REPLACED:HELLO WORLD'.length))
  assert.equal(r.headers['x-body-seen'], String(s[3]!.response_body!.body!.length))

  // A body over maxBodyBytes (4096) is refused before the backend.
  const before = backend.requests.length
  const big = await send('/bodies', { method: 'POST', body: Buffer.alloc(10_000, 'x') })
  assert.equal(big.status, 413)
  assert.equal(backend.requests.length, before)
})

test('a response body cleared, and a body added to a GET at the headers (CONTINUE_AND_REPLACE)', async () => {
  const cleared = await send('/clear')
  assert.equal(cleared.status, 200)
  assert.equal(cleared.text, '')
  assert.equal(cleared.headers['content-length'], '0')
  const added = await send('/add-body')
  assert.equal(added.status, 200)
  assert.equal(added.echo!.bodySha256, sha256('added by the processor'))
  assert.equal(added.echo!.headers['content-length'], String('added by the processor'.length))
  assert.equal(added.echo!.headers['content-type'], 'text/plain')
})

test('immediate responses: on the request (backend never called) and instead of the backend\'s answer', async () => {
  const before = backend.requests.length
  const r = await send('/immediate')
  assert.equal(r.status, 403)
  assert.equal(r.text, 'go away')
  assert.equal(r.headers['x-why'], 'blocked')
  assert.equal(backend.requests.length, before)
  const resp = await send('/resp-immediate')
  assert.equal(resp.status, 502)
  assert.equal(resp.text, 'backend answer refused')
  assert.equal(resp.headers['x-backend'], undefined)
})

test('a processor that hangs: failClosed answers 500 after the timeout, failOpen goes on unchanged', async () => {
  let started = Date.now()
  const closed = await send('/hang-closed')
  assert.equal(closed.status, 500)
  assert.equal(closed.text, 'external processing failed')
  assert.ok(Date.now() - started < 2000)
  started = Date.now()
  const open = await send('/hang-open', { headers: { 'x-client': 'kept' } })
  assert.equal(open.status, 200)
  assert.equal(open.echo!.headers['x-client'], 'kept')
  // Hanging on the response headers: the backend answered, the client gets 500.
  const resp = await send('/resp-hang')
  assert.equal(resp.status, 500)
  assert.equal(resp.text, 'external processing failed')
  await portico.waitForOutput(/external processor 127\.0\.0\.1:\d+ failed: no answer within 300ms/)
})

test('a processor that errors or is down fails closed (500) or open; one that ends the stream is skipped', async () => {
  assert.equal((await send('/error')).status, 500)
  await portico.waitForOutput(/external processor 127\.0\.0\.1:\d+ failed: stream failed: INTERNAL: processor broke/)
  const down = await send('/down-closed')
  assert.equal(down.status, 500)
  assert.equal(down.text, 'external processing failed')
  assert.equal((await send('/down-open')).status, 200)
  const closed = await send('/close', { headers: { 'x-client': 'kept' } })
  assert.equal(closed.status, 200)
  assert.equal(closed.echo!.headers['x-client'], 'kept')
})

test('at the backend level, with response headers skipped', async () => {
  const r = await send('/backend-level')
  assert.equal(r.status, 200)
  assert.deepEqual(streamFor('/backend-level').map(phaseOf), ['request_headers'])
})

test('the response phase runs on local answers: a directResponse, a redirect, a 503 with the backend down, a 404 with no route', async () => {
  const direct = await send('/local')
  assert.equal(direct.status, 200)
  assert.equal(direct.text, 'from the gateway')
  assert.equal(direct.headers['x-local'], 'yes')
  assert.equal(direct.headers['x-processed'], 'status 200')
  assert.deepEqual(streamFor('/local').map(phaseOf), ['request_headers', 'response_headers'])
  assert.equal(headersOf(streamFor('/local')[1]!.response_headers!.headers)['x-local'], 'yes', 'the processor sees the answer\'s headers')

  const redirect = await send('/redirect/a')
  assert.equal(redirect.status, 301)
  assert.equal(redirect.headers.location, `http://example.com:${portico.port}/redirect/a`)
  assert.equal(redirect.headers['x-processed'], 'status 301')

  // Envoy runs ext_proc's response phase on the router's local reply: the route's extProc sees the 503.
  const dead = await send('/dead-backend')
  assert.equal(dead.status, 503)
  assert.equal(dead.headers['x-processed'], 'status 503')
  assert.deepEqual(streamFor('/dead-backend').map(phaseOf), ['request_headers', 'response_headers'])

  // No route: only the gateway's policies ran, and the gateway's extProc sees the 404.
  const res = await request(`${edge}/nothing`)
  assert.equal(res.statusCode, 404)
  assert.equal(res.headers['x-processed'], 'status 404')
  await res.body.dump()
  const routed = await request(`${edge}/edge-only`)
  assert.equal(routed.statusCode, 200)
  assert.equal(routed.headers['x-processed'], undefined, 'the processor added nothing to a backend\'s answer here')
  await routed.body.dump()
})

test('a gRPC call\'s local answer (backend down): the processor sees it and its header reaches the grpc-js client', async () => {
  const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b }
  const Client = grpc.makeGenericClientConstructor({
    Call: { path: '/dead.Svc/Call', requestStream: false, responseStream: false, requestSerialize: raw.serialize, requestDeserialize: raw.deserialize, responseSerialize: raw.serialize, responseDeserialize: raw.deserialize }
  }, 'Svc')
  const client = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Call: (req: Buffer, cb: (err: grpc.ServiceError | null) => void) => void }
  try {
    const err = await new Promise<grpc.ServiceError | null>(resolve => client.Call(Buffer.from('x'), resolve))
    assert.ok(err !== null)
    assert.equal(err.code, grpc.status.UNAVAILABLE)
    assert.deepEqual(err.metadata.get('x-processed'), ['status 503'])
  } finally {
    client.close()
  }
  const s = streamFor('/dead.Svc/Call')
  assert.deepEqual(s.map(phaseOf), ['request_headers', 'response_headers'])
})

test('on a local answer: the body phase replaces its body; an immediate response replaces the answer', async () => {
  const body = await send('/local-body')
  assert.equal(body.status, 201)
  assert.equal(body.text, 'processed: local body')
  assert.equal(body.headers['content-length'], String('processed: local body'.length))
  assert.deepEqual(streamFor('/local-body').map(phaseOf), ['request_headers', 'response_headers', 'response_body'])
  const immediate = await send('/local-immediate')
  assert.equal(immediate.status, 418)
  assert.equal(immediate.text, 'the processor answers instead')
})

test('the response phase runs on MCP answers: JSON answers and an SSE stream\'s head', async () => {
  const url = `${portico.url}/mcp-ext`
  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const res = await request(url, { method: 'POST', headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
  }
  const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })
  assert.equal(init.status, 200)
  assert.equal(init.headers['x-processed'], 'status 200')
  const sid = init.headers['mcp-session-id'] as string
  assert.ok(sid)
  // A tool call answered as JSON (the channel's own head).
  const call = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'add', arguments: { a: 1, b: 2 } } }, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' })
  assert.equal(call.status, 200)
  assert.equal(call.headers['x-processed'], 'status 200')
  assert.match(call.text, /"text":"3"/)
  // Progress first: the answer is an SSE stream, its events held until the processor answered the head.
  const slow = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'slow', arguments: { steps: 2, delayMs: 10 }, _meta: { progressToken: 'p1' } } }, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' })
  assert.equal(slow.status, 200)
  assert.match(String(slow.headers['content-type']), /^text\/event-stream/)
  assert.equal(slow.headers['x-processed'], 'status 200')
  assert.match(slow.text, /notifications\/progress/)
  assert.match(slow.text, /"id":3/)
  const phases = processor.streams.filter(st => headersOf(st[0]?.request_headers?.headers)[':path'] === '/mcp-ext').map(st => st.map(phaseOf))
  assert.ok(phases.length >= 3)
  for (const p of phases) assert.deepEqual(p, ['request_headers', 'response_headers'])
})

test('the trace shows extProc in effectivePolicy and what the processor changed', async () => {
  const trace = await openTrace(admin, 'path=/headers/traced')
  await trace.ready
  assert.equal((await send('/headers/traced')).status, 203)
  const events = await trace.done
  const route = events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!
  const effective = (route.message.effectivePolicy as Record<string, any>).extProc
  assert.equal(effective.host, `http://${processor.host}`)
  assert.deepEqual(effective.processingMode, { requestHeaderMode: 'send', responseHeaderMode: 'send', requestBodyMode: 'none', responseBodyMode: 'none' })
  const decisions = events.filter(e => e.message.type === 'policy' && e.message.kind === 'extProc').map(e => (e.message.result as { details: string }).details)
  assert.match(decisions[0]!, /^request processed by 127\.0\.0\.1:\d+: set x-added, x-multi, x-client; removed x-remove-me$/)
  assert.match(decisions[1]!, /^response headers processed by 127\.0\.0\.1:\d+: status 203; set x-resp; removed x-drop$/)
})

test('config errors: a bad host; schema errors for an unknown body mode and a zero maxBodyBytes', async () => {
  const dir = makeTempDir()
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extProc: {host: "ftp://127.0.0.1:21"}\n')
  const result = await runPortico(['--validate', '-f', bad])
  assert.equal(result.code, 1)
  assert.match(result.stderr, /routes\[0\]\.policies\.extProc\.host: unsupported scheme "ftp"/)
  const schema = join(dir, 'schema.yaml')
  writeFileSync(schema, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extProc: {host: "127.0.0.1:9000", processingMode: {requestBodyMode: bufferedPartial}, maxBodyBytes: 0, failureMode: allow}\n')
  const r2 = await runPortico(['--validate', '-f', schema])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /extProc\.processingMode\.requestBodyMode: /)
  assert.match(r2.stderr, /extProc\.maxBodyBytes: /)
  assert.match(r2.stderr, /extProc\.failureMode: /)
})

test('config errors: a response body mode where the answers are MCP (route, backend, a gateway with an MCP route)', async () => {
  const dir = makeTempDir()
  const file = join(dir, 'mcp.yaml')
  writeFileSync(file, [
    'gateways:',
    '  default:',
    '    port: 3000',
    '    policies:',
    '      extProc: {host: "127.0.0.1:9000", processingMode: {responseBodyMode: buffered}}',
    'routes:',
    '  - name: tools',
    '    policies:',
    '      extProc: {host: "127.0.0.1:9000", processingMode: {responseBodyMode: buffered}}',
    '    backends:',
    '      - mcp: {targets: [{name: a, mcp: {host: "http://127.0.0.1:9001/mcp"}}]}',
    '        policies:',
    '          extProc: {host: "127.0.0.1:9000", processingMode: {responseBodyMode: buffered}}',
    '  - name: plain',
    '    gateways: [default]',
    '    matches: [{path: {pathPrefix: /plain}}]',
    '    policies:',
    '      extProc: {host: "127.0.0.1:9000", processingMode: {responseBodyMode: buffered, responseHeaderMode: send}}',
    '    backends: [{host: "127.0.0.1:9002"}]',
    ''
  ].join('\n'))
  const r = await runPortico(['--validate', '-f', file])
  assert.equal(r.code, 1)
  const lines = r.stderr.trim().split('\n')
  assert.deepEqual(lines.filter(l => l.includes('responseBodyMode')).map(l => l.replace(/ buffered cannot apply: .*/, '').replace(file, 'F')), [
    'F:5:58: gateways.default.policies.extProc.processingMode.responseBodyMode:',
    'F:9:58: routes[0].policies.extProc.processingMode.responseBodyMode:',
    'F:13:62: routes[0].backends[0].policies.extProc.processingMode.responseBodyMode:'
  ])
  assert.match(r.stderr, /gateways\.default\.policies\.extProc\.processingMode\.responseBodyMode: buffered cannot apply: route "tools" on this gateway has an mcp backend, whose answers may be SSE streams that are never whole \(use none; the response headers are still sent to the processor\)/)
  assert.match(r.stderr, /routes\[0\]\.policies\.extProc\.processingMode\.responseBodyMode: buffered cannot apply: this route has an mcp backend/)
  assert.match(r.stderr, /routes\[0\]\.backends\[0\]\.policies\.extProc\.processingMode\.responseBodyMode: buffered cannot apply: this backend is mcp/)
  assert.doesNotMatch(r.stderr, /routes\[1\]/, 'a body mode on a route without MCP is fine')
})
