/**
 * Tracing as the pipeline uses it (trace/otel.ts RequestTracing): Portico's sampler decides
 * each request, W3C trace context and baggage are read and written with the OpenTelemetry
 * API's propagators, recorded spans are written as plain records (trace/span-record.ts) and
 * exported with the SDK's OTLP exporter on a thread of their own
 * (trace/export-worker.ts), which alone loads the SDK. Loaded only when
 * `config.tracing` is set.
 *
 * No context manager is installed: spans are parented explicitly, so nothing runs on the
 * async hooks of every request.
 */

import { ROOT_CONTEXT, SpanKind, TraceFlags, propagation, trace, type Context, type SpanContext, type TraceState } from '@opentelemetry/api'
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core'
import type { SpanExporter } from '@opentelemetry/sdk-trace'
import { randomFillSync } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import { vouchTraceparent } from '../ir/http-grammar.ts'
import { performance } from '../util/clock.ts'
import type { SamplingIR } from '../ir/types.ts'
import type { OtelSpan, RequestSpan, RequestTracing, SpanAttributes, SpanOutcome } from './otel.ts'
import type { AttributeLayout, LayoutValues } from './attribute-layouts.ts'
import { RecordBatches, type RecordBatchesOptions } from './record-batches.ts'
import { RECORD, type SpanExportOptions, type SpanRecord } from './span-record.ts'

export type { OtlpEndpointOptions } from './span-record.ts'

/** `config.tracing`, resolved (proxy/settings.ts): where spans go (OTLP/HTTP path default /v1/traces), and how many. */
export interface TracingOptions extends SpanExportOptions {
  /** Requests without a trace: true, false or the share of them to sample. */
  randomSampling: boolean | number
  /** Requests with a trace: true follows the caller's sampled flag, false ignores the caller, a ratio samples that share of the caller's sampled ones. */
  clientSampling: boolean | number
  /**
   * config.tracing.fields as written (server-span attributes added with CEL or removed): the
   * engine compiles and applies them (compileCelFields, pipeline/run.ts), not the SDK.
   */
  fields?: { add?: Record<string, string>, remove?: string[] }
  /** How long a recorded span may wait for a full batch before it is sent (ms; tests shorten it). */
  scheduledDelayMs?: number
  /** Exporter to use in this thread instead of OTLP from the export thread (tests). */
  exporter?: SpanExporter
  /**
   * Hands each batch of span records to another thread that exports them (its
   * RequestTracing.acceptRelayed) instead of starting an export thread here: a data-plane
   * worker's spans go to its primary.
   */
  relay?: (records: SpanRecord[]) => void
  /** A failed export or a failed export thread (spans are lost, the proxy goes on); at most once a minute. */
  onExportError?: (message: string) => void
}

type SpanBatches = RecordBatches<SpanRecord>

export async function createRequestTracing (options: TracingOptions): Promise<RequestTracing> {
  const sampler = new PorticoSampler(options.randomSampling, options.clientSampling)
  const { otlpEndpoint, otlpProtocol, headers, resources, exporter } = options
  let sink: RecordBatchesOptions<SpanRecord>['sink']
  if (options.relay !== undefined) {
    sink = { relay: options.relay }
  } else if (exporter !== undefined) {
    // The SDK loads on this thread only for a test's in-thread exporter (span-record.ts says why).
    const { spanExport } = await import('./span-export.ts')
    sink = { local: (done, gatherMs) => spanExport(exporter, resources, done, gatherMs) }
  } else {
    // Only what the export thread needs, and can be cloned to it (the options also carry functions).
    const exportOptions: SpanExportOptions = { otlpEndpoint, otlpProtocol, headers, resources, ...(options.path !== undefined ? { path: options.path } : {}) }
    sink = { module: new URL('./span-export.ts', import.meta.url), options: exportOptions }
  }
  const spans: SpanBatches = new RecordBatches<SpanRecord>({
    sink,
    delayMs: options.scheduledDelayMs ?? 1000,
    what: 'span',
    ...(options.onExportError !== undefined ? { onError: options.onExportError } : {})
  })
  return new SdkTracing(sampler, spans)
}

/**
 * Head sampling as agentgateway's `randomSampling` / `clientSampling`: a request that
 * arrives with a trace (a remote parent) follows `clientSampling`, one without follows
 * `randomSampling`; the spans under a request's own span follow the request.
 */
export class PorticoSampler {
  private readonly random: number
  private readonly client: boolean | number

  constructor (random: boolean | number, client: boolean | number) {
    this.random = ratioOf(random)
    this.client = client
  }

  /** Whether a request is sampled; `caller`: the valid trace context it arrived with, if any. */
  sampleRequest (caller: SpanContext | undefined, own?: SamplingIR | null): boolean {
    // A listener's own sampling (a gateway's `tracing`) over the global one.
    const random = own?.randomSampling !== undefined ? ratioOf(own.randomSampling) : this.random
    const client = own?.clientSampling ?? this.client
    if (caller === undefined || client === false) return chance(random)
    return (caller.traceFlags & 1) === 1 && chance(client === true ? 1 : client)
  }
}

function ratioOf (s: boolean | number): number {
  return s === true ? 1 : s === false ? 0 : s
}

function chance (ratio: number): boolean {
  return ratio >= 1 || (ratio > 0 && Math.random() < ratio)
}

const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] })

/** Reads W3C headers off Node's request headers (lower-case names; repeated ones as arrays). */
const headerGetter = {
  get: (h: IncomingHttpHeaders, key: string) => h[key],
  keys: (h: IncomingHttpHeaders) => Object.keys(h)
}

const headerSetter = {
  set: (h: HeaderMap, key: string, value: string) => { h[key] = value }
}

/** The time origin, read once (a getter; each read went through V8's generic load). */
const TIME_ORIGIN = performance.timeOrigin

/** The wall clock in ms since the epoch with a sub-ms fraction, as span times are kept. */
function now (): number {
  return TIME_ORIGIN + performance.now()
}

class SdkTracing implements RequestTracing {
  private readonly sampler: PorticoSampler
  private readonly spans: SpanBatches

  constructor (sampler: PorticoSampler, spans: SpanBatches) {
    this.sampler = sampler
    this.spans = spans
  }

  get onSpans (): ((result: SpanOutcome, count: number) => void) | null {
    return this.spans.onOutcome
  }

  set onSpans (hook: ((result: SpanOutcome, count: number) => void) | null) {
    this.spans.onOutcome = hook
  }

  startRequest (headers: IncomingHttpHeaders, method: string, sampling?: SamplingIR | null): RequestSpan {
    // No traceparent and no baggage: the extract would return the root context as it is.
    const parent = headers.traceparent === undefined && headers.baggage === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter)
    const found = parent === ROOT_CONTEXT ? undefined : trace.getSpanContext(parent)
    const caller = found !== undefined && trace.isSpanContextValid(found) ? found : undefined
    // Decided first, so a request the sampler drops (most, at a low ratio) costs ids and a
    // header, nothing more.
    if (!this.sampler.sampleRequest(caller, sampling)) return new UnsampledRequestSpan(parent, caller)
    return new RecordedRequestSpan(this.spans, method, parent, caller)
  }

  acceptRelayed (records: unknown[]): void {
    this.spans.addRelayed(records as SpanRecord[])
  }

  async shutdown (): Promise<void> {
    await this.spans.shutdown()
  }
}

/**
 * A recorded span: its record is filled as the request goes and handed over when it ends.
 * Attributes are kept as given (Portico's own values are strings, numbers, booleans and
 * string arrays, CEL values made so by celAttribute), so nothing is validated per value.
 */
class RecordedSpan implements OtelSpan {
  protected readonly spans: SpanBatches
  readonly record: SpanRecord
  private ended = false

  constructor (spans: SpanBatches, record: SpanRecord) {
    this.spans = spans
    this.record = record
  }

  setAttributes (attrs: SpanAttributes): void {
    const r = this.record
    for (const key in attrs) {
      const v = attrs[key]
      if (v !== undefined && v !== null) r.push(key, v)
    }
  }

  setLayout (layout: AttributeLayout, values: LayoutValues): void {
    const r = this.record
    r[RECORD.layout] = layout.id
    r[RECORD.layoutValues] = values
  }

  setError (type: string, message?: string): void {
    const r = this.record
    r.push('error.type', type)
    r[RECORD.status] = 2
    r[RECORD.statusMessage] = message ?? ''
  }

  updateName (name: string): void {
    this.record[RECORD.name] = name
  }

  end (endTime?: number): void {
    if (this.ended) return
    this.ended = true
    this.record[RECORD.end] = endTime ?? now()
    this.spans.add(this.record)
  }
}

class RecordedRequestSpan extends RecordedSpan implements RequestSpan {
  readonly recording = true
  /** The caller's context (its baggage goes on to the calls this request makes). */
  private readonly parent: Context
  /**
   * No baggage and no tracestate to pass on: a call's trace context is its `traceparent`
   * alone, written here rather than through the propagators (the common case).
   */
  private readonly traceparentOnly: boolean
  private readonly traceState: TraceState | undefined

  constructor (spans: SpanBatches, name: string, parent: Context, caller: { traceId: string, spanId: string, traceState?: TraceState | undefined } | undefined) {
    super(spans, [caller?.traceId ?? randomTraceId(recordedIds), randomSpanId(recordedIds), caller?.spanId ?? '', caller !== undefined, caller?.traceState?.serialize() ?? '', name, SpanKind.SERVER, now(), 0, 0, '', 0, null])
    this.parent = parent
    this.traceState = caller?.traceState
    this.traceparentOnly = traceparentAlone(this.traceState, parent)
  }

  get traceId (): string {
    return this.record[RECORD.traceId]
  }

  get spanId (): string {
    return this.record[RECORD.spanId]
  }

  child (name: string, kind: 'client' | 'internal', attrs: SpanAttributes, startTime?: number): OtelSpan | null {
    const r = this.record
    const child = new RecordedSpan(this.spans, [r[RECORD.traceId], randomSpanId(recordedIds), r[RECORD.spanId], false, r[RECORD.traceState], name, kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, startTime ?? now(), 0, 0, '', 0, null])
    child.setAttributes(attrs)
    return child
  }

  inject (headers: HeaderMap, span?: OtelSpan | null): void {
    const from = span instanceof RecordedSpan ? span.record : this.record
    injectTrace(headers, traceparent(from[RECORD.traceId], from[RECORD.spanId], true), this.traceparentOnly, this.parent, this.traceState)
  }
}

/**
 * The span of a request the sampler dropped: nothing is recorded or exported, but the call
 * it makes still carries the trace on, flagged unsampled (so the backend does not start a
 * trace of its own), under a span id of its own.
 */
class UnsampledRequestSpan implements RequestSpan {
  readonly recording = false
  /** The call's `traceparent` (this span's ids, flagged unsampled); the ids are cut from it when asked for. */
  private readonly traceparent: string
  /** Its header line, `traceparent: <value>\r\n`, when the pool made it (a new trace); else undefined. */
  private readonly line: string | undefined
  /** The caller's context (its tracestate and baggage go on to the calls). */
  private readonly parent: Context
  private readonly traceState: TraceState | undefined
  /** No tracestate and no baggage to pass on: the `traceparent` alone (RecordedRequestSpan's traceparentOnly). */
  private readonly alone: boolean

  constructor (parent: Context, caller: { traceId: string, traceState?: TraceState | undefined } | undefined) {
    this.parent = parent
    if (caller === undefined) {
      const line = unsampledTraceparentLine()
      this.line = line
      this.traceparent = line.slice(LINE_VALUE, LINE_VALUE + VALUE_LENGTH)
    } else {
      this.line = undefined
      this.traceparent = traceparent(caller.traceId, randomSpanId(unsampledIds), false)
    }
    this.traceState = caller?.traceState
    this.alone = traceparentAlone(this.traceState, parent)
  }

  get traceId (): string {
    return this.traceparent.slice(3, 35)
  }

  get spanId (): string {
    return this.traceparent.slice(36, 52)
  }

  setAttributes (): void {}
  setLayout (): void {}
  setError (): void {}
  updateName (): void {}
  end (): void {}

  child (): null {
    return null
  }

  inject (headers: HeaderMap): void {
    injectTrace(headers, this.traceparent, this.alone, this.parent, this.traceState, this.line)
  }
}

/**
 * Writes a call's W3C trace context into `headers`: its `traceparent` (`value`, naming the
 * call's span), and the caller's tracestate and baggage — through the propagators only when
 * there are some to pass on (`alone` false).
 */
function injectTrace (headers: HeaderMap, value: string, alone: boolean, parent: Context, traceState: TraceState | undefined, line?: string): void {
  // A caller's tracestate belongs to its traceparent, which is being replaced (set
  // undefined, not deleted: see http/headers.ts dropUpstreamHeader).
  if (headers.tracestate !== undefined) headers.tracestate = undefined
  if (alone) {
    headers.traceparent = value
    // Hex ids and dashes: the HTTP/1.1 client need not check it (ir/http-grammar.ts).
    vouchTraceparent(value, line)
    return
  }
  const sampled = value.charCodeAt(54) === 49 /* '1' */
  const own = trace.wrapSpanContext({ traceId: value.slice(3, 35), spanId: value.slice(36, 52), traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, ...(traceState !== undefined ? { traceState } : {}) })
  propagator.inject(trace.setSpan(parent, own), headers, headerSetter)
}

/**
 * Whether a call's trace context is its `traceparent` alone — no tracestate, no baggage in
 * the caller's context — so it is written directly rather than through the propagators.
 */
function traceparentAlone (traceState: TraceState | undefined, parent: Context): boolean {
  return traceState === undefined && (parent === ROOT_CONTEXT || propagation.getBaggage(parent) === undefined)
}

/** A W3C `traceparent` header value (version 00). */
function traceparent (traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`
}

/**
 * Random ids, cut from pools made a few hundred at a time: one `randomFillSync` and one hex
 * conversion per refill. Each entry is a trace id and a span id, kept as hex (`hex`, 48
 * characters an entry) for the spans that need ids, and, in the pool of unsampled requests,
 * already written as the `traceparent` header line of an unsampled call (`lines`,
 * `traceparent: 00-<trace id>-<span id>-00\r\n`, 70 characters an entry). So the common case
 * at a low sampling ratio — a request that arrives without a trace and is not sampled — costs
 * one slice of a flat string for the line and one for the value: no id to build, no header
 * value to concatenate (a concatenation is flattened again by each reader of the header), and
 * the HTTP/1.1 head adds the line whole (ir/http-grammar.ts vouchTraceparent). `lines` is
 * written only when an unsampled call first asks for it after a refill: at 100 % sampling
 * nothing does, and writing it cost every recorded request ~500 instructions
 * (bench/tracing-instructions.ts).
 *
 * Two pools, because an id is a slice and keeps its pool's whole string alive (V8 slices
 * strings of 13 characters and more rather than copying them). A recorded span's record holds
 * its ids until it is handed over (trace/record-batches.ts: 64 records, or a second), which at
 * 1 % sampling is ~3,000 requests later. Cut from one pool shared with the unsampled requests,
 * which go through a pool every 256 requests, a batch of records kept a dozen 12 KB strings
 * alive, long enough to be promoted to the old generation: at 1 % and ~23,000 requests a
 * second the old generation grew ~2 MB a second (off: ~0.5), with a full mark-compact every
 * few seconds. The recorded spans' own pool lasts ~85 recorded requests, so a batch keeps one
 * or two alive: ~0.9 MB a second, and no mark-compact in 10 s (docs/tracing-cost-log.md,
 * fifteenth session). Unsampled requests' ids die with their requests.
 */
const POOL_ENTRIES = 256
const ENTRY_HEX = 48
const ENTRY_BYTES = ENTRY_HEX / 2

interface IdPool {
  readonly bytes: Buffer
  /** The entries' ids as hex, `ENTRY_HEX` characters an entry ('' before the first refill). */
  hex: string
  /** The entries as unsampled traceparent lines; '' until written for the current `hex`. */
  lines: string
  /** The next entry to take; POOL_ENTRIES: refill first. */
  next: number
}

function idPool (): IdPool {
  return { bytes: Buffer.allocUnsafe(POOL_ENTRIES * ENTRY_BYTES), hex: '', lines: '', next: POOL_ENTRIES }
}

/** Ids of the requests the sampler drops, and their calls' traceparent lines. */
const unsampledIds = idPool()
/** Ids of recorded spans. */
const recordedIds = idPool()

/** An entry of `lines`: where its value, trace id and span id start, the value's length and the line's. */
const LINE_VALUE = 'traceparent: '.length
const LINE_TRACE_ID = LINE_VALUE + 3
const LINE_SPAN_ID = LINE_TRACE_ID + 33
const VALUE_LENGTH = 55
const LINE_LENGTH = LINE_VALUE + VALUE_LENGTH + 2
/**
 * The lines' bytes, the fixed parts written once; each refill's ids are written over the
 * hex digits (writeLinePool) through `lineView`, eight digits a store.
 */
const lineBytes = Buffer.from(`traceparent: 00-${'0'.repeat(32)}-${'0'.repeat(16)}-00\r\n`.repeat(POOL_ENTRIES), 'latin1')
const lineView = new DataView(lineBytes.buffer, lineBytes.byteOffset, lineBytes.length)
/** A pool's `hex` as bytes, read eight at a time (an entry's 48 digits are 6 words). */
const hexBytes = Buffer.alloc(POOL_ENTRIES * ENTRY_HEX)
const hexView = new DataView(hexBytes.buffer, hexBytes.byteOffset, hexBytes.length)

/** W3C: an all-zero trace or span id is invalid. */
const ZERO_SPAN = '0'.repeat(16)

/** Takes the next entry of a pool (its index), refilling the pool when spent. */
function takeEntry (pool: IdPool): number {
  if (pool.next === POOL_ENTRIES) refill(pool)
  return pool.next++
}

function refill (pool: IdPool): void {
  do {
    randomFillSync(pool.bytes)
    pool.hex = hexOf(pool.bytes)
    // A run of 16 zeros anywhere (an all-zero span id, or half of an all-zero trace id, one
    // chance in 2^64 an id) makes the pool again; a run across two ids only wastes a refill.
  } while (pool.hex.includes(ZERO_SPAN))
  pool.lines = ''
  pool.next = 0
}

/**
 * Bytes to hex, at most HEX_CHUNK bytes a conversion. Node converts to hex through a
 * 512-character stack buffer and mallocs a bigger one. A pool's 12 KB in one conversion was a
 * 12 KB malloc every 256 requests, and a request that large makes glibc consolidate its fast
 * bins (the small chunks the sockets' reads and writes keep freeing) into its sorted bins,
 * where the next small mallocs then look. Sampled by perf on the request thread at 1 %
 * sampling, `malloc_consolidate` and `unlink_chunk` took 0.3–0.6 µs a request against ~0.1
 * with tracing off; chunked, they are back to off's (bench/tracing-profile.ts;
 * docs/tracing-cost-log.md, sixteenth session).
 */
const HEX_CHUNK = 256
function hexOf (bytes: Buffer): string {
  let hex = ''
  for (let at = 0; at < bytes.length; at += HEX_CHUNK) hex += bytes.toString('hex', at, at + HEX_CHUNK)
  return hex
}

/**
 * A pool's entries written as unsampled traceparent lines: its digits copied as bytes once
 * (one native write), then each entry's six 8-byte words moved into its line, then one
 * latin1 string of them all. Storing each byte's two digits from a table (24 16-bit stores)
 * cost ~730 instructions an entry, a quarter of what configuring tracing added to an
 * unsampled request; 4-byte words ~320; 8-byte words ~150 (bench/tracing-instructions.ts
 * --functions; docs/tracing-cost-log.md, twelfth round).
 *
 * The words travel as float64s, the only 8-byte load and store a DataView has that stay
 * numbers (a BigInt would be allocated). That is exact: eight hex digits never make a NaN
 * (whose bits a store may change) nor a denormal, as the top byte of each little-endian word
 * is a digit (0x30–0x39, 0x61–0x66), so its exponent field is neither all ones nor zero.
 */
function writeLinePool (pool: IdPool): void {
  hexBytes.write(pool.hex, 0, 'latin1')
  let from = 0
  for (let at = 0; at < lineBytes.length; at += LINE_LENGTH) {
    let to = at + LINE_TRACE_ID
    for (let i = 0; i < 4; i++, to += 8, from += 8) lineView.setFloat64(to, hexView.getFloat64(from, true), true)
    to = at + LINE_SPAN_ID
    for (let i = 0; i < 2; i++, to += 8, from += 8) lineView.setFloat64(to, hexView.getFloat64(from, true), true)
  }
  pool.lines = lineBytes.toString('latin1')
}

/** A random trace id (16 bytes in hex) from `pool`. */
function randomTraceId (pool: IdPool): string {
  const at = takeEntry(pool) * ENTRY_HEX
  return pool.hex.slice(at, at + 32)
}

/** A random span id (8 bytes in hex) from `pool`. */
function randomSpanId (pool: IdPool): string {
  const at = takeEntry(pool) * ENTRY_HEX + 32
  return pool.hex.slice(at, at + 16)
}

/** The `traceparent` header line of an unsampled call in a new trace (its value at LINE_VALUE). */
function unsampledTraceparentLine (): string {
  const at = takeEntry(unsampledIds) * LINE_LENGTH
  if (unsampledIds.lines === '') writeLinePool(unsampledIds)
  return unsampledIds.lines.slice(at, at + LINE_LENGTH)
}
