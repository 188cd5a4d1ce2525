/**
 * The request phase API (packages/engine/src/http/ext-proc-request-phase.ts), as the
 * InferencePool backend calls it, on a real HTTP request (a loopback server's IncomingMessage)
 * and a real gRPC ext_proc server: metadata_context (the EPP's subset hint) on the first
 * message, the endpoint picker's answer read back as the header mutation and the `envoy.lb`
 * dynamic metadata, the processor's body in ctx.requestBody; a huge or malformed header
 * mutation and an answer out of order are failures.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { answer, headersOf, metadataStruct, phaseOf, startExtProcServer, streamedBody, type ExtProcServer, type ProcessingReply, type ProcessingRequest } from '../lib/ext-proc.ts'
import { createExtProcClient, ExtProcStream } from '@portico/engine/ext-proc-grpc'
import { MAX_MUTATION_BYTES, runExtProcRequestPhase, type RequestPhaseResult } from '@portico/engine/ext-proc-request-phase'
import type { BodyContext } from '@portico/engine/request-body'
import type { HeaderMap } from '@portico/engine/ir'

let processor: ExtProcServer
let server: http.Server
let url: string
let lastBody: Buffer | null = null
let lastHeaders: HeaderMap = {}

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) }, append_action: 2 })

function behave (m: ProcessingRequest, stream: ProcessingRequest[]): ProcessingReply {
  const path = headersOf(stream[0]!.request_headers?.headers)[':path'] ?? ''
  const phase = phaseOf(m)
  if (phase === 'request_headers' && m.request_headers!.end_of_stream !== true) return []
  if (phase === 'request_body' && m.request_body!.end_of_stream !== true) return []
  const body = Buffer.concat(stream.filter(x => x.request_body !== undefined).map(x => Buffer.from(x.request_body!.body ?? Buffer.alloc(0))))
  switch (path) {
    case '/pick': {
      // The protocol's subset: a list of ip:port (a google.protobuf.ListValue).
      const hint = stream[0]!.metadata_context?.filter_metadata?.['envoy.lb.subset_hint']?.fields?.['x-gateway-destination-endpoint-subset']?.listValue?.values ?? []
      const endpoint = hint[1]?.stringValue ?? `none: ${JSON.stringify(stream[0]!.metadata_context)}`
      return [
        { ...answer('request_headers', { header_mutation: { set_headers: [set('x-gateway-destination-endpoint', endpoint)] } }), dynamic_metadata: metadataStruct({ 'envoy.lb': { 'x-gateway-destination-endpoint': `${endpoint},10.0.0.9:8000` } }) },
        streamedBody('request_body', body, true)
      ]
    }
    case '/huge-mutation':
      return [answer('request_headers', { header_mutation: { set_headers: [set('x-big', 'v'.repeat(MAX_MUTATION_BYTES + 1))] } }), streamedBody('request_body', body, true)]
    case '/bad-mutation':
      // A value with CR/LF and a name that is no token: dropped, never applied.
      return [answer('request_headers', { header_mutation: { set_headers: [set('x-evil', 'a\r\nx-injected: 1'), set('bad name', 'v'), set(':authority', 'elsewhere')] } }), streamedBody('request_body', body, true)]
    case '/lwepp': {
      // lwepp v1.6.2: nothing until the last chunk; then the headers' answer (clear_route_cache,
      // the pick as header and envoy.lb metadata) and the whole body back in chunks of at most
      // 62,000 bytes, end_of_stream on the last; no separate end message.
      const out: Array<Record<string, unknown>> = [{
        ...answer('request_headers', { clear_route_cache: true, header_mutation: { set_headers: [set('x-gateway-destination-endpoint', '10.0.0.1:8000'), set('X-Echo-Set-Header', 'x-conformance-test-served-endpoint:10.0.0.1:8000')] } }),
        dynamic_metadata: metadataStruct({ 'envoy.lb': { 'x-gateway-destination-endpoint': '10.0.0.1:8000' } })
      }]
      for (let at = 0; at < body.length; at += 62_000) out.push(streamedBody('request_body', body.subarray(at, Math.min(body.length, at + 62_000)), at + 62_000 >= body.length))
      return out
    }
    case '/lwepp-no-pod':
      // lwepp when the steering header names no pod of the pool.
      return 'error'
    case '/body-first':
      return [streamedBody('request_body', body, true), answer('request_headers')]
    default:
      return [answer('request_headers'), streamedBody('request_body', body, true)]
  }
}

let onRequest: (ctx: BodyContext, req: http.IncomingMessage) => Promise<RequestPhaseResult>
let results: RequestPhaseResult[] = []
/** The caller's stricter mutation check (the InferencePool passes one); null: none. */
let checkMutation: ((m: unknown) => string | null) | null = null

before(async () => {
  processor = await startExtProcServer(behave)
  const client = createExtProcClient(processor.host, false)
  onRequest = async (ctx, req) => {
    const stream = new ExtProcStream(client, 1000)
    lastHeaders = { ...req.headers } as HeaderMap
    const r = await runExtProcRequestPhase(ctx, {
      stream,
      modes: { requestHeaderMode: 'send', responseHeaderMode: 'skip', requestBodyMode: 'fullDuplexStreamed', responseBodyMode: 'none' },
      maxBodyBytes: 1 << 20,
      pseudo: { ':authority': 'pool', ':method': req.method ?? 'GET', ':path': req.url ?? '/', ':scheme': 'http' },
      headers: lastHeaders,
      metadataContext: { 'envoy.lb.subset_hint': { 'x-gateway-destination-endpoint-subset': ['10.0.0.1:8000', '10.0.0.2:8000'] } },
      ...(checkMutation !== null ? { checkMutation } : {})
    })
    stream.finish()
    return r
  }
  server = http.createServer((req, res) => {
    const ctx: BodyContext = {
      req,
      upgrade: null,
      requestBody: null,
      listener: { frontend: { requestBodyIdleTimeoutMs: 10_000, requestBodyMinRate: 0 } },
      route: null,
      grpc: null
    }
    void onRequest(ctx, req).then(r => {
      results.push(r)
      lastBody = ctx.requestBody
      res.end(r.kind)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

after(async () => {
  server?.close()
  await processor?.close()
})

async function post (path: string, body: string): Promise<RequestPhaseResult> {
  results = []
  const res = await fetch(`${url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
  await res.text()
  return results[0]!
}

test('the picker\'s answer: subset hint sent as metadata_context; endpoint as a header mutation and envoy.lb metadata; the body back in ctx.requestBody', async () => {
  const r = await post('/pick', '{"model":"m"}')
  assert.equal(r.kind, 'continue')
  assert.equal(lastHeaders['x-gateway-destination-endpoint'], '10.0.0.2:8000', 'picked from the subset the gateway sent')
  assert.deepEqual(r.dynamicMetadata['envoy.lb'], { 'x-gateway-destination-endpoint': '10.0.0.2:8000,10.0.0.9:8000' })
  assert.equal(lastBody?.toString('utf8'), '{"model":"m"}')
  assert.equal(lastHeaders['content-length'], '13')
})

test('hostile answers: a header mutation over the limit and an answer out of order fail; malformed headers are dropped', async () => {
  const huge = await post('/huge-mutation', '{}')
  assert.equal(huge.kind, 'error')
  assert.match((huge as { reason: string }).reason, /header mutations larger than/)
  assert.equal(lastHeaders['x-big'], undefined)
  const order = await post('/body-first', '{}')
  assert.equal(order.kind, 'error')
  assert.match((order as { reason: string }).reason, /before the request_headers answer/)
  const bad = await post('/bad-mutation', '{}')
  assert.equal(bad.kind, 'continue')
  assert.equal(lastHeaders['x-evil'], undefined)
  assert.equal(lastHeaders['bad name'], undefined)
  assert.equal(lastHeaders[':authority'], undefined)
})

test('the reference picker\'s order (lwepp): no per-chunk answers, the headers answered after the last chunk, the body back in 62,000-byte chunks', async () => {
  const body = JSON.stringify({ model: 'm', prompt: 'z'.repeat(200_000) })
  const r = await post('/lwepp', body)
  assert.equal(r.kind, 'continue', JSON.stringify(r))
  assert.equal(lastHeaders['x-gateway-destination-endpoint'], '10.0.0.1:8000')
  assert.deepEqual(r.dynamicMetadata['envoy.lb'], { 'x-gateway-destination-endpoint': '10.0.0.1:8000' })
  assert.equal(lastBody?.toString('utf8'), body, 'the body the picker sent back, whole')
  assert.equal(lastHeaders['content-length'], String(body.length))
  // The client's body went out in 64 KiB messages, the last with end_of_stream.
  const sent = processor.streams.at(-1)!.filter(m => m.request_body !== undefined)
  assert.ok(sent.length >= 3)
  assert.equal(sent.at(-1)!.request_body!.end_of_stream, true)
  const failed = await post('/lwepp-no-pod', body)
  assert.equal(failed.kind, 'error')
  assert.match((failed as { reason: string }).reason, /processor broke/)
})

test('the caller\'s checkMutation refuses an answer whole: the phase fails, nothing of it applied', async () => {
  checkMutation = m => JSON.stringify(m ?? {}).includes('X-Echo-Set-Header') ? 'refused by the caller' : null
  try {
    const r = await post('/lwepp', '{"model":"m"}')
    assert.equal(r.kind, 'error')
    assert.equal((r as { reason: string }).reason, 'refused by the caller')
    assert.equal(lastHeaders['x-gateway-destination-endpoint'], undefined)
    assert.equal(lastBody?.toString('utf8'), '{"model":"m"}', 'the client\'s body as it was')
  } finally {
    checkMutation = null
  }
})
