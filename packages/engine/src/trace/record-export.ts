/**
 * The export side of a stream of flat records (ended spans, access-log records): gathers
 * what the request's thread handed over into export calls of an OpenTelemetry SDK exporter
 * (`SpanExporter`, `LogRecordExporter`: the same export/shutdown shape), converting each
 * record to what the exporter reads only there. Runs on the export thread
 * (trace/export-worker.ts), and on the request's thread only when a test hands in an
 * exporter. The callers bring the exporter and the conversion (trace/span-export.ts, the
 * proxy's otlp-logs-export.ts); here are what they share: where the exporter sends and the
 * resource the records go under.
 */

import { defaultResource, resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { OtlpEndpointOptions } from './span-record.ts'

/** Span and log-record times as the SDK keeps them ([seconds, nanoseconds]) from ms. */
export { millisToHrTime } from '@opentelemetry/core'

/** An SDK exporter as far as this file uses one. */
export interface BatchExporter<T> {
  export(items: T[], resultCallback: (result: { code: number, error?: Error }) => void): void
  shutdown(): Promise<void>
}

/** What the export thread asks of a module it loads for one kind of record (trace/export-worker.ts). */
export interface RecordSink<R> {
  add(records: R[]): void
  shutdown(): Promise<void>
}

/** Items per export call, at most (the SDK's batch processors' default). */
export const EXPORT_BATCH = 512

/**
 * How long records may wait for a full export batch (the proxy's thread has held them up to
 * a second already). A second, not less: each export call costs its encoding setup and an
 * HTTP request whatever it carries, and at 1 % sampling a busy proxy's spans came in calls of
 * ~60 every 100 ms — 0.3–0.6 µs a proxied request on this thread; in calls of up to 512 once
 * a second, ~0.17 (the SDK's own batch processor waits 5 s).
 */
export const GATHER_MS = 1000

export interface RecordExportOptions<R, T> {
  exporter: BatchExporter<T>
  /** One record as the exporter reads it; a throw fails the batch (reported through `done`). */
  convert: (record: R) => T
  /** Called as each `n` records leave, exported (error null) or given up on. */
  done: (n: number, error: string | null) => void
  /** What a record is, for error messages ('span', 'access log record'). */
  what: string
  /** How long to gather for one export call (ms), at most GATHER_MS. */
  gatherMs?: number
}

/**
 * Exports records through an SDK exporter, one export call at a time (as the SDK's batch
 * processors do), EXPORT_BATCH at once or what came within `gatherMs` — every export call
 * costs its own encoding setup and HTTP request, so a busy proxy's records go in full
 * batches. A collector that refuses or is away loses those records, never the proxy's time.
 */
export class RecordExport<R, T> implements RecordSink<R> {
  private readonly exporter: BatchExporter<T>
  private readonly convert: (record: R) => T
  private readonly done: (n: number, error: string | null) => void
  private readonly what: string
  private readonly gatherMs: number
  private pending: R[] = []
  private exporting = false
  private timer: NodeJS.Timeout | null = null
  private flushing = false
  private idle: Array<() => void> = []

  constructor (options: RecordExportOptions<R, T>) {
    this.exporter = options.exporter
    this.convert = options.convert
    this.done = options.done
    this.what = options.what
    this.gatherMs = Math.min(options.gatherMs ?? GATHER_MS, GATHER_MS)
  }

  add (records: R[]): void {
    if (this.pending.length === 0) this.pending = records
    else for (const r of records) this.pending.push(r)
    if (this.exporting) return
    if (this.pending.length >= EXPORT_BATCH || this.flushing) this.next()
    else this.timer ??= setTimeout(() => this.next(), this.gatherMs)
  }

  private next (): void {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.pending.length === 0) {
      this.exporting = false
      for (const resolve of this.idle.splice(0)) resolve()
      return
    }
    const batch = this.pending.length <= EXPORT_BATCH ? this.pending : this.pending.slice(0, EXPORT_BATCH)
    this.pending = batch === this.pending ? [] : this.pending.slice(EXPORT_BATCH)
    this.exporting = true
    let items: T[]
    try {
      items = batch.map(this.convert)
    } catch (err) {
      this.done(batch.length, `${this.what} conversion failed: ${(err as Error).message}`)
      this.next()
      return
    }
    this.exporter.export(items, result => {
      this.done(batch.length, result.code === 0 ? null : `${this.what} export failed: ${result.error?.message ?? 'unknown error'}`)
      // A full batch goes at once; less waits for more (or the shutdown).
      if (this.pending.length >= EXPORT_BATCH || this.flushing || this.pending.length === 0) this.next()
      else {
        this.exporting = false
        this.timer ??= setTimeout(() => this.next(), this.gatherMs)
      }
    })
  }

  /** Exports what is queued, then shuts the exporter down. */
  async shutdown (): Promise<void> {
    this.flushing = true
    if (!this.exporting) this.next()
    if (this.exporting) await new Promise<void>(resolve => this.idle.push(resolve))
    await this.exporter.shutdown()
  }
}

/** The resource every exported span and log record goes under (service.name defaults to portico). */
export function otlpResource (resources: Record<string, string>): Resource {
  return defaultResource().merge(resourceFromAttributes({ 'service.name': 'portico', ...resources }))
}

type GrpcMetadata = InstanceType<typeof import('@grpc/grpc-js').Metadata>

/**
 * The SDK's OTLP exporter of one kind of record for the endpoint: OTLP/HTTP (protobuf) posts
 * to the endpoint's `path` (`defaultPath` when unset) with the headers; gRPC sends them as
 * metadata. Only the chosen protocol's exporter package is loaded.
 */
export async function otlpExporter<E> (o: OtlpEndpointOptions, defaultPath: string, exporters: {
  http: () => Promise<new (options: { url: string, headers: Record<string, string> }) => E>
  grpc: () => Promise<new (options: { url: string, metadata: GrpcMetadata }) => E>
}): Promise<E> {
  const base = o.otlpEndpoint.replace(/\/+$/, '')
  if (o.otlpProtocol === 'http') return new (await exporters.http())({ url: `${base}${o.path ?? defaultPath}`, headers: o.headers })
  const { Metadata } = await import('@grpc/grpc-js')
  const metadata = new Metadata()
  for (const [k, v] of Object.entries(o.headers)) metadata.set(k, v)
  return new (await exporters.grpc())({ url: base, metadata })
}
