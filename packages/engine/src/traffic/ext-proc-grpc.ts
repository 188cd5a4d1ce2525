/**
 * Envoy's external processing protocol over gRPC: `envoy.service.ext_proc.v3.
 * ExternalProcessor/Process`, one bidirectional stream per HTTP request, with the protos in
 * the repository's `protos/` directory (Envoy's field numbers). One client (one HTTP/2
 * channel) per target lives in PolicyServices, so reloads reuse the connection.
 *
 * The stream is a conversation: Portico sends a ProcessingRequest (request headers, request
 * body, response headers, response body) and waits — at most the message timeout — for the
 * one ProcessingResponse that answers it (`exchange`). In the full-duplex body mode the two
 * directions are decoupled (`write` sends without waiting, `receive` takes the next answer
 * whenever it comes; http/ext-proc-request-phase.ts pairs them). A server that closes the
 * stream cleanly lets the request go on without it (as Envoy does); one that closes it with
 * an error, answers out of turn or is too slow is a failure.
 */

import type { MethodDefinition, PackageDefinition } from '@grpc/proto-loader'
import { envoyProtos } from '../util/envoy-grpc.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { decodeProcessingResponse, encodeProcessingRequestFramed } from './ext-proc-codec.ts'
import { framed, GRPC_STATUS, GRPC_STATUS_NAMES, GrpcStreamChannel, type GrpcCall, type GrpcChannelOptions, type GrpcCodec, type GrpcStatus } from './grpc-stream-channel.ts'

export const PROCESS_METHOD = '/envoy.service.ext_proc.v3.ExternalProcessor/Process'

const PROTO_FILE = 'envoy/service/ext_proc/v3/external_processor.proto'

/** The loaded protos (also for tests that run a processor of their own). */
export function extProcProtos (): PackageDefinition {
  return envoyProtos(PROTO_FILE)
}

export interface HeaderValueOptionMessage {
  header?: { key?: string, value?: string, raw_value?: Buffer }
  append?: { value?: boolean } | null
  append_action?: number
}

export interface HeaderMutationMessage {
  set_headers?: HeaderValueOptionMessage[]
  remove_headers?: string[]
}

export interface CommonResponseMessage {
  /** 0 CONTINUE, 1 CONTINUE_AND_REPLACE. */
  status?: number
  header_mutation?: HeaderMutationMessage
  /** `streamed_response`: the FULL_DUPLEX_STREAMED mode's body (chunks of the new body, the last with end_of_stream). */
  body_mutation?: { body?: Buffer, clear_body?: boolean, streamed_response?: { body?: Buffer, end_of_stream?: boolean }, mutation?: string }
}

export interface ImmediateResponseMessage { status?: { code?: number }, headers?: HeaderMutationMessage, body?: Buffer, details?: string }

/**
 * google.protobuf.Struct as @grpc/proto-loader decodes it: its fields camelCase even with
 * keepCase (protobufjs defines the well-known types itself), the oneof named in `kind`.
 */
export interface StructMessage { fields?: Record<string, ValueMessage> }
export interface ValueMessage {
  kind?: string
  nullValue?: number
  numberValue?: number
  stringValue?: string
  boolValue?: boolean
  structValue?: StructMessage
  listValue?: { values?: ValueMessage[] }
}

/** ProcessingMode (envoy.extensions.filters.http.ext_proc.v3): enums as numbers. */
export interface ProcessingModeMessage {
  request_header_mode?: number
  response_header_mode?: number
  request_body_mode?: number
  response_body_mode?: number
}

export interface ProcessingResponseMessage {
  request_headers?: { response?: CommonResponseMessage }
  response_headers?: { response?: CommonResponseMessage }
  request_body?: { response?: CommonResponseMessage }
  response_body?: { response?: CommonResponseMessage }
  request_trailers?: { header_mutation?: HeaderMutationMessage }
  response_trailers?: { header_mutation?: HeaderMutationMessage }
  immediate_response?: ImmediateResponseMessage
  dynamic_metadata?: StructMessage
  mode_override?: ProcessingModeMessage
  response?: string
}

export type ProcessingPhase = 'request_headers' | 'request_body' | 'response_headers' | 'response_body'

/** ProcessingMode.BodySendMode values (Envoy's numbers). */
export const BODY_SEND_MODE = { none: 0, streamed: 1, buffered: 2, bufferedPartial: 3, fullDuplexStreamed: 4 } as const

export type BodyMode = 'none' | 'buffered' | 'streamed' | 'fullDuplexStreamed'

/** A BodySendMode number as Portico's name; BUFFERED_PARTIAL (unsupported) and unknown values are null. */
export function bodyModeOf (n: number | undefined): BodyMode | null {
  switch (n ?? 0) {
    case 0: return 'none'
    case 1: return 'streamed'
    case 2: return 'buffered'
    case 4: return 'fullDuplexStreamed'
    default: return null
  }
}

/** Nesting kept of a Struct from the processor (deeper values are null): hostile input stays bounded. */
const MAX_STRUCT_DEPTH = 16

/** A Struct as plain JSON (objects, arrays, strings, numbers, booleans, null). */
export function structToJson (s: StructMessage | null | undefined, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = valueToJson(v, depth + 1)
  return out
}

function valueToJson (v: ValueMessage | null | undefined, depth: number): unknown {
  if (v === null || v === undefined || depth > MAX_STRUCT_DEPTH) return null
  if (v.stringValue !== undefined) return v.stringValue
  if (v.numberValue !== undefined) return v.numberValue
  if (v.boolValue !== undefined) return v.boolValue
  if (v.structValue !== undefined && v.structValue !== null) return structToJson(v.structValue, depth)
  if (v.listValue !== undefined && v.listValue !== null) return (v.listValue.values ?? []).map(x => valueToJson(x, depth + 1))
  return null
}

/** Plain JSON as a Struct message (for metadata_context). */
export function jsonToStruct (o: Record<string, unknown>): StructMessage {
  const fields: Record<string, ValueMessage> = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = jsonToValue(v)
  return { fields }
}

function jsonToValue (v: unknown): ValueMessage {
  if (typeof v === 'string') return { stringValue: v }
  if (typeof v === 'number') return { numberValue: v }
  if (typeof v === 'boolean') return { boolValue: v }
  if (Array.isArray(v)) return { listValue: { values: v.map(jsonToValue) } }
  if (v !== null && typeof v === 'object') return { structValue: jsonToStruct(v as Record<string, unknown>) }
  return { nullValue: 0 }
}

/** Metadata (envoy.config.core.v3) from namespace → JSON object, as ProcessingRequest.metadata_context takes it. */
export function metadataContextMessage (byNamespace: Record<string, Record<string, unknown>>): { filter_metadata: Record<string, StructMessage> } {
  const filter_metadata: Record<string, StructMessage> = {}
  for (const [ns, o] of Object.entries(byNamespace)) filter_metadata[ns] = jsonToStruct(o)
  return { filter_metadata }
}

/** One channel (one HTTP/2 connection) to an external processor: traffic/grpc-stream-channel.ts. */
export type ExternalProcessorClient = GrpcStreamChannel<Record<string, unknown>, ProcessingResponseMessage>

let codec: GrpcCodec<Record<string, unknown>, ProcessingResponseMessage> | null = null

/**
 * ProcessingRequest / ProcessingResponse in @grpc/proto-loader's shapes (snake_case, enums as
 * numbers): encoded and decoded by hand (traffic/ext-proc-codec.ts), a request with a field
 * the hand encoder does not cover by protobufjs.
 */
function processCodec (): GrpcCodec<Record<string, unknown>, ProcessingResponseMessage> {
  if (codec === null) {
    let method: MethodDefinition<Record<string, unknown>, ProcessingResponseMessage> | null = null
    const fallback = (m: Record<string, unknown>): Buffer => {
      method ??= (envoyProtos(PROTO_FILE)['envoy.service.ext_proc.v3.ExternalProcessor'] as Record<string, MethodDefinition<Record<string, unknown>, ProcessingResponseMessage>>).Process!
      return framed(method.requestSerialize(m))
    }
    codec = { frame: m => encodeProcessingRequestFramed(m) ?? fallback(m), decode: decodeProcessingResponse }
  }
  return codec
}

/** A channel to an external processor at `options.target`. */
export function extProcChannel (options: GrpcChannelOptions): ExternalProcessorClient {
  return new GrpcStreamChannel(options, PROCESS_METHOD, processCodec())
}

/** A client for `target` (`host:port`), plaintext or TLS with the system's roots. */
export function createExtProcClient (target: string, tls: boolean): ExternalProcessorClient {
  return extProcChannel({ target, tls: tls ? {} : null, userAgent: 'portico-ext-proc' })
}

/** Request or response headers as Envoy sends them: lower-case names, values in raw_value, one entry per value. */
export function headerMapMessage (pseudo: Record<string, string>, headers: HeaderMap): { headers: Array<{ key: string, raw_value: Buffer }> } {
  const out: Array<{ key: string, raw_value: Buffer }> = []
  for (const [key, value] of Object.entries(pseudo)) out.push({ key, raw_value: Buffer.from(value) })
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) out.push({ key, raw_value: Buffer.from(v) })
  }
  return { headers: out }
}

export type ExchangeResult =
  | {
    kind: 'response'
    response: CommonResponseMessage
    /** The message's dynamic_metadata (namespace → JSON), when it had any. */
    dynamicMetadata?: Record<string, unknown>
    modeOverride?: ProcessingModeMessage
  }
  | { kind: 'immediate', immediate: NonNullable<ProcessingResponseMessage['immediate_response']> }
  /** The server ended the stream cleanly: go on without it. */
  | { kind: 'closed' }
  | { kind: 'error', reason: string }

/** What `receive` gives: the next message, or why there is none. */
export type Received =
  | { kind: 'message', message: ProcessingResponseMessage }
  | { kind: 'closed' }
  | { kind: 'error', reason: string }

/** One received message as the answer to `expect`: anything else (but an immediate response) is out of turn. */
export function answerTo (r: Received, expect: ProcessingPhase): ExchangeResult {
  if (r.kind !== 'message') return r
  const next = r.message
  if (next.immediate_response !== undefined && next.immediate_response !== null) return { kind: 'immediate', immediate: next.immediate_response }
  const answer = next[expect]
  if (answer === undefined || answer === null) {
    return { kind: 'error', reason: `protocol error: expected a ${expect} answer, got ${next.response ?? 'an empty message'}` }
  }
  const out: ExchangeResult = { kind: 'response', response: answer.response ?? {} }
  if (next.dynamic_metadata !== undefined && next.dynamic_metadata !== null) out.dynamicMetadata = structToJson(next.dynamic_metadata)
  if (next.mode_override !== undefined && next.mode_override !== null) out.modeOverride = next.mode_override
  return out
}

/** How long a half-closed stream may wait for the processor to end it before it is cancelled. */
const LINGER_MS = 5000

/** Answers held unread on one stream. */
const MAX_UNREAD = 1024

/** One request's stream to the processor. Opened on first use; closed when the request ends. */
export class ExtProcStream {
  private call: GrpcCall<Record<string, unknown>> | null = null
  private readonly inbox: ProcessingResponseMessage[] = []
  private waiter: (() => void) | null = null
  private ended: 'closed' | string | null = null
  private readonly client: ExternalProcessorClient
  private readonly timeoutMs: number
  /** Cancels a half-closed call the processor does not end (`finish`); cleared when it ends. */
  private linger: NodeJS.Timeout | null = null
  /** Resolves a write waiting for flow control (`drain`). */
  private drained: (() => void) | null = null
  closed = false
  /**
   * The W3C trace context the stream is opened with (its first exchange's span; trace/otel.ts
   * callTraceHeaders): metadata goes with the stream's start, not with each message.
   */
  traceHeaders: Readonly<Record<string, string>> | null = null

  constructor (client: ExternalProcessorClient, timeoutMs: number) {
    this.client = client
    this.timeoutMs = timeoutMs
  }

  private open (): GrpcCall<Record<string, unknown>> {
    const call: GrpcCall<Record<string, unknown>> = this.client.call(this.traceHeaders, {
      message: (m: ProcessingResponseMessage) => {
        // Answers not read yet (a full-duplex processor answering while the client's body is
        // still coming) are held here: a processor that floods them is cut, not buffered.
        if (this.inbox.length >= MAX_UNREAD) {
          this.ended ??= `more than ${MAX_UNREAD} answers unread`
          call.cancel()
        } else this.inbox.push(m)
        this.wake()
      },
      drain: () => {
        const d = this.drained
        this.drained = null
        d?.()
      },
      end: (status: GrpcStatus | null) => {
        // The timer would keep the call (its HTTP/2 stream, this object) alive for seconds:
        // at thousands of requests a second that is old-generation garbage.
        if (this.linger !== null) clearTimeout(this.linger)
        this.linger = null
        if (status === null) this.ended ??= 'closed'
        else this.ended ??= status.code === GRPC_STATUS.CANCELLED && this.closed ? 'closed' : `${GRPC_STATUS_NAMES[status.code] ?? status.code}: ${status.details}`
        this.wake()
      }
    })
    return call
  }

  private wake (): void {
    const w = this.waiter
    this.waiter = null
    w?.()
    for (const watcher of this.watchers.splice(0)) watcher()
  }

  /** Sends one message and waits for the answer to it (`expect` names the answer's field). */
  async exchange (message: Record<string, unknown>, expect: ProcessingPhase): Promise<ExchangeResult> {
    if (this.closed) return { kind: 'closed' }
    const sent = await this.write(message)
    if (sent !== null) return sent
    return answerTo(await this.receive(), expect)
  }

  /**
   * Sends one message without waiting for an answer. Resolves once gRPC has taken it — at
   * once, or when its flow control lets more through — so a processor that stops reading
   * holds at most one message here; a wait longer than the message timeout is an error.
   * Null when sent; a closed stream or failure otherwise.
   */
  async write (message: Record<string, unknown>): Promise<Extract<ExchangeResult, { kind: 'closed' | 'error' }> | null> {
    if (this.closed) return { kind: 'closed' }
    this.call ??= this.open()
    if (this.ended !== null) return null
    if (this.call.write(message)) return null
    let timer: NodeJS.Timeout | undefined
    const drained = await new Promise<boolean>(resolve => {
      const done = (v: boolean): void => {
        clearTimeout(timer)
        this.drained = null
        this.waiter = null
        resolve(v)
      }
      this.drained = () => done(true)
      // Ended meanwhile (wake): the reader reports why.
      this.waiter = () => done(true)
      timer = setTimeout(() => done(false), this.timeoutMs)
    })
    return drained ? null : { kind: 'error', reason: `the processor took no message for ${this.timeoutMs}ms` }
  }

  /** Whether an answer is waiting (receive would not wait). */
  get pending (): boolean {
    return this.inbox.length > 0
  }

  /** Readers watching for an answer without taking it (readable). */
  private readonly watchers: Array<() => void> = []

  /**
   * Resolves once an answer is waiting or the stream has ended, without taking it and never
   * timing out: a full-duplex response phase watches a processor that may hold its answers
   * while the backend's body is idle (http/ext-proc-response-phase.ts).
   */
  async readable (): Promise<'answer' | 'ended'> {
    while (this.inbox.length === 0 && this.ended === null && !this.closed) await new Promise<void>(resolve => this.watchers.push(resolve))
    return this.inbox.length > 0 ? 'answer' : 'ended'
  }

  /** The next message of the processor, waiting at most the message timeout. */
  async receive (): Promise<Received> {
    const deadline = Date.now() + this.timeoutMs
    while (this.inbox.length === 0 && this.ended === null) {
      const left = deadline - Date.now()
      if (left <= 0) return { kind: 'error', reason: `no answer within ${this.timeoutMs}ms` }
      let timer: NodeJS.Timeout | undefined
      await new Promise<void>(resolve => {
        this.waiter = resolve
        timer = setTimeout(resolve, left)
      })
      clearTimeout(timer)
    }
    const next = this.inbox.shift()
    if (next === undefined) return this.ended === 'closed' ? { kind: 'closed' } : { kind: 'error', reason: `stream failed: ${this.ended}` }
    return { kind: 'message', message: next }
  }

  /** Half-closes the stream (no more messages); the server may end it. Cancelled if it lingers. */
  finish (): void {
    if (this.closed) return
    this.closed = true
    if (this.call === null) return
    const call = this.call
    if (this.ended === null) {
      call.end()
      this.linger = setTimeout(() => call.cancel(), LINGER_MS).unref()
    }
  }

  /**
   * Ends the stream now (the request is over). A stream already half-closed (`finish`) is
   * left to end on its own (its timer still cancels it if it lingers): cancelling it would
   * send an RST_STREAM for nearly every request — the processor's status rarely arrives
   * before the client's response closes — and a processor on Node's HTTP/2 (nghttp2) takes
   * a stream of those for a rapid-reset flood and drops the whole session with every stream
   * in flight on it (bench/inference-pool.ts; e2e/test/ext-proc-stream-end.test.ts).
   */
  close (): void {
    if (this.closed) return
    this.closed = true
    if (this.call !== null && this.ended === null) this.call.cancel()
  }
}
