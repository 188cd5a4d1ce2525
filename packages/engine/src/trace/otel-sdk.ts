/**
 * The OpenTelemetry JS SDK behind trace/otel.ts: a tracer provider with Portico's sampler,
 * a batch span processor and an OTLP exporter (gRPC, or HTTP with protobuf bodies to
 * `<endpoint>/v1/traces`), and the W3C propagators. Loaded only when `config.tracing` is
 * set (`createRequestTracing`); the pipeline reaches it through the RequestTracing interface.
 *
 * No context manager is installed: spans are parented explicitly, so nothing runs on the
 * async hooks of every request.
 */

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, SamplingDecision, TraceFlags, createContextKey, propagation, trace, type Context, type Span, type SpanContext, type TraceState } from '@opentelemetry/api'
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core'
import { BatchSpanProcessor, TracerProvider, type Sampler, type SamplingResult, type SpanExporter } from '@opentelemetry/sdk-trace'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { randomFillSync } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import type { SamplingIR } from '../ir/types.ts'
import type { OtelSpan, RequestSpan, RequestTracing, SpanAttributes } from './otel.ts'

/** `config.tracing`, resolved (proxy/settings.ts): where spans go (OTLP/HTTP path default /v1/traces), and how many. */
export interface TracingOptions extends OtlpEndpointOptions {
  /** Requests without a trace: true, false or the share of them to sample. */
  randomSampling: boolean | number
  /** Requests with a trace: true follows the caller's sampled flag, false ignores the caller, a ratio samples that share of the caller's sampled ones. */
  clientSampling: boolean | number
  /** Resource attributes (service.name defaults to portico). */
  resources: Record<string, string>
  /**
   * config.tracing.fields as written (server-span attributes added with CEL or removed): the
   * engine compiles and applies them (compileCelFields, pipeline/run.ts), not the SDK.
   */
  fields?: { add?: Record<string, string>, remove?: string[] }
  /** Export batching (tests shorten it). */
  scheduledDelayMs?: number
  /** Exporter to use instead of OTLP (tests). */
  exporter?: SpanExporter
}

export async function createRequestTracing (options: TracingOptions): Promise<RequestTracing> {
  const exporter = options.exporter ?? await otlpExporter(options)
  const resource = defaultResource().merge(resourceFromAttributes({ 'service.name': 'portico', ...options.resources }))
  const sampler = new PorticoSampler(options.randomSampling, options.clientSampling)
  const provider = new TracerProvider({
    resource,
    sampler,
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: options.scheduledDelayMs ?? 1000, maxQueueSize: 8192, maxExportBatchSize: 512 })]
  })
  return new SdkTracing(provider, sampler)
}

async function otlpExporter (options: TracingOptions): Promise<SpanExporter> {
  const target = await otlpTarget(options, '/v1/traces')
  if (target.protocol === 'http') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto')
    return new OTLPTraceExporter(target.options)
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc')
  return new OTLPTraceExporter(target.options)
}

/** Where an OTLP exporter sends, as the config says it (tracing's and the access log's). */
export interface OtlpEndpointOptions {
  otlpEndpoint: string
  otlpProtocol: 'grpc' | 'http'
  path?: string
  headers: Record<string, string>
}

/**
 * The options of an OTLP exporter of either protocol: OTLP/HTTP posts to the endpoint's
 * `path` (`defaultPath` when unset) with the headers; gRPC sends them as metadata.
 */
export async function otlpTarget (o: OtlpEndpointOptions, defaultPath: string): Promise<{ protocol: 'http', options: { url: string, headers: Record<string, string> } } | { protocol: 'grpc', options: { url: string, metadata: InstanceType<typeof import('@grpc/grpc-js').Metadata> } }> {
  const base = o.otlpEndpoint.replace(/\/+$/, '')
  if (o.otlpProtocol === 'http') return { protocol: 'http', options: { url: `${base}${o.path ?? defaultPath}`, headers: o.headers } }
  const { Metadata } = await import('@grpc/grpc-js')
  const metadata = new Metadata()
  for (const [k, v] of Object.entries(o.headers)) metadata.set(k, v)
  return { protocol: 'grpc', options: { url: base, metadata } }
}

/**
 * Head sampling as agentgateway's `randomSampling` / `clientSampling`: a request that
 * arrives with a trace (a remote parent) follows `clientSampling`, one without follows
 * `randomSampling`; spans under the request's own span follow it.
 */
export class PorticoSampler implements Sampler {
  private readonly random: number
  private readonly client: boolean | number

  constructor (random: boolean | number, client: boolean | number) {
    this.random = ratioOf(random)
    this.client = client
  }

  shouldSample (context: Context, _traceId: string): SamplingResult {
    // A request's own span, sampled by `sampleRequest` already (startRequest).
    if (context.getValue(REQUEST_SAMPLED) === true) return SAMPLED
    return decide(this.sampleRequest(context))
  }

  /** Whether a span in `context` (a request's, or one under it) is sampled. */
  sampleRequest (context: Context): boolean {
    // A listener's own sampling (a gateway's `tracing`), handed over in the request's context.
    const own = context.getValue(LISTENER_SAMPLING) as SamplingIR | undefined
    const random = own?.randomSampling !== undefined ? ratioOf(own.randomSampling) : this.random
    const client = own?.clientSampling ?? this.client
    const parent = trace.getSpanContext(context)
    if (parent === undefined || !trace.isSpanContextValid(parent)) return chance(random)
    const parentSampled = (parent.traceFlags & 1) === 1
    if (!parent.isRemote) return parentSampled
    if (client === false) return chance(random)
    return parentSampled && chance(client === true ? 1 : client)
  }

  toString (): string {
    return `PorticoSampler{random=${this.random}, client=${this.client}}`
  }
}

const SAMPLED: SamplingResult = { decision: SamplingDecision.RECORD_AND_SAMPLED }
const DROPPED: SamplingResult = { decision: SamplingDecision.NOT_RECORD }

/** The context key under which startRequest passes a listener's sampling to the sampler. */
const LISTENER_SAMPLING = createContextKey('portico listener sampling')
/** Set on the context of a request span startRequest has sampled (the SDK asks the sampler again). */
const REQUEST_SAMPLED = createContextKey('portico request sampled')

function ratioOf (s: boolean | number): number {
  return s === true ? 1 : s === false ? 0 : s
}

function decide (sampled: boolean): SamplingResult {
  return sampled ? SAMPLED : DROPPED
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

class SdkTracing implements RequestTracing {
  private readonly provider: TracerProvider
  private readonly tracer: ReturnType<TracerProvider['getTracer']>
  private readonly sampler: PorticoSampler

  constructor (provider: TracerProvider, sampler: PorticoSampler) {
    this.provider = provider
    this.sampler = sampler
    this.tracer = provider.getTracer('portico')
  }

  startRequest (headers: IncomingHttpHeaders, method: string, sampling?: SamplingIR | null): RequestSpan {
    // No traceparent and no baggage: the extract would return the root context as it is.
    const parent = headers.traceparent === undefined && headers.baggage === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter)
    const context = sampling == null ? parent : parent.setValue(LISTENER_SAMPLING, sampling)
    // Decided here, so a request the sampler drops (most, at a low ratio) costs ids and a
    // header, not the SDK's span machinery.
    if (!this.sampler.sampleRequest(context)) return new UnsampledRequestSpan(parent)
    const span = this.tracer.startSpan(method, { kind: SpanKind.SERVER }, context.setValue(REQUEST_SAMPLED, true))
    return new SdkRequestSpan(this.tracer, span, parent)
  }

  async shutdown (): Promise<void> {
    await this.provider.shutdown()
  }
}

/** A child span (or the request's own): the OtelSpan face of an SDK span. */
class SdkSpan implements OtelSpan {
  protected readonly span: Span

  constructor (span: Span) {
    this.span = span
  }

  get sdkSpan (): Span {
    return this.span
  }

  setAttributes (attrs: SpanAttributes): void {
    // The SDK skips undefined values itself (with a diagnostic per value): filtered here.
    const span = this.span
    for (const key in attrs) {
      const v = attrs[key]
      if (v !== undefined && v !== null) span.setAttribute(key, v)
    }
  }

  setError (type: string, message?: string): void {
    this.span.setAttribute('error.type', type)
    this.span.setStatus(message !== undefined ? { code: SpanStatusCode.ERROR, message } : { code: SpanStatusCode.ERROR })
  }

  updateName (name: string): void {
    this.span.updateName(name)
  }

  end (endTime?: number): void {
    this.span.end(endTime)
  }
}

class SdkRequestSpan extends SdkSpan implements RequestSpan {
  readonly recording: boolean
  private readonly tracer: ReturnType<TracerProvider['getTracer']>
  /** The caller's context (its baggage goes on to the calls this request makes). */
  private readonly parent: Context
  private readonly sc: SpanContext
  /** The caller's context with this span in it: the parent of every child span (made once). */
  private withSpan: Context | null = null
  /**
   * No baggage and no tracestate to pass on: a call's trace context is its `traceparent`
   * alone, written here rather than through the propagators (the common case, and the
   * propagators' context lookups and validation are a good part of a call span's cost).
   */
  private readonly traceparentOnly: boolean

  constructor (tracer: ReturnType<TracerProvider['getTracer']>, span: Span, parent: Context) {
    super(span)
    this.tracer = tracer
    this.parent = parent
    this.sc = span.spanContext()
    this.recording = span.isRecording()
    this.traceparentOnly = traceparentAlone(this.sc.traceState, parent)
  }

  get traceId (): string {
    return this.sc.traceId
  }

  get spanId (): string {
    return this.sc.spanId
  }

  child (name: string, kind: 'client' | 'internal', attrs: SpanAttributes, startTime?: number): OtelSpan | null {
    if (!this.recording) return null
    const options = { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, ...(startTime !== undefined ? { startTime } : {}) }
    this.withSpan ??= trace.setSpan(this.parent, this.span)
    const child = new SdkSpan(this.tracer.startSpan(name, options, this.withSpan))
    child.setAttributes(attrs)
    return child
  }

  inject (headers: HeaderMap, span?: OtelSpan | null): void {
    const from = span instanceof SdkSpan ? span.sdkSpan : this.span
    // A caller's tracestate belongs to its traceparent, which is being replaced (set
    // undefined, not deleted: see http/headers.ts dropUpstreamHeader).
    if (headers.tracestate !== undefined) headers.tracestate = undefined
    if (this.traceparentOnly) {
      const sc = from.spanContext()
      headers.traceparent = traceparent(sc.traceId, sc.spanId, (sc.traceFlags & 1) === 1)
      return
    }
    propagator.inject(from === this.span ? (this.withSpan ??= trace.setSpan(this.parent, this.span)) : trace.setSpan(this.parent, from), headers, headerSetter)
  }
}

/**
 * The span of a request the sampler dropped: nothing is recorded or exported, but the call
 * it makes still carries the trace on, flagged unsampled (so the backend does not start a
 * trace of its own), under a span id of its own — as the SDK's non-recording span would.
 */
class UnsampledRequestSpan implements RequestSpan {
  readonly recording = false
  readonly traceId: string
  readonly spanId: string
  /** The caller's context (its tracestate and baggage go on to the calls). */
  private readonly parent: Context
  private readonly traceState: TraceState | undefined

  constructor (parent: Context) {
    const caller = parent === ROOT_CONTEXT ? undefined : trace.getSpanContext(parent)
    this.parent = parent
    this.traceId = caller !== undefined && trace.isSpanContextValid(caller) ? caller.traceId : randomId(16)
    this.spanId = randomId(8)
    this.traceState = caller?.traceState
  }

  setAttributes (): void {}
  setError (): void {}
  updateName (): void {}
  end (): void {}

  child (): null {
    return null
  }

  inject (headers: HeaderMap): void {
    if (headers.tracestate !== undefined) headers.tracestate = undefined
    if (traceparentAlone(this.traceState, this.parent)) {
      headers.traceparent = traceparent(this.traceId, this.spanId, false)
      return
    }
    const own = trace.wrapSpanContext({ traceId: this.traceId, spanId: this.spanId, traceFlags: TraceFlags.NONE, ...(this.traceState !== undefined ? { traceState: this.traceState } : {}) })
    propagator.inject(trace.setSpan(this.parent, own), headers, headerSetter)
  }
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

/** Random bytes for ids, filled a few hundred ids at a time. */
const idPool = Buffer.allocUnsafe(24 * 256)
let idAt = idPool.length

/** A random trace (16 bytes) or span (8 bytes) id in hex, never all zeros (W3C: invalid). */
function randomId (bytes: 8 | 16): string {
  for (;;) {
    if (idAt + bytes > idPool.length) {
      randomFillSync(idPool)
      idAt = 0
    }
    const at = idAt
    idAt += bytes
    for (let i = at; i < at + bytes; i++) if (idPool[i] !== 0) return idPool.toString('hex', at, at + bytes)
  }
}
