/**
 * gRPC through Portico: the official @grpc/grpc-js client (h2c with prior knowledge to
 * Portico's HTTP listener) and server behind a plain `host:` backend. Portico sees
 * `content-type: application/grpc` and calls the backend over HTTP/2 (h2c) on a pool of its
 * own, and passes trailers (grpc-status, grpc-message, trailing metadata) back: unary calls,
 * errors with their status and message, the three streaming kinds, and large messages.
 * Routes match gRPC methods (`matches[].grpc`); the gateway's own refusals are gRPC statuses,
 * and grpc-timeout is a deadline at the gateway too.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import * as grpc from '@grpc/grpc-js'
import { request } from 'undici'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'

/** Messages are raw bytes: no protobuf needed to test the transport. */
const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b }
const method = (path: string, requestStream: boolean, responseStream: boolean) => ({
  path, requestStream, responseStream, requestSerialize: raw.serialize, requestDeserialize: raw.deserialize, responseSerialize: raw.serialize, responseDeserialize: raw.deserialize
})
const SERVICE: grpc.ServiceDefinition = {
  Echo: method('/test.Echo/Echo', false, false),
  Fail: method('/test.Echo/Fail', false, false),
  Count: method('/test.Echo/Count', false, true),
  Sum: method('/test.Echo/Sum', true, false),
  Chat: method('/test.Echo/Chat', true, true),
  Slow: method('/test.Echo/Slow', false, false)
}
/** The same methods under other service names, each routed to a route that refuses or fails in its own way. */
const serviceAt = (name: string): grpc.ServiceDefinition => Object.fromEntries(Object.entries(SERVICE).map(([k, m]) => [k, { ...m, path: m.path.replace('/test.Echo/', `/${name}/`) }]))

let server: grpc.Server
let portico: PorticoProcess
let client: grpc.Client & Record<string, (...args: unknown[]) => unknown>

before(async () => {
  server = new grpc.Server()
  server.addService(SERVICE, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const trailer = new grpc.Metadata()
      trailer.set('x-echo-trailer', 'kept')
      cb(null, call.request, trailer)
    },
    Fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' } as grpc.ServiceError)
    },
    Count: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      for (let i = 1; i <= 3; i++) call.write(Buffer.from(String(i)))
      call.end()
    },
    Sum: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      let total = 0
      call.on('data', (b: Buffer) => { total += Number(b.toString()) })
      call.on('end', () => cb(null, Buffer.from(String(total))))
    },
    Chat: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (b: Buffer) => call.write(Buffer.from(`re: ${b.toString()}`)))
      call.on('end', () => call.end())
    },
    Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      setTimeout(() => cb(null, call.request), 1000)
    }
  })
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => err !== null ? reject(err) : resolve(p)))
  portico = await startPortico({
    config: listen => ({
      gateways: { default: { port: listen, address: '127.0.0.1' } },
      routes: [
        // gRPC method matches (GRPCRoute semantics): the whole service, and one method of it with a timeout.
        { name: 'grpc', matches: [{ grpc: { service: 'test.Echo' } }], backends: [{ host: `127.0.0.1:${port}` }] },
        { name: 'slow', matches: [{ grpc: { service: 'test.Echo', method: 'Slow' } }], backends: [{ host: `127.0.0.1:${port}` }], policies: { timeout: { requestTimeout: '300ms' } } },
        { name: 'keyed', matches: [{ path: { pathPrefix: '/keyed.Echo/' } }], backends: [{ host: `127.0.0.1:${port}` }], policies: { apiKey: { keys: [{ key: 'grpc-key-0123456789' }] } } },
        { name: 'limited', matches: [{ path: { pathPrefix: '/limited.Echo/' } }], backends: [{ host: `127.0.0.1:${port}` }], policies: { localRateLimit: [{ maxTokens: 1, tokensPerFill: 1, fillInterval: '1h' }] } },
        { name: 'down', matches: [{ path: { pathPrefix: '/down.Echo/' } }], backends: [{ host: '127.0.0.1:1' }] }
      ]
    })
  })
  const Client = grpc.makeGenericClientConstructor(SERVICE, 'Echo')
  client = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as typeof client
})

after(async () => {
  client?.close()
  await portico?.stop()
  await new Promise<void>(resolve => server ? server.tryShutdown(() => resolve()) : resolve())
})

function unary (name: string, request: Buffer): Promise<{ response: Buffer, trailers: grpc.Metadata }> {
  return new Promise((resolve, reject) => {
    let trailers = new grpc.Metadata()
    const call = (client[name] as (req: Buffer, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => grpc.ClientUnaryCall)(request, (err, response) => {
      if (err !== null) reject(err)
      else setImmediate(() => resolve({ response, trailers }))
    })
    call.on('status', (s: grpc.StatusObject) => { trailers = s.metadata })
  })
}

test('a unary call goes through, with its trailing metadata', async () => {
  const { response, trailers } = await unary('Echo', Buffer.from('hello'))
  assert.equal(response.toString(), 'hello')
  assert.deepEqual(trailers.get('x-echo-trailer'), ['kept'])
})

test('an error keeps its gRPC status and message (trailers)', async () => {
  await assert.rejects(unary('Fail', Buffer.from('x')), (err: grpc.ServiceError) => {
    assert.equal(err.code, grpc.status.NOT_FOUND, err.details)
    assert.equal(err.details, 'no such thing')
    return true
  })
})

test('a 1 MiB message each way', async () => {
  const big = Buffer.alloc(1024 * 1024, 7)
  for (let i = 0; i < 20; i++) {
    const { response } = await unary('Echo', big)
    assert.equal(response.length, big.length)
    assert.ok(response.equals(big))
  }
})

test('server streaming, client streaming and bidi streaming', async () => {
  const counted = await new Promise<string[]>((resolve, reject) => {
    const got: string[] = []
    const call = (client.Count as (req: Buffer) => grpc.ClientReadableStream<Buffer>)(Buffer.alloc(0))
    call.on('data', (b: Buffer) => got.push(b.toString()))
    call.on('end', () => resolve(got))
    call.on('error', reject)
  })
  assert.deepEqual(counted, ['1', '2', '3'])

  const sum = await new Promise<string>((resolve, reject) => {
    const call = (client.Sum as (cb: (err: grpc.ServiceError | null, res: Buffer) => void) => grpc.ClientWritableStream<Buffer>)((err, res) => err !== null ? reject(err) : resolve(res.toString()))
    for (const n of [1, 2, 3, 4]) call.write(Buffer.from(String(n)))
    call.end()
  })
  assert.equal(sum, '10')

  const replies = await new Promise<string[]>((resolve, reject) => {
    const got: string[] = []
    const call = (client.Chat as () => grpc.ClientDuplexStream<Buffer, Buffer>)()
    call.on('data', (b: Buffer) => {
      got.push(b.toString())
      if (got.length === 2) call.end()
    })
    call.on('end', () => resolve(got))
    call.on('error', reject)
    call.write(Buffer.from('a'))
    call.write(Buffer.from('b'))
  })
  assert.deepEqual(replies, ['re: a', 're: b'])
})

test('many concurrent unary calls share the HTTP/2 connections', async () => {
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => unary('Echo', Buffer.from(`m${i}`))))
  assert.deepEqual(results.map(r => r.response.toString()), Array.from({ length: 50 }, (_, i) => `m${i}`))
})

function callAt (service: string, name: string, metadata = new grpc.Metadata()): Promise<Buffer> {
  const Client = grpc.makeGenericClientConstructor(serviceAt(service), service)
  const c = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as unknown as Record<string, (req: Buffer, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => void> & grpc.Client
  return new Promise<Buffer>((resolve, reject) => c[name]!(Buffer.from('x'), metadata, (err, res) => err !== null ? reject(err) : resolve(res))).finally(() => c.close())
}

async function statusOf (p: Promise<unknown>): Promise<{ code: number, details: string }> {
  try {
    await p
    return { code: grpc.status.OK, details: '' }
  } catch (err) {
    return { code: (err as grpc.ServiceError).code, details: (err as grpc.ServiceError).details }
  }
}

test('the gateway\'s own refusals reach gRPC clients as gRPC statuses', async () => {
  // No route for the service: UNIMPLEMENTED.
  assert.equal((await statusOf(callAt('nowhere.Echo', 'Echo'))).code, grpc.status.UNIMPLEMENTED)
  // No API key: UNAUTHENTICATED; with it, the call goes through.
  assert.equal((await statusOf(callAt('keyed.Echo', 'Echo'))).code, grpc.status.UNAUTHENTICATED)
  const md = new grpc.Metadata()
  md.set('authorization', 'Bearer grpc-key-0123456789')
  assert.equal((await statusOf(callAt('keyed.Echo', 'Echo', md))).code, grpc.status.UNIMPLEMENTED, 'the backend has no keyed.Echo service: its own status comes back')
  // Rate limited: RESOURCE_EXHAUSTED after the one token.
  await statusOf(callAt('limited.Echo', 'Echo'))
  assert.equal((await statusOf(callAt('limited.Echo', 'Echo'))).code, grpc.status.RESOURCE_EXHAUSTED)
  // Backend down: UNAVAILABLE, with the gateway's reason as the message.
  const down = await statusOf(callAt('down.Echo', 'Echo'))
  assert.equal(down.code, grpc.status.UNAVAILABLE)
  // grpc-message is percent-encoded as the gRPC spec says (only non-printable bytes and %), so
  // grpc-js, which decodes with decodeURI, shows the reason as written: `upstream call failed: …`, no `%3A`.
  assert.match(down.details, /^upstream call failed: /)
  assert.doesNotMatch(down.details, /%[0-9A-F]{2}/)
  // The route's timeout: DEADLINE_EXCEEDED.
  assert.equal((await statusOf(callAt('test.Echo', 'Slow'))).code, grpc.status.DEADLINE_EXCEEDED)
})

test('grpc-timeout is the call\'s deadline at the gateway too: DEADLINE_EXCEEDED, and the backend call is cut', async () => {
  const Client = grpc.makeGenericClientConstructor(SERVICE, 'Echo')
  const c = new Client(`127.0.0.1:${portico.port}`, grpc.credentials.createInsecure()) as unknown as Record<string, (req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: Buffer) => void) => void> & grpc.Client
  const started = performance.now()
  // The client's deadline (150 ms) is tighter than the route's timeout (300 ms).
  const err = await new Promise<grpc.ServiceError | null>(resolve => c.Slow!(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + 150 }, e => resolve(e)))
  c.close()
  assert.equal(err?.code, grpc.status.DEADLINE_EXCEEDED)
  assert.ok(performance.now() - started < 1000)
})

test('access logs carry the call as OpenTelemetry names it: rpc.system, rpc.service, rpc.method, rpc.grpc.status_code', async () => {
  await unary('Echo', Buffer.from('log me'))
  await statusOf(callAt('nowhere.Echo', 'Echo'))
  // Access logs are written in batches.
  await portico.waitForOutput(/"rpc.service":"nowhere.Echo"/)
  const lines = portico.logs().filter(l => l['rpc.system'] === 'grpc')
  const ok = lines.find(l => l['rpc.service'] === 'test.Echo' && l['rpc.method'] === 'Echo')
  assert.equal(ok?.['rpc.grpc.status_code'], 0)
  const refused = lines.find(l => l['rpc.service'] === 'nowhere.Echo')
  assert.equal(refused?.['rpc.grpc.status_code'], grpc.status.UNIMPLEMENTED)
  assert.equal(refused?.status, 404, 'the HTTP status the gateway meant stays in the log')
})

/** A gRPC-Web (binary) call over HTTP/1.1, as a browser's grpc-web client makes it: frames in, frames out. */
async function grpcWeb (path: string, message: Buffer): Promise<{ status: number, headers: Record<string, unknown>, frames: Array<{ flag: number, payload: Buffer }> }> {
  const frame = Buffer.alloc(5 + message.length)
  frame.writeUInt32BE(message.length, 1)
  message.copy(frame, 5)
  const res = await request(`${portico.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1' }, body: frame })
  const body = Buffer.from(await res.body.arrayBuffer())
  const frames: Array<{ flag: number, payload: Buffer }> = []
  for (let at = 0; at + 5 <= body.length;) {
    const length = body.readUInt32BE(at + 1)
    frames.push({ flag: body[at]!, payload: body.subarray(at + 5, at + 5 + length) })
    at += 5 + length
  }
  return { status: res.statusCode, headers: res.headers, frames }
}

test('gRPC-Web (binary) over HTTP/1.1: the message through, the trailers back as the last frame', async () => {
  const ok = await grpcWeb('/test.Echo/Echo', Buffer.from('from a browser'))
  assert.equal(ok.status, 200)
  assert.equal(ok.headers['content-type'], 'application/grpc-web+proto')
  assert.equal(ok.frames[0]!.flag, 0)
  assert.equal(ok.frames[0]!.payload.toString(), 'from a browser')
  const trailer = ok.frames.at(-1)!
  assert.equal(trailer.flag, 0x80)
  assert.match(trailer.payload.toString('latin1'), /grpc-status:0\r\n/)
  assert.match(trailer.payload.toString('latin1'), /x-echo-trailer:kept\r\n/)

  // An error with no message: its status in the headers (gRPC-Web allows a trailers-only answer).
  const failed = await grpcWeb('/test.Echo/Fail', Buffer.from('x'))
  assert.equal(failed.headers['grpc-status'], String(grpc.status.NOT_FOUND))
  // The gateway's own answer, in the gRPC-Web content type.
  const unrouted = await grpcWeb('/nowhere.Echo/Echo', Buffer.from('x'))
  assert.equal(unrouted.headers['grpc-status'], String(grpc.status.UNIMPLEMENTED))
  assert.equal(unrouted.headers['content-type'], 'application/grpc-web')
})

test('gRPC-Web text (base64, the grpc-web library\'s default mode): decoded to the backend, the answer and its trailers base64 back', async () => {
  const message = Buffer.from('text mode '.repeat(100))
  const frame = Buffer.alloc(5 + message.length)
  frame.writeUInt32BE(message.length, 1)
  message.copy(frame, 5)
  const res = await request(`${portico.url}/test.Echo/Echo`, { method: 'POST', headers: { 'content-type': 'application/grpc-web-text+proto', accept: 'application/grpc-web-text' }, body: frame.toString('base64') })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['content-type'], 'application/grpc-web-text+proto')
  const text = await res.body.text()
  // Padded base64 segments one after another (each may end with '='), as grpc-web clients read them.
  const bytes = Buffer.concat((text.match(/[A-Za-z0-9+/]+={0,2}/g) ?? []).map(seg => Buffer.from(seg, 'base64')))
  const first = bytes.readUInt32BE(1)
  assert.equal(bytes[0], 0)
  assert.equal(bytes.subarray(5, 5 + first).toString(), message.toString())
  const trailer = bytes.subarray(5 + first)
  assert.equal(trailer[0], 0x80)
  assert.match(trailer.subarray(5).toString('latin1'), /grpc-status:0\r\n/)
})
