/**
 * The OTLP export thread (trace/otel-export-thread.ts): spans reach an OTLP/HTTP endpoint
 * from the worker, and the queue is bounded — while the endpoint does not answer, spans past
 * maxQueueSize are dropped and counted, not buffered; once it answers, spans flow again.
 * (Their content at a real collector: e2e/test/tracing-otel.test.ts.)
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { TracerProvider } from '@opentelemetry/sdk-trace'
import { ThreadSpanProcessor } from '../src/trace/otel-export-thread.ts'

test('export thread: spans reach the endpoint; a stalled endpoint bounds the queue and drops the rest', async () => {
  const held: http.ServerResponse[] = []
  let requests = 0
  let bytes = 0
  let release = false
  const server = http.createServer((req, res) => {
    requests++
    req.on('data', (c: Buffer) => { bytes += c.length })
    req.on('end', () => {
      if (release) res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
      else held.push(res)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const processor = new ThreadSpanProcessor({ otlpEndpoint: url, otlpProtocol: 'http', headers: {}, resources: {} }, { delayMs: 5, batchSize: 5, maxQueueSize: 10 })
  const provider = new TracerProvider({ spanProcessors: [processor] })
  const tracer = provider.getTracer('portico')
  try {
    for (let i = 0; i < 30; i++) tracer.startSpan(`span ${i}`, { attributes: { 'http.request.method': 'GET', n: i } }).end()
    assert.equal(processor.dropped, 20, 'ten spans queued, the rest dropped')
    // Both batches reach the endpoint, which holds them.
    for (let i = 0; i < 100 && requests < 2; i++) await new Promise(resolve => setTimeout(resolve, 20))
    assert.equal(requests, 2)
    assert.ok(bytes > 200, `protobuf bodies (${bytes} bytes)`)
    release = true
    for (const res of held.splice(0)) res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    await processor.forceFlush()
    for (let i = 0; i < 5; i++) tracer.startSpan(`after ${i}`).end()
    assert.equal(processor.dropped, 20, 'the queue drained: new spans are taken')
    await processor.forceFlush()
    assert.equal(requests, 3)
  } finally {
    await provider.shutdown()
    server.close()
  }
})
