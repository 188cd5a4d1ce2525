/**
 * A standalone `inferencePool` backend through the real gateway: a real ext_proc gRPC picker
 * on loopback (e2e/lib/inference-picker.ts, speaking the endpoint picker protocol as the
 * reference lwepp does — over TLS with a certificate of its own, or plaintext) in front of
 * echo servers as the pool's pods, which say who answered:
 *
 * requests steered to each pod (the body streamed to the picker, the served endpoint
 * reported back), the picker's round robin, a comma list whose first pod is down, an
 * endpoint outside the pool (refused, never connected to), the subset hint, the pick from
 * the metadata only, the response body when the picker asks for it (an SSE answer streamed
 * through it chunk by chunk; a picker that never answers it), an immediate answer, huge and malformed header mutations, a picker
 * that never answers (bounded), a picker down with FailClose (503) and FailOpen (served,
 * round robin), a body over the picker's limit, an h2c model server, a reload that takes a
 * pod out, the trace, the access log and metrics.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, type EchoedRequest, sha256, startBackend, startEchoBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { selfSignedCert } from '@portico/testkit/test-ca'
import { startTestPicker, type TestPicker } from '../lib/inference-picker.ts'
import { gatedEvents, inOrder } from '../lib/gated-events.ts'

let pods: Backend[]
let outside: Backend
/** A model server streaming its answer (SSE): three events 200 ms apart, or paced by the client (`x-gated`). */
let ssePod: Backend
const sseEvents = gatedEvents()
let h2cPod: http2.Http2Server
let h2cEndpoint: string
let tlsPicker: TestPicker
let plainPicker: TestPicker
let portico: PorticoProcess
let admin: string
let stats: string
let deadPod: string
let configFor: (port: number, llama?: string[]) => Record<string, unknown>

const names = ['pod-a', 'pod-b', 'pod-c']

/** A self-signed certificate for 127.0.0.1 (as lwepp makes one for itself), and its file. */
const certDirs: string[] = []

function selfSigned (): { cert: Buffer, key: Buffer, certFile: string } {
  const dir = makeTempDir()
  certDirs.push(dir)
  const pem = selfSignedCert(dir, 'epp', { subject: '/CN=epp.test', sans: ['IP:127.0.0.1'] })
  return { cert: Buffer.from(pem.cert), key: Buffer.from(pem.key), certFile: pem.certFile }
}

before(async () => {
  pods = await Promise.all(names.map(n => startEchoBackend(n)))
  outside = await startEchoBackend('outside')
  ssePod = await startBackend((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    void sseEvents.write(res, req.headers['x-gated'] !== undefined)
  })
  deadPod = `127.0.0.1:${await freePort()}`
  h2cPod = http2.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`h2c pod over ${req.httpVersion}`)
  })
  await new Promise<void>(resolve => h2cPod.listen(0, '127.0.0.1', resolve))
  h2cEndpoint = `127.0.0.1:${(h2cPod.address() as AddressInfo).port}`
  const pickerCert = selfSigned()
  const otherCert = selfSigned()
  tlsPicker = await startTestPicker(pods.map(p => p.host), pickerCert)
  // Its pool as lwepp's datastore would hold it: every pod of the pools it serves (the plain and h2c pools send subset hints).
  plainPicker = await startTestPicker([...pods.map(p => p.host), h2cEndpoint, ssePod.host])
  const deadPicker = `127.0.0.1:${await freePort()}`
  const adminPort = await freePort()
  const statsPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  stats = `http://127.0.0.1:${statsPort}`
  const all = [...pods.map(p => p.host), deadPod]
  const pool = (name: string, inferencePool: Record<string, unknown>) => ({ name, matches: [{ path: { pathPrefix: `/${name}` } }], backends: [{ inferencePool } as never] })
  configFor = (port: number, llama: string[] = all) => ({
    gateways: { default: { port, address: '127.0.0.1' } },
    routes: [
        // The picker's default: TLS, its self-signed certificate accepted.
        pool('tls', { name: 'llama', endpoints: llama, endpointPicker: { host: tlsPicker.host, timeout: '2s' } }),
        // Verified against its certificate; and against another one, which fails.
        pool('tls-ca', { name: 'verified', endpoints: all, endpointPicker: { host: tlsPicker.host, tls: { ca: pickerCert.certFile } } }),
        pool('tls-wrong-ca', { name: 'unverified', endpoints: all, endpointPicker: { host: tlsPicker.host, tls: { ca: otherCert.certFile } } }),
        pool('plain', { name: 'plain', endpoints: pods.slice(0, 2).map(p => p.host), endpointPicker: { host: plainPicker.host, tls: false, subsetHint: true } }),
        pool('small', { name: 'small', endpoints: all, endpointPicker: { host: plainPicker.host, tls: false, maxBodyBytes: 1024 } }),
        pool('hang', { name: 'hang', endpoints: all, endpointPicker: { host: plainPicker.host, tls: false, timeout: '300ms' } }),
        pool('down-close', { name: 'down-close', endpoints: all, endpointPicker: { host: deadPicker, tls: false, failureMode: 'FailClose' } }),
        pool('down-open', { name: 'down-open', endpoints: pods.map(p => p.host), endpointPicker: { host: deadPicker, tls: false, failureMode: 'FailOpen' } }),
        pool('h2c', { name: 'h2c', endpoints: [h2cEndpoint], appProtocol: 'kubernetes.io/h2c', endpointPicker: { host: plainPicker.host, tls: false, subsetHint: true } }),
        pool('sse', { name: 'sse', endpoints: [ssePod.host], endpointPicker: { host: plainPicker.host, tls: false, subsetHint: true, timeout: '2s' } }),
        pool('sse-hang', { name: 'sse-hang', endpoints: [ssePod.host], endpointPicker: { host: plainPicker.host, tls: false, subsetHint: true, timeout: '500ms' } }),
        { name: 'outside', matches: [{ path: { pathPrefix: '/outside-host' } }], backends: [{ host: outside.host }] }
    ]
  })
  portico = await startPortico({
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: `127.0.0.1:${statsPort}`, LOG_LEVEL: 'info' },
    config: port => configFor(port)
  })
})

after(async () => {
  await portico?.stop()
  await Promise.all([...pods, outside, ssePod].map(p => p?.close()))
  h2cPod?.close()
  await tlsPicker?.close()
  await plainPicker?.close()
  for (const d of certDirs) rmSync(d, { recursive: true, force: true })
})

async function send (path: string, headers: Record<string, string> = {}, body?: Buffer | string) {
  const res = await request(`${portico.url}${path}`, { method: body !== undefined ? 'POST' : 'GET', headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, echo: res.statusCode === 200 && text.startsWith('{') ? JSON.parse(text) as EchoedRequest : null }
}

test('requests steered to each pod: the body streamed to the picker, the pick followed exactly, the served endpoint reported back', async () => {
  const body = JSON.stringify({ model: 'smollm2', prompt: 'x'.repeat(100_000) })
  for (const [i, pod] of pods.entries()) {
    const before = tlsPicker.streams.length
    const r = await send('/tls/v1/completions', { 'test-epp-endpoint-selection': pod.host }, body)
    assert.equal(r.status, 200, r.text)
    assert.equal(r.echo!.name, names[i])
    assert.equal(r.echo!.bodySha256, sha256(body), 'the pod got the body intact')
    assert.equal(r.echo!.headers['x-gateway-destination-endpoint'], pod.host)
    assert.equal(r.echo!.headers['x-echo-set-header'], `x-conformance-test-served-endpoint:${pod.host}`)
    assert.equal(r.headers['x-conformance-test-served-endpoint'], pod.host, 'the picker heard which endpoint served')
    const s = tlsPicker.streams[before]!
    assert.deepEqual(s.protocolConfig, { request_body_mode: 4, response_body_mode: 0 }, 'FULL_DUPLEX_STREAMED request body, no response body')
    assert.equal(s.body.toString(), body)
    assert.equal(s.bodyChunks, 2, 'the body in 64 KiB chunks')
    assert.equal(s.headers[':path'], '/tls/v1/completions')
    assert.equal(s.subset, null, 'no subset hint unless asked')
    assert.equal(s.served, pod.host)
    assert.equal(s.responseHeaders![':status'], '200')
  }
})

test('the picker\'s certificate verified against tls.ca: served; against another CA: the picker fails (503)', async () => {
  const ok = await send('/tls-ca/x', { 'test-epp-endpoint-selection': pods[1]!.host })
  assert.equal(ok.echo!.name, 'pod-b')
  const wrong = await send('/tls-wrong-ca/x', { 'test-epp-endpoint-selection': pods[1]!.host })
  assert.equal(wrong.status, 503)
  assert.equal(wrong.text, 'endpoint picker unavailable')
})

test('without a steering header the picker round robins; a GET has no body to stream', async () => {
  const seen = new Set<string>()
  for (let i = 0; i < 6; i++) {
    const r = await send('/tls/rr')
    assert.equal(r.status, 200, r.text)
    seen.add(r.echo!.name)
  }
  assert.deepEqual([...seen].sort(), names)
})

test('a comma list is an ordered fallback list: the first pod down, the next one serves', async () => {
  const trace = await openTrace(admin, 'path=/tls/fallback')
  await trace.ready
  const r = await send('/tls/fallback', { 'test-epp-endpoint-selection': `${deadPod},${pods[1]!.host}`, 'test-picker-mode': 'verbatim' }, '{"model":"m"}')
  assert.equal(r.status, 200, r.text)
  assert.equal(r.echo!.name, 'pod-b')
  assert.equal(r.headers['x-conformance-test-served-endpoint'], pods[1]!.host)
  const events = (await trace.done).filter(e => e.message.type === 'inferencePick').map(e => e.message as Record<string, unknown>)
  assert.equal(events[0]!.outcome, 'picked')
  assert.equal(events[0]!.pool, 'llama')
  assert.equal(events[0]!.picker, tlsPicker.host)
  assert.equal(events[0]!.source, 'header')
  assert.deepEqual(events[0]!.endpoints, [deadPod, pods[1]!.host])
  assert.equal(typeof events[0]!.latencyMs, 'number')
  assert.equal(events[1]!.outcome, 'fallback')
  assert.equal(events[1]!.from, deadPod)
  assert.equal(events[1]!.endpoint, pods[1]!.host)
  assert.match(String(events[1]!.reason), /ECONNREFUSED/)
  // The access log line says the same.
  const output = await portico.waitForOutput(/"path":"\/tls\/fallback"/)
  const line = output.split('\n').find(l => l.includes('"path":"/tls/fallback"'))!
  assert.match(line, /"portico\.inference\.pool":"llama"/)
  assert.match(line, /"portico\.inference\.outcome":"picked"/)
  assert.match(line, new RegExp(`"portico\\.inference\\.endpoint":"${pods[1]!.host}"`))
  assert.match(line, new RegExp(`"portico\\.inference\\.fallbacks":"${deadPod}"`))
})

test('an endpoint outside the pool is refused and never connected to', async () => {
  const trace = await openTrace(admin, 'path=/tls/outside')
  await trace.ready
  const r = await send('/tls/outside', { 'test-epp-endpoint-selection': outside.host, 'test-picker-mode': 'verbatim' })
  assert.equal(r.status, 503)
  assert.equal(r.text, 'endpoint picker unavailable')
  const pick = (await trace.done).find(e => e.message.type === 'inferencePick')!.message as Record<string, unknown>
  assert.equal(pick.outcome, 'failClose')
  assert.match(String(pick.reason), new RegExp(`no endpoint of the pool in the list \\(refused: ${outside.host}\\)`))
  // In a list with an endpoint of the pool, the outside one is dropped (and traced).
  const mixed = await send('/tls/outside', { 'test-epp-endpoint-selection': `${outside.host},${pods[2]!.host}`, 'test-picker-mode': 'verbatim' })
  assert.equal(mixed.echo!.name, 'pod-c')
  assert.equal(outside.requests.length, 0, 'nothing reached the address outside the pool')
})

test('the subset hint lists the pool\'s endpoints; the picker picks among them', async () => {
  const before = plainPicker.streams.length
  const seen = new Set<string>()
  for (let i = 0; i < 4; i++) seen.add((await send('/plain/x')).echo!.name)
  assert.deepEqual([...seen].sort(), ['pod-a', 'pod-b'])
  assert.deepEqual(plainPicker.streams[before]!.subset, [pods[0]!.host, pods[1]!.host])
})

test('the pick in the envoy.lb metadata alone is followed', async () => {
  const r = await send('/tls/meta', { 'test-epp-endpoint-selection': pods[2]!.host, 'test-picker-mode': 'metadata-only' })
  assert.equal(r.echo!.name, 'pod-c')
})

test('a picker that asks for the response body (mode_override) gets it, and its body is the answer', async () => {
  const before = tlsPicker.streams.length
  const r = await send('/tls/usage', { 'test-epp-endpoint-selection': pods[0]!.host, 'test-picker-mode': 'response-body' }, '{"model":"m"}')
  assert.equal(r.status, 200)
  const echoed = tlsPicker.streams[before]!.responseBody!
  assert.equal(JSON.parse(echoed.toString()).name, 'pod-a')
  assert.equal(r.text, `seen by the picker: ${echoed.length} bytes`)
  // Streamed through the picker (it may change the length chunk by chunk): sent chunked.
  assert.equal(r.headers['content-length'], undefined)
  assert.equal(r.headers['x-conformance-test-served-endpoint'], pods[0]!.host)
})

/** A GET whose answer is read as it streams: the time each piece arrived (ms from the start); with `x-gated`, the pod's events paced by what arrived. */
async function streamed (path: string, headers: Record<string, string>): Promise<{ status: number, headers: http.IncomingHttpHeaders, pieces: Array<{ at: number, text: string }>, complete: boolean, ms: number }> {
  const started = Date.now()
  const gated = headers['x-gated'] !== undefined
  if (gated) sseEvents.reset()
  return await new Promise((resolve, reject) => {
    http.get(`${portico.url}${path}`, { headers }, res => {
      const pieces: Array<{ at: number, text: string }> = []
      const done = (): void => resolve({ status: res.statusCode ?? 0, headers: res.headers, pieces, complete: res.complete, ms: Date.now() - started })
      res.on('data', (c: Buffer) => {
        pieces.push({ at: Date.now() - started, text: c.toString('utf8') })
        if (gated) sseEvents.received(c.toString('utf8'))
      })
      res.on('end', done)
      // A response cut in the middle (the picker failed after the first byte).
      res.on('error', done)
      res.on('aborted', done)
    }).on('error', reject)
  })
}

test('an SSE answer through a picker that asks for the response body (FULL_DUPLEX_STREAMED, or STREAMED): chunk by chunk, the first event before the model server finished, each chunk changed by the picker', async () => {
  for (const [mode, protocol] of [['response-stream', 'full duplex'], ['response-streamed', 'streamed']] as const) {
    const before = plainPicker.streams.length
    const r = await streamed('/sse/v1/completions', { 'test-picker-mode': mode, 'x-gated': '1' })
    assert.equal(r.status, 200, mode)
    const text = r.pieces.map(p => p.text).join('')
    assert.equal(text, 'DATA: EVENT 1\n\nDATA: EVENT 2\n\nDATA: EVENT 3\n\n', `${protocol}: every chunk upper-cased by the picker`)
    // The order, not a time: the pod writes each event only once the client got the one before
    // (e2e/lib/gated-events.ts) — held whole, or each held until the next chunk, the log shows it.
    assert.deepEqual(sseEvents.log, inOrder(), protocol)
    assert.equal(r.headers['content-length'], undefined)
    assert.equal(r.headers['x-conformance-test-served-endpoint'], ssePod.host, `${protocol}: the picker's header mutation on the response`)
    const s = plainPicker.streams[before]!
    assert.equal(s.served, ssePod.host)
    assert.ok(s.responseChunks >= 3, `${protocol}: ${s.responseChunks} response_body messages`)
  }
})

test('a picker that never answers the response body it asked for: bounded by its timeout — 500 before the first byte; one that stops after the first chunk cuts the response', async () => {
  const trace = await openTrace(admin, 'path=/sse-hang/never')
  await trace.ready
  const hang = await streamed('/sse-hang/never', { 'test-picker-mode': 'response-hang' })
  assert.equal(hang.status, 500)
  assert.equal(hang.pieces.map(p => p.text).join(''), 'endpoint picker failed')
  // The pod ends at ~600 ms; the picker then has 500 ms to answer.
  assert.ok(hang.ms < 1800, `bounded: ${hang.ms} ms`)
  const warned = (await trace.done).filter(e => e.message.type === 'inferencePick' && e.message.reason !== undefined).map(e => String(e.message.reason))
  assert.ok(warned.some(w => /^response not processed by the picker: no answer within 500ms/.test(w)), warned.join(' | '))
  const stall = await streamed('/sse-hang/stall', { 'test-picker-mode': 'response-stall' })
  assert.equal(stall.status, 200)
  assert.equal(stall.complete, false, 'the response is cut, not ended as if whole')
  assert.ok(stall.pieces.map(p => p.text).join('').startsWith('DATA: EVENT 1'))
  assert.ok(stall.ms < 2000, `bounded: ${stall.ms} ms`)
})

test('the picker\'s immediate response is the answer (429 shed)', async () => {
  const r = await send('/tls/shed', { 'test-picker-mode': 'immediate' }, '{"model":"m"}')
  assert.equal(r.status, 429)
  assert.equal(r.text, 'shed by the picker')
})

test('steered to no pod of the picker\'s pool, the picker ends the stream with INTERNAL (as lwepp): 503 with FailClose', async () => {
  const trace = await openTrace(admin, 'path=/tls/nopod')
  await trace.ready
  const r = await send('/tls/nopod', { 'test-epp-endpoint-selection': outside.host }, '{"model":"m"}')
  assert.equal(r.status, 503)
  assert.equal(r.text, 'endpoint picker unavailable')
  const pick = (await trace.done).find(e => e.message.type === 'inferencePick')!.message as Record<string, unknown>
  assert.equal(pick.outcome, 'failClose')
  assert.match(String(pick.reason), /no endpoints available/)
  assert.equal(outside.requests.length, 0)
})

test('a body larger than one lwepp chunk comes back from the picker in 62,000-byte chunks and reaches the pod intact', async () => {
  const body = JSON.stringify({ model: 'm', prompt: 'y'.repeat(200_000) })
  const r = await send('/tls/big', { 'test-epp-endpoint-selection': pods[1]!.host }, body)
  assert.equal(r.status, 200, r.text)
  assert.equal(r.echo!.name, 'pod-b')
  assert.equal(r.echo!.bodySha256, sha256(body))
  assert.equal(r.echo!.headers['content-length'], String(Buffer.byteLength(body)))
})

test('huge and malformed header mutations, a missing pick and a picker error are the picker failing: 503 with FailClose', async () => {
  for (const mode of ['huge', 'malformed', 'none', 'error']) {
    const r = await send('/tls/bad', { 'test-epp-endpoint-selection': pods[0]!.host, 'test-picker-mode': mode })
    assert.equal(r.status, 503, mode)
    assert.equal(r.text, 'endpoint picker unavailable')
  }
})

test('a picker that never answers: 503 after the timeout, not later', async () => {
  const started = Date.now()
  const r = await send('/hang/x', { 'test-picker-mode': 'hang' }, '{"model":"m"}')
  assert.equal(r.status, 503)
  // Bounded, not timed: the picker never answers, so without the timeout this would wait for
  // ever; 10 s is far above the route's picker timeout yet far below a hang, even on a loaded machine.
  assert.ok(Date.now() - started < 10_000, `bounded wait (${Date.now() - started}ms)`)
})

test('picker down: FailClose answers 503; FailOpen serves from the pool round robin', async () => {
  const closed = await send('/down-close/x')
  assert.equal(closed.status, 503)
  assert.equal(closed.text, 'endpoint picker unavailable')
  const seen = new Set<string>()
  // Round robin per data-plane worker: with two workers one of them takes at least three of six.
  for (let i = 0; i < 6; i++) {
    const r = await send('/down-open/x', {}, '{"model":"m"}')
    assert.equal(r.status, 200, r.text)
    seen.add(r.echo!.name)
  }
  assert.deepEqual([...seen].sort(), names)
})

test('a body over the picker\'s limit: 413, the picker not asked', async () => {
  const before = plainPicker.streams.length
  const r = await send('/small/x', {}, 'x'.repeat(2048))
  assert.equal(r.status, 413)
  assert.equal(plainPicker.streams.length, before)
})

test('an h2c model server (appProtocol kubernetes.io/h2c)', async () => {
  const r = await send('/h2c/x', {}, '{"model":"m"}')
  assert.equal(r.status, 200, r.text)
  assert.equal(r.text, 'h2c pod over 2.0')
  assert.equal(r.headers['x-conformance-test-served-endpoint'], h2cEndpoint)
})

test('a reload that takes a pod out of the pool: the picker naming it is refused, the others still served', async () => {
  const before = portico.stdout.length
  portico.writeConfig(configFor(portico.port, [pods[1]!.host, pods[2]!.host]) as never)
  await portico.waitForOutput('config reloaded', { fromStdout: before })
  const gone = await send('/tls/reload', { 'test-epp-endpoint-selection': pods[0]!.host })
  assert.equal(gone.status, 503)
  assert.equal((await send('/tls/reload', { 'test-epp-endpoint-selection': pods[2]!.host })).echo!.name, 'pod-c')
  const back = portico.stdout.length
  portico.writeConfig(configFor(portico.port) as never)
  await portico.waitForOutput('config reloaded', { fromStdout: back })
})

test('metrics: picker calls by outcome, its latency, picks per endpoint, fallbacks', async () => {
  const text = await (await fetch(`${stats}/metrics`)).text()
  assert.match(text, /portico_inference_picker_calls_total\{pool="llama",outcome="picked"\} \d+/)
  assert.match(text, /portico_inference_picker_calls_total\{pool="down-close",outcome="failClose"\} 1/)
  assert.match(text, /portico_inference_picker_calls_total\{pool="down-open",outcome="failOpen"\} 6/)
  assert.match(text, /portico_inference_picker_calls_total\{pool="llama",outcome="immediate"\} 1/)
  assert.match(text, /portico_inference_picker_duration_seconds_count\{pool="llama"\} \d+/)
  assert.match(text, new RegExp(`portico_inference_picks_total\\{pool="llama",endpoint="${pods[1]!.host}"\\} \\d+`))
  assert.match(text, new RegExp(`portico_inference_fallbacks_total\\{pool="llama",endpoint="${deadPod}"\\} 1`))
})
