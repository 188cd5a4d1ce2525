/**
 * The wire side of the endpoint picker: Envoy's ext_proc gRPC service
 * (`envoy.service.ext_proc.v3.ExternalProcessor/Process`), one stream per request. Unlike the
 * extProc policy's conversation (one answer per message), the picker protocol is full duplex:
 * the gateway sends the request headers and the body's chunks without waiting, and the picker
 * answers the headers only once it has read the body. So sending and receiving are apart here,
 * and an answer is kept whole (its dynamic_metadata carries the pick).
 *
 * One client (one HTTP/2 channel) per picker target and TLS setting lives for the process,
 * so config reloads reuse the connection.
 */

import type * as grpc from '@grpc/grpc-js'
import { callMetadata, envoyProtos, grpcJs } from '../util/envoy-grpc.ts'
import type { ExternalProcessorClient, ProcessingResponseMessage } from '../traffic/ext-proc-grpc.ts'
import type { InferencePoolIR } from '../ir/types.ts'

const PROTO_FILE = 'envoy/service/ext_proc/v3/external_processor.proto'

/** A ProcessingResponse as it arrives, with the fields the picker protocol reads. */
export type PickerMessage = ProcessingResponseMessage & { dynamic_metadata?: StructMessage | null, mode_override?: { response_body_mode?: number } | null }

/**
 * google.protobuf.Struct as @grpc/proto-loader gives it: the well-known types come from
 * protobufjs's own definitions, whose field names are camelCase whatever keepCase says.
 */
export interface StructMessage { fields?: Record<string, ValueMessage> }
export interface ValueMessage {
  nullValue?: number
  numberValue?: number
  stringValue?: string
  boolValue?: boolean
  structValue?: StructMessage
  listValue?: { values?: ValueMessage[] }
}

const clients = new Map<string, ExternalProcessorClient>()

/**
 * The client of a picker. The reference picker serves TLS with a self-signed certificate:
 * `insecureSkipVerify` accepts it (encrypted, unauthenticated), `ca` verifies it.
 * Answers may carry a replaced request body: messages up to `maxBodyBytes` + 1 MiB are read.
 */
export function pickerClient (picker: InferencePoolIR['picker']): ExternalProcessorClient {
  const tls = picker.tls
  const key = `${picker.target}|${tls === null ? 'plain' : tls.insecureSkipVerify ? 'insecure' : tls.ca ?? 'roots'}|${picker.maxBodyBytes}`
  let client = clients.get(key)
  if (client !== undefined) return client
  const g = grpcJs()
  const credentials = tls === null
    ? g.credentials.createInsecure()
    : g.credentials.createSsl(tls.ca !== undefined ? Buffer.from(tls.ca) : null, null, null, tls.insecureSkipVerify ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {})
  let node: unknown = g.loadPackageDefinition(envoyProtos(PROTO_FILE))
  for (const part of 'envoy.service.ext_proc.v3.ExternalProcessor'.split('.')) node = (node as Record<string, unknown>)[part]
  const Ctor = node as grpc.ServiceClientConstructor
  client = new Ctor(picker.target, credentials, {
    'grpc.primary_user_agent': 'portico-inference-pool',
    'grpc.max_reconnect_backoff_ms': 5000,
    'grpc.max_receive_message_length': picker.maxBodyBytes + 1024 * 1024
  }) as unknown as ExternalProcessorClient
  clients.set(key, client)
  return client
}

export type Received =
  | { kind: 'message', message: PickerMessage }
  /** The picker ended the stream cleanly. */
  | { kind: 'closed' }
  | { kind: 'error', reason: string }

/** One request's stream to the picker: messages go out as they come, answers are read in order. */
export class PickerStream {
  private call: grpc.ClientDuplexStream<unknown, PickerMessage> | null = null
  private readonly inbox: PickerMessage[] = []
  private waiter: (() => void) | null = null
  private ended: 'closed' | string | null = null
  private readonly client: ExternalProcessorClient
  closed = false

  constructor (client: ExternalProcessorClient) {
    this.client = client
  }

  /** Opens the stream (with the request's trace context) and sends `message`. */
  send (message: Record<string, unknown>, traceHeaders: Readonly<Record<string, string>> | null = null): void {
    if (this.closed) return
    this.call ??= this.open(traceHeaders)
    if (this.ended === null) this.call.write(message)
  }

  private open (traceHeaders: Readonly<Record<string, string>> | null): grpc.ClientDuplexStream<unknown, PickerMessage> {
    const call = this.client.Process(callMetadata(traceHeaders)) as unknown as grpc.ClientDuplexStream<unknown, PickerMessage>
    call.on('data', (m: PickerMessage) => {
      this.inbox.push(m)
      this.wake()
    })
    call.on('error', (err: grpc.ServiceError) => {
      this.ended ??= err.code === grpcJs().status.CANCELLED && this.closed ? 'closed' : `${grpcJs().status[err.code] ?? err.code}: ${err.details || err.message}`
      this.wake()
    })
    call.on('end', () => {
      this.ended ??= 'closed'
      this.wake()
    })
    return call
  }

  private wake (): void {
    const w = this.waiter
    this.waiter = null
    w?.()
  }

  /** The next answer, waiting at most until `deadline` (Date.now() ms). */
  async receive (deadline: number): Promise<Received> {
    while (this.inbox.length === 0 && this.ended === null && !this.closed) {
      const left = deadline - Date.now()
      if (left <= 0) return { kind: 'error', reason: 'no answer in time' }
      let timer: NodeJS.Timeout | undefined
      await new Promise<void>(resolve => {
        this.waiter = resolve
        timer = setTimeout(resolve, left)
      })
      clearTimeout(timer)
    }
    const next = this.inbox.shift()
    if (next !== undefined) return { kind: 'message', message: next }
    if (this.closed || this.ended === 'closed') return { kind: 'closed' }
    return { kind: 'error', reason: `stream failed: ${this.ended}` }
  }

  /** Half-closes the stream (nothing more to send); cancelled if the picker lingers. */
  finish (): void {
    if (this.closed) return
    this.closed = true
    const call = this.call
    if (call === null || this.ended !== null) return
    call.end()
    setTimeout(() => call.cancel(), 5000).unref()
  }

  /** Ends the stream now (the request is over or failed). */
  close (): void {
    this.closed = true
    if (this.call !== null && this.ended === null) this.call.cancel()
    this.wake()
  }
}

/** A Struct of string fields, as metadata_context and filter_metadata carry them. */
export function stringStruct (fields: Record<string, string | string[]>): StructMessage {
  const out: Record<string, ValueMessage> = {}
  for (const [k, v] of Object.entries(fields)) {
    out[k] = Array.isArray(v) ? { listValue: { values: v.map(s => ({ stringValue: s })) } } : { stringValue: v }
  }
  return { fields: out }
}

/** The string at `namespace`.`key` of a Struct (dynamic_metadata), or undefined. */
export function structString (s: StructMessage | null | undefined, namespace: string, key: string): string | undefined {
  const inner = s?.fields?.[namespace]?.structValue?.fields?.[key]
  return typeof inner?.stringValue === 'string' ? inner.stringValue : undefined
}
