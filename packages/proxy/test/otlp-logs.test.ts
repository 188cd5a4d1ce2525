/**
 * accessLog.otlp's two halves: the request thread's flat records (otlp-logs.ts) and their
 * conversion to the SDK's log records on the export thread (otlp-logs-export.ts). The
 * collector's view is e2e/test/tracing-otel.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { InMemoryLogRecordExporter } from '@opentelemetry/sdk-logs'
import type { RequestSpan } from '@portico/engine'
import { logExport } from '../src/otlp-logs-export.ts'
import { startOtlpLogs, type LogRecord } from '../src/otlp-logs.ts'

test('a record becomes a log record: time, body, INFO, the trace context and the fields as attributes', async () => {
  const exporter = new InMemoryLogRecordExporter()
  const done: Array<[number, string | null]> = []
  let exported!: () => void
  const sent = new Promise<void>(resolve => { exported = resolve })
  const sink = logExport(exporter, { 'deployment.environment.name': 'test' }, (n, error) => { done.push([n, error]); exported() }, 10)
  const at = Date.UTC(2026, 10, 27, 12, 0, 0) + 123.5
  const traced: LogRecord = [at, '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', 1, 'request', 'status', 200, 'path', '/a', 'cached', false]
  const plain: LogRecord = [at, '', '', 0, 'request', 'status', 502]
  sink.add([traced, plain])
  // (Not sink.shutdown(): the in-memory exporter forgets its records when shut down.)
  await sent
  assert.deepEqual(done, [[2, null]])
  const [a, b] = exporter.getFinishedLogRecords()
  assert.deepEqual(a!.hrTime, [Math.trunc(at / 1000), 123_500_000])
  assert.equal(a!.body, 'request')
  assert.equal(a!.severityText, 'INFO')
  assert.equal(a!.severityNumber, 9)
  assert.deepEqual(a!.spanContext, { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 })
  assert.deepEqual(a!.attributes, { status: 200, path: '/a', cached: false })
  assert.equal(a!.instrumentationScope.name, 'portico.access')
  assert.equal(a!.resource.attributes['service.name'], 'portico')
  assert.equal(a!.resource.attributes['deployment.environment.name'], 'test')
  assert.equal(b!.spanContext, undefined, 'a request without a trace has no trace context')
  assert.equal(a!.resource, b!.resource, 'one resource object: the OTLP encoder groups records by it')
})

test('emitted lines reach the export thread; a collector that refuses them is reported, and the proxy goes on', async () => {
  // A collector that refuses every export (400: not retried, so the failure comes at once).
  let posts = 0
  const collector = createServer((req, res) => {
    posts++
    req.resume().on('end', () => res.writeHead(400).end())
  })
  await new Promise<void>(resolve => collector.listen(0, '127.0.0.1', resolve))
  const errors: string[] = []
  try {
    const logs = startOtlpLogs({ otlpEndpoint: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`, otlpProtocol: 'http', headers: {}, resources: {}, scheduledDelayMs: 10 }, { onError: m => errors.push(m) })
    const span = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', recording: false } as RequestSpan
    logs.emit('request', { status: 200, route: 'r', nested: { a: 1 }, absent: undefined }, span)
    logs.emit('request', { status: 404 }, null)
    await logs.shutdown()
  } finally {
    collector.close()
  }
  assert.ok(posts >= 1, 'the records reached the collector')
  assert.equal(errors.length, 1, 'reported once')
  assert.match(errors[0]!, /^access log record export failed: /)
})
