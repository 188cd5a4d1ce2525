/**
 * The ext_proc client's gRPC transport (packages/engine/src/traffic/grpc-stream-channel.ts)
 * against a real HTTP/2 server on loopback (node:http2, speaking gRPC's wire format by hand so
 * each test can break it its own way): messages split and joined across DATA frames, the
 * status from trailers, trailers-only answers, HTTP errors, resets, an oversized message, an
 * unreachable service, cancel, half-close, the initial metadata, and one connection for many
 * calls (a new one after the server went away); pick_first over several addresses (the first
 * refusing, the serving one going away, all of them down, a call cancelled while connecting).
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import * as http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { framed, GrpcStreamChannel, type GrpcStatus } from '@portico/engine/grpc-stream-channel'
import { waitUntil } from '@portico/testkit/wait'

const raw = { frame: (b: Buffer) => framed(b), decode: (b: Buffer) => Buffer.from(b) }
let server: http2.Http2Server
let port: number
let sessions = 0
const seenSessions = new Set<http2.ServerHttp2Session>()
const seen: Array<{ path: string, metadata: string | undefined, ended: boolean, reset: boolean }> = []

/** The server's behaviour, by the call's `x-case` header. */
function handle (s: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
  const record = { path: String(headers[':path']), metadata: headers['x-meta'] as string | undefined, ended: false, reset: false }
  seen.push(record)
  s.on('end', () => { record.ended = true })
  s.on('aborted', () => { record.reset = true })
  s.on('close', () => { if (s.rstCode !== 0) record.reset = true })
  s.on('error', () => {})
  const ok = () => s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
  switch (headers['x-case']) {
    case 'split': {
      ok()
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }))
      const all = Buffer.concat([framed(Buffer.from('one')), framed(Buffer.alloc(0)), framed(Buffer.alloc(70_000, 7))])
      // Byte by byte at first (the 5-byte prefix split too), then in uneven pieces.
      let at = 0
      const step = (): void => {
        if (at >= all.length) {
          s.end()
          return
        }
        const n = at < 12 ? 1 : 9_999
        s.write(all.subarray(at, at + n), step)
        at += n
      }
      step()
      break
    }
    case 'echo':
      ok()
      s.on('data', (chunk: Buffer) => s.write(chunk))
      s.on('end', () => {
        s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }))
        s.end()
      })
      break
    case 'error':
      ok()
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '13', 'grpc-message': encodeURIComponent('processor broke: 100%') }))
      s.end(framed(Buffer.from('last words')))
      break
    case 'trailers-only':
      s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'busy' }, { endStream: true })
      break
    case 'http-404':
      s.respond({ ':status': 404 }, { endStream: true })
      break
    case 'reset':
      ok()
      s.write(framed(Buffer.from('before the reset')), () => s.close(http2.constants.NGHTTP2_INTERNAL_ERROR))
      break
    case 'huge':
      ok()
      s.write(Buffer.from([0, 0x7f, 0xff, 0xff, 0xff]))
      break
    case 'silent':
      ok()
      break
  }
}

before(async () => {
  server = http2.createServer()
  server.on('session', session => {
    sessions++
    seenSessions.add(session)
    session.on('close', () => seenSessions.delete(session))
  })
  server.on('stream', handle)
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})

after(() => new Promise<void>(resolve => server.close(() => resolve())))

interface Outcome { messages: Buffer[], status: GrpcStatus | null }

/** One call: `send` written, then half-closed unless `keepOpen`; resolves with what came back. */
function call (channel: GrpcStreamChannel<Buffer, Buffer>, which: string, send: Buffer[] = [], options: { keepOpen?: boolean, cancelAfter?: number, tag?: string } = {}): Promise<Outcome> {
  return new Promise(resolve => {
    const messages: Buffer[] = []
    const c = channel.call({ 'x-case': which, 'x-meta': options.tag ?? `meta-${which}` }, {
      message: m => messages.push(m),
      drain: () => {},
      end: status => resolve({ messages, status })
    })
    for (const m of send) c.write(m)
    if (options.cancelAfter !== undefined) setTimeout(() => c.cancel(), options.cancelAfter)
    else if (options.keepOpen !== true) c.end()
  })
}

const channelFor = (p = port, maxReceiveBytes?: number) => new GrpcStreamChannel<Buffer, Buffer>({ target: `127.0.0.1:${p}`, tls: null, userAgent: 'portico-test', ...(maxReceiveBytes !== undefined ? { maxReceiveBytes } : {}) }, '/test.Svc/Stream', raw)

test('messages split byte by byte and across frames arrive whole and in order; status OK ends the call', async () => {
  const channel = channelFor()
  const out = await call(channel, 'split', [], { keepOpen: true })
  assert.equal(out.status, null)
  assert.deepEqual(out.messages.map(m => m.length), [3, 0, 70_000])
  assert.equal(out.messages[0]!.toString(), 'one')
  assert.ok(out.messages[2]!.every(b => b === 7))
  // The service ended the call: the client's side was ended too, not reset.
  const rec = seen.find(r => r.metadata === 'meta-split')!
  assert.equal(rec.reset, false)
  channel.close()
})

test('a call\'s messages reach the service with its metadata; half-close is the service\'s end of input', async () => {
  const channel = channelFor()
  const out = await call(channel, 'echo', [Buffer.from('a'), Buffer.alloc(100_000, 1), Buffer.from('c')])
  assert.equal(out.status, null)
  assert.deepEqual(out.messages.map(m => m.length), [1, 100_000, 1])
  const rec = seen.find(r => r.metadata === 'meta-echo')!
  assert.equal(rec.path, '/test.Svc/Stream')
  assert.equal(rec.ended, true)
  channel.close()
})

test('statuses: trailers (grpc-message percent-decoded), trailers-only, HTTP 404, RST_STREAM', async () => {
  const channel = channelFor()
  const error = await call(channel, 'error')
  assert.deepEqual(error.status, { code: 13, details: 'processor broke: 100%' })
  assert.deepEqual(error.messages.map(String), ['last words'])
  assert.deepEqual((await call(channel, 'trailers-only')).status, { code: 14, details: 'busy' })
  assert.deepEqual((await call(channel, 'http-404')).status, { code: 12, details: 'Received HTTP status code 404' })
  const reset = await call(channel, 'reset', [], { keepOpen: true })
  assert.deepEqual(reset.status, { code: 13, details: 'Received RST_STREAM with code 2' })
  channel.close()
})

test('a message larger than maxReceiveBytes fails the call (RESOURCE_EXHAUSTED) before it is held, and resets the stream', async () => {
  const channel = channelFor(port, 1024)
  const out = await call(channel, 'huge', [], { keepOpen: true })
  assert.equal(out.status?.code, 8)
  assert.match(out.status!.details, /larger than max \(2147483647 vs\. 1024\)/)
  channel.close()
})

test('cancel: CANCELLED, and the service sees the stream reset', async () => {
  const channel = channelFor()
  const out = await call(channel, 'silent', [Buffer.from('x')], { cancelAfter: 50 })
  assert.deepEqual(out.status, { code: 1, details: 'Cancelled on client' })
  for (let i = 0; i < 50 && seen.find(r => r.metadata === 'meta-silent')?.reset !== true; i++) await new Promise(resolve => setTimeout(resolve, 10))
  assert.equal(seen.find(r => r.metadata === 'meta-silent')!.reset, true)
  channel.close()
})

test('an unreachable service: UNAVAILABLE at once, the next calls too for a second, then it is tried again', async () => {
  const dead = http2.createServer()
  await new Promise<void>(resolve => dead.listen(0, '127.0.0.1', resolve))
  const deadPort = (dead.address() as AddressInfo).port
  await new Promise<void>(resolve => dead.close(() => resolve()))
  const channel = channelFor(deadPort)
  const out = await call(channel, 'echo')
  assert.equal(out.status?.code, 14)
  assert.match(out.status!.details, /ECONNREFUSED/)
  // The service comes back at once, but the channel waits out its second before connecting again.
  const back = http2.createServer()
  let backSessions = 0
  back.on('session', () => { backSessions++ })
  back.on('stream', handle)
  await new Promise<void>(resolve => back.listen(deadPort, '127.0.0.1', resolve))
  const soon = await call(channel, 'echo')
  assert.equal(soon.status?.code, 14)
  assert.match(soon.status!.details, /ECONNREFUSED/)
  assert.equal(backSessions, 0)
  await new Promise(resolve => setTimeout(resolve, 1100))
  const later = await call(channel, 'echo', [Buffer.from('back')])
  assert.equal(later.status, null)
  assert.deepEqual(later.messages.map(String), ['back'])
  assert.equal(backSessions, 1)
  channel.close()
  await new Promise<void>(resolve => back.close(() => resolve()))
})

test('one connection serves many calls at once; after the service drops it, the next call opens another', async () => {
  const channel = channelFor()
  const before = sessions
  const outs = await Promise.all(Array.from({ length: 50 }, (_, i) => call(channel, 'echo', [Buffer.from(String(i))])))
  assert.ok(outs.every((o, i) => o.status === null && o.messages[0]!.toString() === String(i)))
  assert.equal(sessions - before, 1)
  // The server sends GOAWAY on every session: the channel's next call opens a new connection.
  for (const session of seenSessions) session.goaway()
  // Node closes a client session once its GOAWAY arrives.
  await waitUntil(() => channel.connectedTarget === null, 5_000, 'the channel to see the GOAWAY')
  const again = await call(channel, 'echo', [Buffer.from('again')])
  assert.equal(again.status, null)
  assert.deepEqual(again.messages.map(String), ['again'])
  assert.equal(sessions - before, 2)
  channel.close()
})


/** A server of its own (the `handle` behaviours), counting the streams it served. */
interface Served { server: http2.Http2Server, port: number, streams: number, connections: number, sessions: Set<http2.ServerHttp2Session>, stop (): Promise<void> }

async function serve (at = 0): Promise<Served> {
  const server = http2.createServer()
  const served: Served = {
    server,
    port: 0,
    streams: 0,
    connections: 0,
    sessions: new Set(),
    // Gone for good: its connections cut, nothing listening.
    stop: () => new Promise<void>(resolve => {
      for (const session of served.sessions) session.destroy()
      server.close(() => resolve())
    })
  }
  server.on('session', session => {
    served.connections++
    served.sessions.add(session)
    session.on('close', () => served.sessions.delete(session))
  })
  server.on('stream', (s, headers) => {
    served.streams++
    handle(s, headers)
  })
  await new Promise<void>(resolve => server.listen(at, '127.0.0.1', resolve))
  served.port = (server.address() as AddressInfo).port
  return served
}

/** Waits (bounded) for `done`. */
async function until (done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise(resolve => setTimeout(resolve, 10))
  assert.ok(done())
}

/** A loopback port nothing listens on (connections to it are refused). */
async function deadPort (): Promise<number> {
  const s = await serve()
  await s.stop()
  return s.port
}

const pickFirst = (ports: number[]) => new GrpcStreamChannel<Buffer, Buffer>({
  target: `127.0.0.1:${ports[0]}`,
  fallbackTargets: ports.slice(1).map(p => `127.0.0.1:${p}`),
  tls: null,
  userAgent: 'portico-test'
}, '/test.Svc/Stream', raw)

test('pick_first: the first address refuses, the second serves — every call succeeds, the first ones too, their messages held until then', async () => {
  const dead = await deadPort()
  const live = await serve()
  const channel = pickFirst([dead, live.port])
  // All started before any connection is up: they wait for the walk, not fail on the refusal.
  const outs = await Promise.all(Array.from({ length: 5 }, (_, i) => call(channel, 'echo', [Buffer.from(`m${i}`), Buffer.from(`n${i}`)])))
  assert.deepEqual(outs.map(o => o.status), [null, null, null, null, null])
  assert.deepEqual(outs.map(o => o.messages.map(String)), Array.from({ length: 5 }, (_, i) => [`m${i}`, `n${i}`]))
  // A message and the half-close written after the call started, still before the connection is up.
  const late = await new Promise<Outcome>(resolve => {
    const messages: Buffer[] = []
    const fresh = pickFirst([dead, live.port])
    const c = fresh.call({ 'x-case': 'echo' }, { message: m => messages.push(m), drain: () => {}, end: status => { fresh.close(); resolve({ messages, status }) } })
    c.write(Buffer.from('first'))
    process.nextTick(() => {
      c.write(Buffer.from('second'))
      c.end()
    })
  })
  assert.equal(late.status, null)
  assert.deepEqual(late.messages.map(String), ['first', 'second'])
  // One connection (sticky) served the first channel's calls; the next calls go to it at once.
  const again = await call(channel, 'echo', [Buffer.from('again')])
  assert.deepEqual(again.messages.map(String), ['again'])
  assert.equal(live.streams, 7)
  assert.equal(live.connections, 2)
  channel.close()
  await live.stop()
})

test('pick_first: the address serving goes away — the next calls go to the next one; a new walk starts from the first again', async () => {
  const a = await serve()
  const b = await serve()
  const channel = pickFirst([a.port, b.port])
  assert.equal((await call(channel, 'echo', [Buffer.from('to a')])).status, null)
  assert.equal((await call(channel, 'echo', [Buffer.from('to a')])).status, null)
  assert.deepEqual([a.streams, b.streams], [2, 0])
  // a is killed (its connection cut, its port refusing): the walk passes it and lands on b.
  assert.equal(channel.connectedTarget, `127.0.0.1:${a.port}`)
  await a.stop()
  // (A call made before the channel saw the connection end would go to the dying one.)
  await until(() => channel.connectedTarget === null)
  for (let i = 0; i < 5; i++) {
    const out = await call(channel, 'echo', [Buffer.from(`to b ${i}`)])
    assert.equal(out.status, null)
    assert.deepEqual(out.messages.map(String), [`to b ${i}`])
  }
  assert.equal(b.streams, 5)
  assert.equal(b.connections, 1)
  assert.equal(channel.connectedTarget, `127.0.0.1:${b.port}`)
  // a is back and b sends GOAWAY: the next connection walks from the start, so a serves again.
  const a2 = await serve(a.port)
  for (const session of b.sessions) session.goaway()
  await until(() => channel.connectedTarget === null)
  const back = await call(channel, 'echo', [Buffer.from('to a again')])
  assert.equal(back.status, null)
  assert.deepEqual([a2.streams, b.streams], [1, 5])
  channel.close()
  await Promise.all([a2.stop(), b.stop()])
})

test('pick_first: every address down — the queued calls fail UNAVAILABLE naming the last error, and calls fail at once for a second', async () => {
  const first = await deadPort()
  const last = await deadPort()
  const channel = pickFirst([first, last])
  const outs = await Promise.all([call(channel, 'echo'), call(channel, 'echo', [Buffer.from('x')]), call(channel, 'silent', [], { keepOpen: true })])
  for (const out of outs) {
    assert.equal(out.status?.code, 14)
    assert.equal(out.status?.details, `No connection established. Last error: connect ECONNREFUSED 127.0.0.1:${last}`)
  }
  // Fail-fast: with both addresses listening again, a call within the second is not even tried.
  const up = await Promise.all([serve(first), serve(last)])
  const soon = await call(channel, 'echo')
  assert.equal(soon.status?.code, 14)
  assert.match(soon.status!.details, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${last}`))
  assert.deepEqual(up.map(s => s.sessions.size + s.streams), [0, 0])
  await new Promise(resolve => setTimeout(resolve, 1100))
  const later = await call(channel, 'echo', [Buffer.from('up')])
  assert.equal(later.status, null)
  assert.deepEqual(up.map(s => s.streams), [1, 0])
  channel.close()
  await Promise.all(up.map(s => s.stop()))
})

test('pick_first: a call cancelled while the channel connects ends CANCELLED and never reaches the service; the others start', async () => {
  const dead = await deadPort()
  const live = await serve()
  const channel = pickFirst([dead, live.port])
  const cancelled = new Promise<GrpcStatus | null>(resolve => {
    const c = channel.call({ 'x-case': 'echo', 'x-meta': 'queued-cancelled' }, { message: () => {}, drain: () => {}, end: resolve })
    c.write(Buffer.from('never sent'))
    c.cancel()
    // After the cancel: no effect.
    c.write(Buffer.from('nor this'))
    c.end()
  })
  const other = call(channel, 'echo', [Buffer.from('served')], { tag: 'queued-served' })
  assert.deepEqual(await cancelled, { code: 1, details: 'Cancelled on client' })
  const out = await other
  assert.equal(out.status, null)
  assert.deepEqual(out.messages.map(String), ['served'])
  assert.equal(live.streams, 1)
  assert.equal(seen.some(r => r.metadata === 'queued-cancelled'), false)
  assert.equal(seen.some(r => r.metadata === 'queued-served'), true)
  channel.close()
  await live.stop()
})

test('closing the channel while it connects fails the queued calls (UNAVAILABLE)', async () => {
  const live = await serve()
  const channel = pickFirst([live.port])
  const out = call(channel, 'echo', [Buffer.from('x')])
  channel.close()
  assert.deepEqual((await out).status, { code: 14, details: 'Channel has been shut down' })
  await live.stop()
})
