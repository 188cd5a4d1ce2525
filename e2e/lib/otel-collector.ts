/**
 * A real OpenTelemetry Collector (scripts/test-tools builds it: the OTLP receiver and the
 * file exporter) on loopback ports, writing what it receives as OTLP JSON lines; the spans
 * and log records are read back flattened, with their resource attributes.
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort, makeTempDir } from '@portico/testkit/portico'

export interface CollectedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  /** 1 internal, 2 server, 3 client. */
  kind: number
  attributes: Record<string, unknown>
  status: { code?: number, message?: string }
  resource: Record<string, unknown>
}

export interface CollectedLog {
  body: unknown
  attributes: Record<string, unknown>
  traceId: string
  spanId: string
  severityText: string
  severityNumber: number
  /** ns since the epoch, as the collector printed it. */
  timeUnixNano: string
  scope: string
  resource: Record<string, unknown>
}

export interface Collector {
  grpcEndpoint: string
  httpEndpoint: string
  spans(): CollectedSpan[]
  logs(): CollectedLog[]
  /** Waits until `predicate` holds over the spans received (the collector flushes every 100 ms). */
  waitForSpans(predicate: (spans: CollectedSpan[]) => boolean, timeoutMs?: number): Promise<CollectedSpan[]>
  waitForLogs(predicate: (logs: CollectedLog[]) => boolean, timeoutMs?: number): Promise<CollectedLog[]>
  close(): Promise<void>
}

type AnyValue = { stringValue?: string, intValue?: string | number, boolValue?: boolean, doubleValue?: number, arrayValue?: { values?: AnyValue[] }, kvlistValue?: { values?: KeyValue[] } }
type KeyValue = { key: string, value: AnyValue }

function valueOf (v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined
  if (v.stringValue !== undefined) return v.stringValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.boolValue !== undefined) return v.boolValue
  if (v.doubleValue !== undefined) return v.doubleValue
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf)
  if (v.kvlistValue !== undefined) return attributesOf(v.kvlistValue.values)
  return undefined
}

function attributesOf (kvs: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((kvs ?? []).map(kv => [kv.key, valueOf(kv.value)]))
}

export async function startCollector (binary: string): Promise<Collector> {
  const dir = makeTempDir('portico-otelcol-')
  const [grpcPort, httpPort] = [await freePort(), await freePort()]
  const traces = join(dir, 'traces.jsonl')
  const logs = join(dir, 'logs.jsonl')
  writeFileSync(join(dir, 'config.yaml'), `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${grpcPort}
      http:
        endpoint: 127.0.0.1:${httpPort}
exporters:
  file/traces:
    path: ${traces}
    flush_interval: 100ms
  file/logs:
    path: ${logs}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
`)
  const child: ChildProcess = spawn(binary, ['--config', join(dir, 'config.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (b: Buffer) => { output += b.toString() })
  child.stderr!.on('data', (b: Buffer) => { output += b.toString() })
  const exited = new Promise<void>(resolve => child.once('close', () => resolve()))
  const deadline = Date.now() + 30_000
  while (!output.includes('Everything is ready')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the collector did not start:\n${output}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }

  const lines = (path: string): Array<Record<string, unknown>> => existsSync(path)
    ? readFileSync(path, 'utf8').split('\n').filter(l => l.trim() !== '').map(l => JSON.parse(l) as Record<string, unknown>)
    : []
  const spans = (): CollectedSpan[] => {
    const out: CollectedSpan[] = []
    for (const doc of lines(traces)) {
      for (const rs of (doc.resourceSpans ?? []) as Array<{ resource?: { attributes?: KeyValue[] }, scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }> }>) {
        const resource = attributesOf(rs.resource?.attributes)
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            out.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: String(s.parentSpanId ?? ''),
              name: String(s.name),
              kind: Number(s.kind ?? 0),
              attributes: attributesOf(s.attributes as KeyValue[] | undefined),
              status: (s.status ?? {}) as CollectedSpan['status'],
              resource
            })
          }
        }
      }
    }
    return out
  }
  const logRecords = (): CollectedLog[] => {
    const out: CollectedLog[] = []
    for (const doc of lines(logs)) {
      for (const rl of (doc.resourceLogs ?? []) as Array<{ resource?: { attributes?: KeyValue[] }, scopeLogs?: Array<{ scope?: { name?: string }, logRecords?: Array<Record<string, unknown>> }> }>) {
        const resource = attributesOf(rl.resource?.attributes)
        for (const sl of rl.scopeLogs ?? []) {
          for (const r of sl.logRecords ?? []) {
            out.push({
              body: valueOf(r.body as AnyValue | undefined),
              attributes: attributesOf(r.attributes as KeyValue[] | undefined),
              traceId: String(r.traceId ?? ''),
              spanId: String(r.spanId ?? ''),
              severityText: String(r.severityText ?? ''),
              severityNumber: Number(r.severityNumber ?? 0),
              timeUnixNano: String(r.timeUnixNano ?? ''),
              scope: sl.scope?.name ?? '',
              resource
            })
          }
        }
      }
    }
    return out
  }
  const wait = async <T>(read: () => T[], predicate: (items: T[]) => boolean, timeoutMs: number, what: string): Promise<T[]> => {
    const until = Date.now() + timeoutMs
    for (;;) {
      const items = read()
      if (predicate(items)) return items
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; have ${JSON.stringify(items, null, 1).slice(0, 4000)}`)
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
  return {
    grpcEndpoint: `http://127.0.0.1:${grpcPort}`,
    httpEndpoint: `http://127.0.0.1:${httpPort}`,
    spans,
    logs: logRecords,
    waitForSpans: (predicate, timeoutMs = 10_000) => wait(spans, predicate, timeoutMs, 'spans'),
    waitForLogs: (predicate, timeoutMs = 10_000) => wait(logRecords, predicate, timeoutMs, 'log records'),
    close: async () => {
      if (child.exitCode === null) child.kill('SIGTERM')
      await exited
    }
  }
}
