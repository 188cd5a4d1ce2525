/**
 * Envoy's external processing protocol over gRPC: `envoy.service.ext_proc.v3.
 * ExternalProcessor/Process`, one bidirectional stream per HTTP request, with the protos in
 * the repository's `protos/` directory (Envoy's field numbers). One client (one HTTP/2
 * channel) per target lives in PolicyServices, so reloads reuse the connection.
 *
 * The stream is a conversation: Portico sends a ProcessingRequest (request headers, request
 * body, response headers, response body) and waits — at most the message timeout — for the
 * one ProcessingResponse that answers it. A server that closes the stream cleanly lets the
 * request go on without it (as Envoy does); one that closes it with an error, answers out of
 * turn or is too slow is a failure.
 */

import type * as grpc from '@grpc/grpc-js'
import type { PackageDefinition } from '@grpc/proto-loader'
import { callMetadata, envoyClient, envoyProtos, grpcJs } from '../util/envoy-grpc.ts'
import type { HeaderMap } from '../ir/header-map.ts'

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
  body_mutation?: { body?: Buffer, clear_body?: boolean, mutation?: string }
}

export interface ProcessingResponseMessage {
  request_headers?: { response?: CommonResponseMessage }
  response_headers?: { response?: CommonResponseMessage }
  request_body?: { response?: CommonResponseMessage }
  response_body?: { response?: CommonResponseMessage }
  immediate_response?: { status?: { code?: number }, headers?: HeaderMutationMessage, body?: Buffer, details?: string }
  response?: string
}

export type ProcessingPhase = 'request_headers' | 'request_body' | 'response_headers' | 'response_body'

export interface ExternalProcessorClient extends grpc.Client {
  Process(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<unknown, ProcessingResponseMessage>
}

/** A client for `target` (`host:port`), plaintext or TLS with the system's roots. */
export function createExtProcClient (target: string, tls: boolean): ExternalProcessorClient {
  return envoyClient<ExternalProcessorClient>(PROTO_FILE, 'envoy.service.ext_proc.v3.ExternalProcessor', target, tls, 'portico-ext-proc')
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
  | { kind: 'response', response: CommonResponseMessage }
  | { kind: 'immediate', immediate: NonNullable<ProcessingResponseMessage['immediate_response']> }
  /** The server ended the stream cleanly: go on without it. */
  | { kind: 'closed' }
  | { kind: 'error', reason: string }

/** One request's stream to the processor. Opened on first use; closed when the request ends. */
export class ExtProcStream {
  private call: grpc.ClientDuplexStream<unknown, ProcessingResponseMessage> | null = null
  private readonly inbox: ProcessingResponseMessage[] = []
  private waiter: (() => void) | null = null
  private ended: 'closed' | string | null = null
  private readonly client: ExternalProcessorClient
  private readonly timeoutMs: number
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

  private open (): grpc.ClientDuplexStream<unknown, ProcessingResponseMessage> {
    const call = this.client.Process(callMetadata(this.traceHeaders))
    call.on('data', (m: ProcessingResponseMessage) => {
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

  /** Sends one message and waits for the answer to it (`expect` names the answer's field). */
  async exchange (message: Record<string, unknown>, expect: ProcessingPhase): Promise<ExchangeResult> {
    if (this.closed) return { kind: 'closed' }
    this.call ??= this.open()
    if (this.ended === null) this.call.write(message)
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
    if (next.immediate_response !== undefined && next.immediate_response !== null) return { kind: 'immediate', immediate: next.immediate_response }
    const answer = next[expect]
    if (answer === undefined || answer === null) {
      return { kind: 'error', reason: `protocol error: expected a ${expect} answer, got ${next.response ?? 'an empty message'}` }
    }
    return { kind: 'response', response: answer.response ?? {} }
  }

  /** Half-closes the stream (no more messages); the server may end it. Cancelled if it lingers. */
  finish (): void {
    if (this.closed) return
    this.closed = true
    if (this.call === null) return
    const call = this.call
    if (this.ended === null) {
      call.end()
      setTimeout(() => call.cancel(), 5000).unref()
    }
  }

  /** Ends the stream now (the request is over). */
  close (): void {
    this.closed = true
    if (this.call !== null && this.ended === null) this.call.cancel()
  }
}
