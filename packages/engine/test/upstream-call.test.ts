/**
 * http/upstream-call.ts in-process: the backend call with a hand-made request state and
 * hooks, against real node:http servers — the pipeline's hooks run at the head, failures
 * become the proxy's own answer, the optional handlers wrap the base one in their order and
 * only when asked, and a traced call emits its start/result span and body snapshots.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool, request, type Dispatcher } from 'undici'
import { callUpstream, type CallOptions, type UpstreamRuntime } from '../src/http/upstream-call.ts'
import type { CallContext, UpstreamHooks } from '../src/http/call-context.ts'
import type { BackendIR } from '../src/ir/types.ts'
import { TraceRecorder } from '../src/trace/recorder.ts'
import type { TraceEvent } from '../src/trace/events.ts'

let backend: http.Server
let backendPort: number
let front: http.Server
let frontUrl: string
const pools = new Map<string, Pool>()

/** What each front request does with its (req, res): set per test. */
let onFront: (req: http.IncomingMessage, res: http.ServerResponse) => void

before(async () => {
  backend = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c)).on('end', () => {
      res.writeHead(req.url === '/teapot' ? 418 : 200, { 'content-type': 'text/plain', 'x-backend': 'yes' })
      res.end(`backend saw ${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`)
    })
  })
  await new Promise<void>(resolve => backend.listen(0, '127.0.0.1', resolve))
  backendPort = (backend.address() as AddressInfo).port
  front = http.createServer((req, res) => onFront(req, res))
  await new Promise<void>(resolve => front.listen(0, '127.0.0.1', resolve))
  frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`
})

after(async () => {
  for (const p of pools.values()) await p.close()
  await new Promise<void>(resolve => backend.close(() => resolve()))
  await new Promise<void>(resolve => front.close(() => resolve()))
})

function backendIR (port: number, endpoints = 1): BackendIR {
  return { key: `b${port}`, name: `b${port}`, target: `127.0.0.1:${port}`, kind: 'static', endpoints: Array.from({ length: endpoints }, () => ({ host: '127.0.0.1', port })) } as unknown as BackendIR
}

const rt: UpstreamRuntime = {
  traceBodyLimit: 8,
  pools: {
    hasHealthyEndpoint: () => true,
    get: (b: BackendIR) => {
      let p = pools.get(b.key)
      if (p === undefined) pools.set(b.key, p = new Pool(`http://${b.target}`))
      return p
    }
  } as unknown as UpstreamRuntime['pools']
}

function contextFor (req: http.IncomingMessage, res: http.ServerResponse, backend: BackendIR, tracer: TraceRecorder | null = null): CallContext {
  return {
    req,
    grpc: null,
    res,
    method: req.method!,
    pathAndQuery: req.url!,
    startMono: performance.now(),
    listener: { frontend: { requestBodyIdleTimeoutMs: 0, requestBodyMinRate: 0, backendRequestTimeoutMs: 0, streamIdleTimeoutMs: 0 } },
    route: null,
    backend,
    headers: { host: backend.target },
    upgrade: null,
    upgraded: false,
    status: 0,
    reason: '',
    error: null,
    responseHeaders: {},
    responseBody: null,
    requestBody: null,
    upstreamStart: 0,
    upstreamHeadersAt: 0,
    responseBytes: 0,
    abortUpstream: null,
    done: false,
    responseInterceptors: null,
    tracer,
    backendCallStartUs: 0,
    span: null,
    callSpan: null
  }
}

/** Hooks that record what the pipeline would have been asked to do. */
function recordingHooks (log: string[]): UpstreamHooks<UpstreamRuntime, CallContext> {
  return {
    respondLocal (_rt, ctx, status, body, reason, error) {
      log.push(`respondLocal ${status} ${reason} ${error ?? ''}`)
      ctx.status = status
      ctx.res.writeHead(status, { 'content-type': 'text/plain' }).end(body)
    },
    responseHead (_rt, ctx) {
      log.push(`responseHead ${ctx.status}`)
      ctx.responseHeaders['x-policy'] = 'applied'
    },
    upgradeHead () { log.push('upgradeHead') }
  }
}

/** A handler wrapper that logs the calls it sees, under `name`. */
function spy (name: string, log: string[]) {
  return (inner: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler => ({
    onRequestStart: (c, x) => inner.onRequestStart?.(c, x),
    onResponseStart: (c, s, h, m) => { log.push(`${name} start ${s}`); inner.onResponseStart?.(c, s, h, m) },
    onResponseData: (c, d) => inner.onResponseData?.(c, d),
    onResponseEnd: (c, t) => { log.push(`${name} end`); inner.onResponseEnd?.(c, t) },
    onResponseError: (c, e) => { log.push(`${name} error`); inner.onResponseError?.(c, e) }
  })
}

test('a plain call: the head goes through the pipeline hook, the body streams to the client', async () => {
  const log: string[] = []
  onFront = (req, res) => callUpstream(rt, contextFor(req, res, backendIR(backendPort)), recordingHooks(log))
  const res = await request(`${frontUrl}/hello`, { method: 'POST', body: 'ping' })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['x-backend'], 'yes')
  assert.equal(res.headers['x-policy'], 'applied', 'headers as the response policies left them')
  assert.equal(await res.body.text(), 'backend saw POST /hello ping')
  assert.deepEqual(log, ['responseHead 200'])
})

test('failures become the proxy\'s own answer through the hook: no endpoints, a refused connection', async () => {
  const log: string[] = []
  onFront = (req, res) => callUpstream(rt, contextFor(req, res, backendIR(backendPort, 0)), recordingHooks(log))
  const none = await request(`${frontUrl}/x`)
  assert.equal(none.statusCode, 503)
  await none.body.text()
  const closed = http.createServer()
  await new Promise<void>(resolve => closed.listen(0, '127.0.0.1', resolve))
  const deadPort = (closed.address() as AddressInfo).port
  await new Promise<void>(resolve => closed.close(() => resolve()))
  onFront = (req, res) => callUpstream(rt, contextFor(req, res, backendIR(deadPort)), recordingHooks(log))
  const refused = await request(`${frontUrl}/x`)
  assert.equal(refused.statusCode, 503)
  await refused.body.text()
  assert.match(log[0]!, /^respondLocal 503 NoHealthyBackend backend .* has no ready endpoints$/)
  assert.match(log[1]!, /^respondLocal 503 UpstreamFailure ECONNREFUSED/)
  assert.equal(log.length, 2)
})

test('optional handlers compose: outer sees the raw answer first, inner wraps the base handler', async () => {
  const log: string[] = []
  const options: CallOptions<CallContext> = {
    inner: spy('inner', log),
    outer: (handler, release) => { log.push(`outer wraps (release is ${typeof release})`); return spy('outer', log)(handler) }
  }
  onFront = (req, res) => callUpstream(rt, contextFor(req, res, backendIR(backendPort)), recordingHooks(log), options)
  const res = await request(`${frontUrl}/teapot`)
  assert.equal(res.statusCode, 418)
  await res.body.text()
  assert.deepEqual(log, ['outer wraps (release is function)', 'outer start 418', 'inner start 418', 'responseHead 418', 'outer end', 'inner end'])
})

test('a traced call: backendCallStart, a backendCallResult spanning from it, body snapshots capped at the limit', async () => {
  const events: TraceEvent[] = []
  const tracer = new TraceRecorder()
  tracer.attach(e => events.push(e))
  let calledAt = -1
  onFront = (req, res) => {
    calledAt = tracer.now()
    callUpstream(rt, contextFor(req, res, backendIR(backendPort), tracer), recordingHooks([]))
  }
  const res = await request(`${frontUrl}/traced`, { method: 'POST', body: 'a request body' })
  await res.body.text()
  const types = events.map(e => e.message.type === 'bodySnapshot' ? `bodySnapshot:${e.message.stage}` : e.message.type)
  assert.deepEqual(types, ['backendCallStart', 'bodySnapshot:final request', 'backendCallResult', 'bodySnapshot:response'])
  const start = events[0]!
  const result = events[2]!
  assert.deepEqual(start.message, { type: 'backendCallStart', target: `127.0.0.1:${backendPort}` })
  assert.deepEqual(result.message, { type: 'backendCallResult', status: 200, error: null })
  // The span starts when the call starts: after callUpstream is entered, no later than its
  // start event is stamped (ordered on the recorder's own clock, not a time window: a loaded
  // machine may take any time between the two).
  assert.ok(result.eventStart !== null && calledAt <= result.eventStart && result.eventStart <= start.eventEnd, `the result spans from its call's start (called ${calledAt}, span ${result.eventStart}, start event ${start.eventEnd})`)
  const reqBody = events[1]!.message as { body: string, truncated: boolean }
  assert.equal(Buffer.from(reqBody.body, 'base64').toString(), 'a reques')
  assert.equal(reqBody.truncated, true)
})
