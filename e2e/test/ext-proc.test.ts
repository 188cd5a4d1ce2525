/**
 * extProc against a real gRPC external processing server (Envoy's ExternalProcessor/Process
 * with the repository's protos, @grpc/grpc-js) in front of a real backend: header mutations
 * on the request and the response, body replacement both ways (content-length fixed), a
 * body added at the headers (CONTINUE_AND_REPLACE), immediate responses, a processor that
 * hangs (on the request or the response), errors, ends the stream, or is down — failClosed
 * 500 and failOpen through — bodies over the limit, the trace and config errors.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, runPortico, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { startEchoBackend, type Backend, type EchoedRequest, sha256 } from '../lib/backends.ts'
import { answer, headersOf, phaseOf, startExtProcServer, type ExtProcServer, type ProcessingReply, type ProcessingRequest } from '../lib/ext-proc.ts'
import { openTrace } from '../lib/trace.ts'

let backend: Backend
let processor: ExtProcServer
let portico: PorticoProcess
let admin: string

const set = (key: string, value: string, appendAction = 2) => ({ header: { key, raw_value: Buffer.from(value) }, append_action: appendAction })

/** The processor's behaviour, by the request path (from the stream's first message). */
function behave (m: ProcessingRequest, stream: ProcessingRequest[]): ProcessingReply {
  const path = headersOf(stream[0]!.request_headers?.headers)[':path'] ?? ''
  const phase = phaseOf(m)
  const prefix = path.split('/')[1]
  switch (prefix) {
    case 'headers':
      if (phase === 'request_headers') return answer(phase, { header_mutation: { set_headers: [set('x-added', 'yes'), set('x-multi', 'b', 0)], remove_headers: ['x-remove-me'] } })
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
  const deadPort = await freePort()
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  const ep = (extra: Record<string, unknown> = {}) => ({ host: processor.host, timeout: '2s', ...extra })
  const route = (name: string, extProc: Record<string, unknown>) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], policies: { extProc } as never, backends: [{ host: backend.host }] })
  const buffered = { requestBodyMode: 'buffered', responseBodyMode: 'buffered' }
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
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
  assert.equal(r.echo!.headers['x-multi'], 'a,b', 'APPEND_IF_EXISTS_OR_ADD appends')
  assert.equal(r.echo!.headers['x-remove-me'], undefined)
  assert.equal(r.echo!.headers['x-client'], 'c')
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
  assert.match(decisions[0]!, /^request processed by 127\.0\.0\.1:\d+: set x-added, x-multi; removed x-remove-me$/)
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
  writeFileSync(schema, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extProc: {host: "127.0.0.1:9000", processingMode: {requestBodyMode: streamed}, maxBodyBytes: 0, failureMode: allow}\n')
  const r2 = await runPortico(['--validate', '-f', schema])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /extProc\.processingMode\.requestBodyMode: /)
  assert.match(r2.stderr, /extProc\.maxBodyBytes: /)
  assert.match(r2.stderr, /extProc\.failureMode: /)
})
