/**
 * extProc's streamed body modes (Envoy's STREAMED and FULL_DUPLEX_STREAMED) against a real
 * gRPC external processing server (e2e/lib/ext-proc.ts) in front of a real echo backend:
 * chunks reach the processor as the client sends them, in order, each answered (a body
 * mutation per chunk); a full-duplex processor that answers only once it has seen the whole
 * body, the way the inference extension's endpoint picker does (its headers answer carries
 * x-gateway-destination-endpoint, its streamed_response chunks the body); one that answers
 * late, one that never answers (bounded by the timeout: failClosed 500, failOpen the original
 * body through), an immediate response in the middle of the body, bodies over the limit both
 * ways, mode_override, Envoy Gateway's field names, the response side in both modes (an SSE
 * answer streaming through the processor, a failure in its middle), and the trace.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, makeTempDir, type PorticoProcess, runPortico, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, sha256, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { gatedEvents, inOrder } from '../lib/gated-events.ts'
import { answer, headersOf, metadataStruct, phaseOf, startExtProcServer, streamedBody, type ExtProcServer, type ProcessingReply, type ProcessingRequest } from '../lib/ext-proc.ts'

let backend: Backend
/** A model server's SSE answer: three events 200 ms apart. */
let sse: Backend
/** The same, and a 512 KiB answer, from an h2c-only server (undici's HTTP/2 client, never paused). */
let h2c: http2.Http2Server
const BIG = Buffer.from(Array.from({ length: 512 * 1024 }, (_, i) => (i * 7) % 251))
let processor: ExtProcServer
let portico: PorticoProcess
let admin: string

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) }, append_action: 2 })

/** The request body the processor has seen so far on a stream (all request_body messages). */
function bodySeen (stream: ProcessingRequest[]): Buffer {
  return Buffer.concat(stream.filter(m => m.request_body !== undefined).map(m => Buffer.from(m.request_body!.body ?? Buffer.alloc(0))))
}

/** The processor's behaviour, by the request path's first segment. */
async function behave (m: ProcessingRequest, stream: ProcessingRequest[]): Promise<ProcessingReply> {
  const path = headersOf(stream[0]!.request_headers?.headers)[':path'] ?? ''
  const phase = phaseOf(m)
  switch (path.split('/')[1]) {
    case 'streamed':
      // Each chunk answered on its own: upper-cased.
      if (phase === 'request_body') return answer(phase, { body_mutation: { body: Buffer.from(m.request_body!.body!.toString('utf8').toUpperCase()) } })
      if (phase === 'response_body') return answer(phase, { header_mutation: { set_headers: [set('x-response-seen', `${m.response_body!.body!.length} bytes, end ${m.response_body!.end_of_stream === true}`)] } })
      return answer(phase)
    case 'picker':
    case 'picker-eg': {
      // The endpoint picker's way: nothing until the body's end, then the headers answer (the
      // chosen endpoint as a header and as envoy.lb metadata) and the body in two chunks.
      if (phase === 'request_headers' || (phase === 'request_body' && m.request_body!.end_of_stream !== true)) return []
      if (phase === 'request_body') {
        const body = bodySeen(stream)
        const half = Math.floor(body.length / 2)
        return [
          { ...answer('request_headers', { header_mutation: { set_headers: [set('x-gateway-destination-endpoint', '10.0.0.7:8000'), set('content-length', String(body.length))] } }), dynamic_metadata: metadataStruct({ 'envoy.lb': { 'x-gateway-destination-endpoint': '10.0.0.7:8000' } }) },
          streamedBody('request_body', body.subarray(0, half), false),
          streamedBody('request_body', body.subarray(half), true)
        ]
      }
      // Response: headers answered at once, the body passed through as streamed chunks.
      if (phase === 'response_headers') return answer(phase, { header_mutation: { set_headers: [set('x-picked', 'yes')] } })
      if (phase === 'response_body') return streamedBody(phase, m.response_body!.body!, m.response_body!.end_of_stream === true)
      return answer(phase)
    }
    case 'late':
      // Full duplex, answers 400 ms after the body ended (the timeout is 2s).
      if (phase === 'request_body' && m.request_body!.end_of_stream === true) {
        await sleep(400)
        return [answer('request_headers', { header_mutation: { set_headers: [set('x-late', 'yes')] } }), streamedBody('request_body', bodySeen(stream), true)]
      }
      return phase.startsWith('request') ? [] : answer(phase)
    case 'silent-closed':
    case 'silent-open':
    case 'stalls-open':
      return phase === 'request_headers' && path.startsWith('/stalls-open') ? answer(phase) : 'hang'
    case 'shed':
      // An immediate response after the first chunk, the client's body still coming.
      if (phase === 'request_body') return { immediate_response: { status: { code: 429 }, body: Buffer.from('shed') } }
      return []
    case 'grow':
      // A processor that answers more body than the gateway holds.
      if (phase === 'request_body' && m.request_body!.end_of_stream === true) return [answer('request_headers'), streamedBody('request_body', Buffer.alloc(200_000, 'x'), true)]
      return phase.startsWith('request') ? [] : answer(phase)
    case 'override':
    case 'no-override':
      // Asks for the rest of the body buffered (one message).
      if (phase === 'request_headers') return { ...answer(phase), mode_override: { request_body_mode: 2 } }
      return answer(phase)
    case 'duplex-resp':
      // Full duplex on the response: the headers answered only after the whole body.
      if (phase === 'response_headers') return []
      if (phase === 'response_body') return m.response_body!.end_of_stream === true ? [answer('response_headers', { header_mutation: { set_headers: [set('x-after-body', 'yes')] } }), streamedBody('response_body', 'rewritten', true)] : []
      return answer(phase)
    case 'sse-duplex':
    case 'h2c-sse':
    case 'h2c-big':
      // Each event passed back at once, as the picker passes a model server's stream.
      if (phase === 'response_body') return streamedBody(phase, m.response_body!.body!, m.response_body!.end_of_stream === true)
      return answer(phase)
    case 'sse-cut':
      // Fails on the second event, after the client got the first.
      if (phase === 'response_body') return stream.filter(x => x.response_body !== undefined).length >= 2 ? 'error' : streamedBody(phase, m.response_body!.body!, false)
      return answer(phase)
    case 'sse-open':
      // Stops answering at the second event: failOpen lets the rest through unprocessed.
      if (phase === 'response_body') return stream.filter(x => x.response_body !== undefined).length >= 2 ? 'hang' : answer(phase, { body_mutation: { body: Buffer.from(m.response_body!.body!.toString('utf8').toUpperCase()) } })
      return answer(phase)
    case 'sse-streamed':
      if (phase === 'response_body') return answer(phase, { body_mutation: { body: Buffer.from(m.response_body!.body!.toString('utf8').toUpperCase()) } })
      return answer(phase)
    default:
      return answer(phase)
  }
}

/** The SSE backends' events, paced by the client when a request carries `x-gated` (e2e/lib/gated-events.ts). */
const gate = gatedEvents()

before(async () => {
  backend = await startEchoBackend('app')
  sse = await startBackend((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    void gate.write(res, req.headers['x-gated'] !== undefined)
  })
  h2c = http2.createServer((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': req.url === '/h2c-big' ? 'application/octet-stream' : 'text/event-stream' })
    void (async () => {
      if (req.url === '/h2c-big') {
        for (let at = 0; at < BIG.length; at += 16_384) res.write(BIG.subarray(at, at + 16_384))
        res.end()
      } else {
        await gate.write(res, req.headers['x-gated'] !== undefined)
      }
    })()
  })
  await new Promise<void>(resolve => h2c.listen(0, '127.0.0.1', resolve))
  const h2cBackend = { host: `127.0.0.1:${(h2c.address() as AddressInfo).port}`, policies: { http: { version: 'HTTP2' } } }
  processor = await startExtProcServer(behave)
  const ep = (extra: Record<string, unknown>) => ({ host: processor.host, timeout: '2s', ...extra })
  const route = (name: string, extProc: Record<string, unknown>) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], policies: { extProc } as never, backends: [{ host: backend.host }] })
  const duplex = { requestBodyMode: 'fullDuplexStreamed', responseHeaderMode: 'skip' }
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        route('streamed', ep({ processingMode: { requestBodyMode: 'streamed', responseBodyMode: 'streamed', responseHeaderMode: 'skip' }, maxBodyBytes: 65_536 })),
        route('picker-eg', ep({ processingMode: { request: { body: 'FullDuplexStreamed' }, response: { body: 'FullDuplexStreamed' } } })),
        route('picker', ep({ processingMode: { requestBodyMode: 'fullDuplexStreamed', responseBodyMode: 'fullDuplexStreamed' } })),
        route('late', ep({ processingMode: duplex })),
        route('silent-closed', ep({ processingMode: duplex, timeout: '300ms' })),
        route('silent-open', ep({ processingMode: duplex, timeout: '300ms', failureMode: 'failOpen' })),
        route('shed', ep({ processingMode: duplex })),
        route('stalls-open', ep({ processingMode: { requestBodyMode: 'streamed', responseHeaderMode: 'skip' }, timeout: '300ms', failureMode: 'failOpen' })),
        route('grow', ep({ processingMode: duplex, maxBodyBytes: 100_000 })),
        route('override', ep({ processingMode: { requestBodyMode: 'streamed', responseHeaderMode: 'skip', allowModeOverride: true } })),
        route('no-override', ep({ processingMode: { requestBodyMode: 'streamed', responseHeaderMode: 'skip' } })),
        route('duplex-resp', ep({ processingMode: { responseBodyMode: 'fullDuplexStreamed' } })),
        { ...route('sse-duplex', ep({ processingMode: { request: { body: 'FullDuplexStreamed' }, response: { body: 'FullDuplexStreamed' } } })), backends: [{ host: sse.host }] },
        { ...route('sse-streamed', ep({ processingMode: { responseBodyMode: 'streamed' } })), backends: [{ host: sse.host }] },
        { ...route('h2c-sse', ep({ processingMode: { responseBodyMode: 'fullDuplexStreamed' } })), backends: [h2cBackend] },
        { ...route('h2c-big', ep({ processingMode: { responseBodyMode: 'fullDuplexStreamed' } })), backends: [h2cBackend] },
        { ...route('sse-cut', ep({ processingMode: { responseBodyMode: 'fullDuplexStreamed' }, failureMode: 'failOpen' })), backends: [{ host: sse.host }] },
        { ...route('sse-open', ep({ processingMode: { responseBodyMode: 'streamed' }, failureMode: 'failOpen', timeout: '300ms' })), backends: [{ host: sse.host }] }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await processor?.close()
  await backend?.close()
  await sse?.close()
  await new Promise(resolve => h2c?.close(resolve))
})

/** The stream whose request path is `path`. */
function streamFor (path: string): ProcessingRequest[] {
  const s = processor.streams.find(st => headersOf(st[0]?.request_headers?.headers)[':path'] === path)
  assert.ok(s !== undefined, `no stream for ${path}`)
  return s
}

interface Sent { status: number, headers: http.IncomingHttpHeaders, text: string, echo: EchoedRequest | null }

/**
 * A POST whose body goes out in `chunks`; before each next chunk, `between(i)` is awaited (a
 * test waits there for the processor to have seen chunk i: proof the gateway streams).
 * `length`: send a content-length (else chunked).
 */
async function post (path: string, chunks: Array<string | Buffer>, options: { length?: boolean, between?: (i: number) => Promise<void> } = {}): Promise<Sent> {
  const total = chunks.reduce((n, c) => n + Buffer.byteLength(c), 0)
  return await new Promise<Sent>((resolve, reject) => {
    const req = http.request(`${portico.url}${path}`, { method: 'POST', headers: { 'content-type': 'text/plain', ...(options.length === true ? { 'content-length': String(total) } : {}) } }, res => {
      const parts: Buffer[] = []
      res.on('data', (c: Buffer) => parts.push(c))
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8')
        let echo: EchoedRequest | null = null
        try { echo = res.headers['x-backend'] !== undefined ? JSON.parse(text) as EchoedRequest : null } catch {}
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, echo })
      })
    })
    // An answer before the whole body went out (413, an immediate response) may reset the upload.
    req.on('error', reject)
    void (async () => {
      for (let i = 0; i < chunks.length; i++) {
        req.write(chunks[i])
        if (i < chunks.length - 1 && options.between !== undefined) await options.between(i)
      }
      req.end()
    })().catch(reject)
  })
}

/** Waits until the stream for `path` carries `n` request_body messages (at most 5 s). */
async function processorSaw (path: string, n: number): Promise<void> {
  for (let t = 0; t < 500; t++) {
    const s = processor.streams.find(st => headersOf(st[0]?.request_headers?.headers)[':path'] === path)
    if (s !== undefined && s.filter(m => m.request_body !== undefined).length >= n) return
    await sleep(10)
  }
  throw new Error(`the processor never saw body chunk ${n} of ${path}`)
}

test('streamed: each chunk reaches the processor as the client sends it, in order, and each answer replaces its chunk', async () => {
  const chunks = ['alpha-', 'beta-', 'gamma']
  const r = await post('/streamed/chunked', chunks, { between: async i => await processorSaw('/streamed/chunked', i + 1) })
  assert.equal(r.status, 200)
  assert.equal(r.echo!.bodySha256, sha256('ALPHA-BETA-GAMMA'), 'every chunk upper-cased by its own answer')
  assert.equal(r.echo!.headers['content-length'], String('ALPHA-BETA-GAMMA'.length))
  assert.equal(r.echo!.headers['transfer-encoding'], undefined)
  const s = streamFor('/streamed/chunked')
  assert.deepEqual(s[0]!.protocol_config, { request_body_mode: 1, response_body_mode: 1 })
  assert.equal(s[0]!.request_headers!.end_of_stream, false)
  const bodies = s.filter(m => m.request_body !== undefined).map(m => m.request_body!)
  // Chunked: the end comes after the last chunk, as an empty message with end_of_stream.
  assert.deepEqual(bodies.map(b => Buffer.from(b.body ?? Buffer.alloc(0)).toString('utf8')), [...chunks, ''])
  assert.deepEqual(bodies.map(b => b.end_of_stream === true), [false, false, false, true])
  // The response in the streamed mode: each chunk answered as it passes (the first answer's
  // header mutation still makes the headers), then an empty chunk with end_of_stream.
  assert.equal(r.headers['x-response-seen'], `${r.text.length} bytes, end false`)
  assert.equal(r.headers['content-length'], undefined, 'the length may change chunk by chunk: sent chunked')
  const answers = s.filter(m => m.response_body !== undefined).map(m => m.response_body!)
  assert.equal(Buffer.concat(answers.map(b => Buffer.from(b.body ?? Buffer.alloc(0)))).toString('utf8'), r.text)
  assert.equal(answers.at(-1)!.end_of_stream, true)
})

test('streamed with a content-length: the last chunk carries end_of_stream (no empty message)', async () => {
  const r = await post('/streamed/length', ['one-', 'two'], { length: true, between: async i => await processorSaw('/streamed/length', i + 1) })
  assert.equal(r.status, 200)
  assert.equal(r.echo!.bodySha256, sha256('ONE-TWO'))
  const bodies = streamFor('/streamed/length').filter(m => m.request_body !== undefined).map(m => m.request_body!)
  assert.deepEqual(bodies.map(b => b.end_of_stream === true), [false, true])
})

test('full duplex, the endpoint picker\'s way: answers only after the whole body; the headers answer\'s mutation reaches the backend, the streamed_response chunks are its body', async () => {
  for (const path of ['/picker/v1/completions', '/picker-eg/v1/completions']) {
    const body = JSON.stringify({ model: 'smollm2', prompt: 'x'.repeat(5000) })
    const r = await post(path, [body.slice(0, 2000), body.slice(2000)], { between: async () => await processorSaw(path, 1) })
    assert.equal(r.status, 200, path)
    assert.equal(r.echo!.headers['x-gateway-destination-endpoint'], '10.0.0.7:8000', 'the routing decision applied before the upstream call')
    assert.equal(r.echo!.bodySha256, sha256(body))
    assert.equal(r.echo!.headers['content-length'], String(body.length))
    const s = streamFor(path)
    assert.deepEqual(s[0]!.protocol_config, { request_body_mode: 4, response_body_mode: 4 })
    const bodies = s.filter(m => m.request_body !== undefined)
    assert.ok(bodies.length >= 2, 'the body went out in chunks')
    assert.equal(bodies.at(-1)!.request_body!.end_of_stream, true)
    // The response: headers answered, then the body as a streamed_response.
    assert.equal(r.headers['x-picked'], 'yes')
  }
})

test('full duplex: a processor that answers late (within the timeout) is waited for', async () => {
  const started = Date.now()
  const r = await post('/late', ['late body'])
  assert.equal(r.status, 200)
  assert.ok(Date.now() - started >= 400)
  assert.equal(r.echo!.headers['x-late'], 'yes')
  assert.equal(r.echo!.bodySha256, sha256('late body'))
})

test('full duplex: a processor that never answers is bounded by the timeout — failClosed 500, failOpen the original body through', async () => {
  // An answer at all is the timeout's doing (the processor never answers): no wall-clock budget asserted.
  const closed = await post('/silent-closed', ['never ', 'answered'])
  assert.equal(closed.status, 500)
  assert.equal(closed.text, 'external processing failed')
  const open = await post('/silent-open', ['never ', 'answered'])
  assert.equal(open.status, 200)
  assert.equal(open.echo!.bodySha256, sha256('never answered'), 'the body the processor saw is put back unchanged')
})

test('streamed: a processor that stalls in the middle of the body, failOpen — the bytes it saw are put back in front of the rest', async () => {
  const r = await post('/stalls-open', ['first ', 'second'], { between: async () => { await processorSaw('/stalls-open', 1); await sleep(500) } })
  assert.equal(r.status, 200)
  assert.equal(r.echo!.bodySha256, sha256('first second'), 'the whole body, as the client sent it')
})

test('full duplex: an immediate response in the middle of the body answers the client', async () => {
  const r = await post('/shed', ['first ', 'second'], { between: async () => await processorSaw('/shed', 1).then(() => sleep(50)) }).catch((err: Error) => ({ status: -1, text: err.message, headers: {}, echo: null }))
  assert.equal(r.status, 429, r.text)
  assert.equal(r.text, 'shed')
})

test('bounded: a body over maxBodyBytes is refused (413) in the streamed mode; a processor that answers more than it is a failure', async () => {
  const big = Buffer.alloc(100_000, 'a')
  const r = await post('/streamed/big', [big.subarray(0, 50_000), big.subarray(50_000)], { length: true }).catch((err: Error) => ({ status: -1, text: err.message, headers: {}, echo: null }))
  assert.equal(r.status, 413, r.text)
  const chunked = await post('/streamed/big-chunked', [big.subarray(0, 50_000), big.subarray(50_000)]).catch((err: Error) => ({ status: -1, text: err.message, headers: {}, echo: null }))
  assert.equal(chunked.status, 413, chunked.text)
  const grown = await post('/grow', ['small'])
  assert.equal(grown.status, 500)
})

test('mode_override: honoured with allowModeOverride (the rest of the body buffered, one message), ignored without', async () => {
  const body = Buffer.alloc(200_000, 'b')
  const r = await post('/override', [body.subarray(0, 100_000), body.subarray(100_000)], { length: true })
  assert.equal(r.status, 200)
  const bodies = streamFor('/override').filter(m => m.request_body !== undefined)
  assert.equal(bodies.length, 1, 'BUFFERED after the override: the body whole in one message')
  assert.equal(bodies[0]!.request_body!.end_of_stream, true)
  assert.equal(Buffer.from(bodies[0]!.request_body!.body!).length, 200_000)
  const r2 = await post('/no-override', [body.subarray(0, 100_000), body.subarray(100_000)], { length: true })
  assert.equal(r2.status, 200)
  assert.ok(streamFor('/no-override').filter(m => m.request_body !== undefined).length > 1, 'still streamed: the override is not allowed')
})

test('full duplex on the response: the headers answered after the body, the streamed_response is the new body', async () => {
  const r = await post('/duplex-resp', ['x'])
  assert.equal(r.status, 200)
  assert.equal(r.headers['x-after-body'], 'yes')
  assert.equal(r.text, 'rewritten')
})

/**
 * A GET whose answer is read as it streams: the pieces as they arrived. `gated`: the backend
 * paces its events on what this client received (see `gate`), logged in `gate.log`.
 */
async function streamed (path: string, options: { gated?: boolean } = {}): Promise<{ status: number, pieces: Array<{ at: number, text: string }>, complete: boolean, ms: number }> {
  const started = Date.now()
  if (options.gated === true) gate.reset()
  return await new Promise((resolve, reject) => {
    http.get(`${portico.url}${path}`, { headers: options.gated === true ? { 'x-gated': '1' } : {} }, res => {
      const pieces: Array<{ at: number, text: string }> = []
      res.on('data', (c: Buffer) => {
        pieces.push({ at: Date.now() - started, text: c.toString('utf8') })
        if (options.gated === true) gate.received(c.toString('utf8'))
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, pieces, complete: res.complete, ms: Date.now() - started }))
      // A response cut in the middle (the processor failed after the first byte).
      res.on('error', () => resolve({ status: res.statusCode ?? 0, pieces, complete: false, ms: Date.now() - started }))
      res.on('aborted', () => resolve({ status: res.statusCode ?? 0, pieces, complete: false, ms: Date.now() - started }))
    }).on('error', reject)
  })
}

test('a streamed answer (SSE) goes through the processor chunk by chunk: each event reaches the client before the backend writes the next, the last before the answer ends', async () => {
  for (const [path, expect] of [['/sse-duplex', 'data: event 1'], ['/sse-streamed', 'DATA: EVENT 1'], ['/h2c-sse', 'data: event 1']] as const) {
    const r = await streamed(path, { gated: true })
    assert.equal(r.status, 200, path)
    const text = r.pieces.map(p => p.text).join('')
    assert.ok(text.startsWith(expect), `${path}: ${text}`)
    assert.equal(text.split('\n\n').filter(Boolean).length, 3, text)
    // The order, not a time: each event goes on as soon as the processor answered it (full
    // duplex too: not with the next chunk, nor held to the end).
    assert.deepEqual(gate.log, inOrder(), path)
    const s = streamFor(path)
    const bodies = s.filter(m => m.response_body !== undefined)
    assert.ok(bodies.length >= 3, `${path}: ${bodies.length} response_body messages`)
  }
})

test('an h2c backend\'s 512 KiB answer through a full-duplex processor arrives whole', async () => {
  const res = await fetch(`${portico.url}/h2c-big`)
  assert.equal(res.status, 200)
  const got = Buffer.from(await res.arrayBuffer())
  assert.equal(got.length, BIG.length)
  assert.equal(sha256(got), sha256(BIG))
})

test('a failure in the middle of a streamed answer: full duplex cuts the client\'s response (even with failOpen); streamed with failOpen lets the rest through', async () => {
  const cut = await streamed('/sse-cut')
  assert.equal(cut.status, 200)
  assert.equal(cut.complete, false, 'the response is cut, not ended as if whole')
  assert.ok(cut.pieces.map(p => p.text).join('').startsWith('data: event 1'))
  const open = await streamed('/sse-open')
  assert.equal(open.status, 200)
  assert.equal(open.complete, true)
  assert.equal(open.pieces.map(p => p.text).join(''), 'DATA: EVENT 1\n\ndata: event 2\n\ndata: event 3\n\n')
})

test('the trace: one event per phase, the streamed body summed up (not one event per chunk)', async () => {
  const trace = await openTrace(admin, 'path=/sse-streamed')
  await trace.ready
  const r = await streamed('/sse-streamed')
  assert.equal(r.status, 200)
  const events = await trace.done
  const effective = (events.find(e => e.message.type === 'policySelection' && e.message.phase === 'route')!.message.effectivePolicy as Record<string, any>).extProc
  assert.equal(effective.processingMode.responseBodyMode, 'streamed')
  const decisions = events.filter(e => e.message.type === 'policy' && e.message.kind === 'extProc').map(e => (e.message.result as { details: string }).details)
  assert.equal(decisions.length, 3, decisions.join(' | '))
  assert.match(decisions[2]!, /^response body streamed through 127\.0\.0\.1:\d+: 4 chunks answered, 4 replaced$/)
})

test('config: both spellings of one body mode refused; BufferedPartial is not a mode', async () => {
  const dir = makeTempDir()
  const both = join(dir, 'both.yaml')
  writeFileSync(both, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extProc: {host: "127.0.0.1:9000", processingMode: {requestBodyMode: streamed, request: {body: FullDuplexStreamed}}}\n')
  const r = await runPortico(['--validate', '-f', both])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /extProc\.processingMode\.request\.body: set one of request\.body and requestBodyMode/)
  const partial = join(dir, 'partial.yaml')
  writeFileSync(partial, 'gateways: {default: {port: 3000}}\nroutes:\n  - policies:\n      extProc: {host: "127.0.0.1:9000", processingMode: {response: {body: BufferedPartial}}}\n')
  const r2 = await runPortico(['--validate', '-f', partial])
  assert.equal(r2.code, 1)
  assert.match(r2.stderr, /extProc\.processingMode\.response\.body: /)
})
