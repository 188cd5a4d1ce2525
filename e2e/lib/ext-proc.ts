/**
 * A real Envoy external processing server for tests: @grpc/grpc-js serving
 * `envoy.service.ext_proc.v3.ExternalProcessor/Process` (a bidirectional stream) from the
 * repository's protos. Each stream's messages are recorded; the test's handler answers
 * each with a ProcessingResponse, a list of them (written in order: the streamed modes'
 * processors answer several messages at once, or none — `[]` — until they have seen more),
 * or `'hang'` (no answer), `'close'` (ends the stream cleanly) or `'error'` (ends it with INTERNAL).
 */

import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'

export type HeaderMapMessage = { headers?: Array<{ key?: string, value?: string, raw_value?: Buffer }> }

export interface ProcessingRequest {
  request_headers?: { headers?: HeaderMapMessage, end_of_stream?: boolean }
  response_headers?: { headers?: HeaderMapMessage, end_of_stream?: boolean }
  request_body?: { body?: Buffer, end_of_stream?: boolean }
  response_body?: { body?: Buffer, end_of_stream?: boolean }
  protocol_config?: { request_body_mode?: number, response_body_mode?: number }
  metadata_context?: { filter_metadata?: Record<string, { fields?: Record<string, { stringValue?: string, listValue?: { values?: Array<{ stringValue?: string }> } }> }> }
  request?: string
}

export type ProcessingReply = Record<string, unknown> | Array<Record<string, unknown>> | 'hang' | 'close' | 'error'

export interface ExtProcServer {
  host: string
  /** Every stream, with the messages it carried in order. */
  streams: ProcessingRequest[][]
  /** The metadata each stream was opened with (same order as streams). */
  metadata: Array<Record<string, unknown>>
  handler: (request: ProcessingRequest, stream: ProcessingRequest[]) => ProcessingReply | Promise<ProcessingReply>
  close(): Promise<void>
}

// The same protos, loaded the same way, as the proxy's client.
const packageDefinition = envoyProtos('envoy/service/ext_proc/v3/external_processor.proto')

/** The headers of a HeaderMap as name → value (values from raw_value or value; repeated ones joined with ','). */
export function headersOf (map: HeaderMapMessage | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const h of map?.headers ?? []) {
    const v = h.raw_value !== undefined && h.raw_value.length > 0 ? Buffer.from(h.raw_value).toString('utf8') : (h.value ?? '')
    const k = h.key ?? ''
    out[k] = out[k] === undefined ? v : `${out[k]},${v}`
  }
  return out
}

/** A CONTINUE answer to `phase` with optional header and body mutations. */
export function answer (phase: 'request_headers' | 'response_headers' | 'request_body' | 'response_body', common: Record<string, unknown> = {}): Record<string, unknown> {
  return { [phase]: { response: common } }
}

/** A FULL_DUPLEX_STREAMED body answer: `body` is the next chunk of the new body. */
export function streamedBody (phase: 'request_body' | 'response_body', body: Buffer | string, endOfStream: boolean, common: Record<string, unknown> = {}): Record<string, unknown> {
  return { [phase]: { response: { ...common, body_mutation: { streamed_response: { body: Buffer.from(body), end_of_stream: endOfStream } } } } }
}

/** A google.protobuf.Struct of string values, as dynamic_metadata takes it (namespace → key → value). */
export function metadataStruct (byNamespace: Record<string, Record<string, string>>): Record<string, unknown> {
  const fields: Record<string, unknown> = {}
  for (const [ns, o] of Object.entries(byNamespace)) {
    const inner: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(o)) inner[k] = { stringValue: v }
    fields[ns] = { structValue: { fields: inner } }
  }
  return { fields }
}

/** The phase a ProcessingRequest is for. */
export function phaseOf (r: ProcessingRequest): 'request_headers' | 'response_headers' | 'request_body' | 'response_body' {
  return (r.request ?? Object.keys(r).find(k => k.endsWith('_headers') || k.endsWith('_body'))) as never
}

/** The ExternalProcessor service's client constructor (its `.service` for a server). */
function externalProcessor (): grpc.ServiceClientConstructor {
  const pkg = grpc.loadPackageDefinition(packageDefinition) as unknown as { envoy: { service: { ext_proc: { v3: { ExternalProcessor: grpc.ServiceClientConstructor } } } } }
  return pkg.envoy.service.ext_proc.v3.ExternalProcessor
}

/**
 * The server side of one Process stream's end: `ended` once it has ended either way (the
 * gateway half-closed, cancelled or broke it, or the processor ended it); `end` closes it
 * cleanly, `fail` ends it with gRPC INTERNAL and `details`. The gateway's half-close is
 * answered with the processor's.
 */
export interface ProcessStreamEnd {
  readonly ended: boolean
  end: () => void
  fail: (details: string) => void
}

export function processStreamEnd (call: grpc.ServerDuplexStream<unknown, unknown>): ProcessStreamEnd {
  let ended = false
  const end = (): void => {
    if (ended) return
    ended = true
    call.end()
  }
  call.on('end', end)
  call.on('error', () => { ended = true })
  call.on('cancelled', () => { ended = true })
  return {
    get ended () { return ended },
    end,
    fail: details => {
      ended = true
      call.emit('error', Object.assign(new Error(details), { code: grpc.status.INTERNAL, details }))
    }
  }
}

/**
 * A gRPC server of ExternalProcessor whose `Process` streams `process` handles, on a free port
 * of 127.0.0.1: TLS with `tls`'s certificate, else plaintext. Its `host:port`, and `close`
 * (a forced shutdown).
 */
export async function serveExtProc<Request> (process: (call: grpc.ServerDuplexStream<Request, unknown>) => void, tls?: { cert: Buffer, key: Buffer }): Promise<{ host: string, close: () => Promise<void> }> {
  const server = new grpc.Server()
  server.addService(externalProcessor().service, { Process: process })
  const credentials = tls === undefined ? grpc.ServerCredentials.createInsecure() : grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }])
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', credentials, (err, p) => err !== null ? reject(err) : resolve(p))
  })
  return { host: `127.0.0.1:${port}`, close: async () => { server.forceShutdown() } }
}

export async function startExtProcServer (handler: ExtProcServer['handler'] = r => answer(phaseOf(r))): Promise<ExtProcServer> {
  const state: ExtProcServer = { host: '', streams: [], metadata: [], handler, close: async () => {} }
  const server = await serveExtProc((call: grpc.ServerDuplexStream<ProcessingRequest, unknown>) => {
    const messages: ProcessingRequest[] = []
    state.streams.push(messages)
    state.metadata.push(call.metadata.getMap())
    const stream = processStreamEnd(call)
    call.on('data', (m: ProcessingRequest) => {
      messages.push(m)
      Promise.resolve(state.handler(m, messages)).then(reply => {
        if (stream.ended) return
        if (reply === 'hang') return
        if (reply === 'close') {
          stream.end()
          return
        }
        if (reply === 'error') {
          stream.fail('processor broke')
          return
        }
        for (const m of Array.isArray(reply) ? reply : [reply]) call.write(m)
      }, () => {})
    })
  })
  state.host = server.host
  state.close = server.close
  return state
}

/** An ext_proc answer as the client reads it (the fields tests look at). */
export interface ProcessingAnswer {
  request_headers?: { response?: CommonAnswer }
  response_headers?: { response?: CommonAnswer }
  request_body?: { response?: CommonAnswer }
  response_body?: { response?: CommonAnswer }
  immediate_response?: { status?: { code?: number }, body?: Buffer }
  /** google.protobuf.Struct (camelCase fields: protobufjs's well-known types ignore keepCase). */
  dynamic_metadata?: { fields?: Record<string, { structValue?: { fields?: Record<string, { stringValue?: string }> } }> }
  response?: string
}

export interface CommonAnswer {
  header_mutation?: { set_headers?: Array<{ header?: { key?: string, value?: string, raw_value?: Buffer } }> }
  body_mutation?: { body?: Buffer, streamed_response?: { body?: Buffer, end_of_stream?: boolean } }
  clear_route_cache?: boolean
}

/** The header mutation of an answer as lower-case name → value (pickers write `X-Echo-Set-Header`). */
export function setHeadersOf (common: CommonAnswer | undefined): Record<string, string> {
  return headersOf({ headers: (common?.header_mutation?.set_headers ?? []).map(h => ({ ...h.header, key: h.header?.key?.toLowerCase() })) })
}

/**
 * A client side of one ext_proc stream, as a gateway opens it: `send` writes a
 * ProcessingRequest, `next` waits (bounded) for the processor's next answer, `end` half-closes.
 * TLS without verifying the processor's certificate (the reference endpoint picker serves a
 * self-signed one, with no name in it), or plaintext.
 */
export interface ExtProcClientStream {
  send: (request: Record<string, unknown>) => void
  next: (timeoutMs?: number) => Promise<ProcessingAnswer>
  end: () => void
  close: () => void
}

export function openExtProcStream (target: string, options: { tls: boolean }): ExtProcClientStream {
  const credentials = options.tls
    ? grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined })
    : grpc.credentials.createInsecure()
  // A name for SNI: Node warns when the server name is an IP address.
  const channelOptions = options.tls ? { 'grpc.ssl_target_name_override': 'ext-proc.test' } : {}
  const client = new (externalProcessor())(target, credentials, channelOptions) as unknown as grpc.Client & { Process: () => grpc.ClientDuplexStream<unknown, ProcessingAnswer> }
  const call = client.Process()
  const answers: ProcessingAnswer[] = []
  const waiting: Array<{ resolve: (a: ProcessingAnswer) => void, reject: (e: Error) => void }> = []
  let failure: Error | null = null
  call.on('data', (a: ProcessingAnswer) => {
    const w = waiting.shift()
    if (w !== undefined) w.resolve(a)
    else answers.push(a)
  })
  const fail = (err: Error): void => {
    failure ??= err
    for (const w of waiting.splice(0)) w.reject(failure)
  }
  call.on('error', fail)
  call.on('end', () => fail(new Error('the processor ended the stream')))
  return {
    send: request => { call.write(request) },
    next: async (timeoutMs = 10_000) => {
      const ready = answers.shift()
      if (ready !== undefined) return ready
      if (failure !== null) throw failure
      return await new Promise<ProcessingAnswer>((resolve, reject) => {
        const waiter = { resolve: (a: ProcessingAnswer) => { clearTimeout(timer); resolve(a) }, reject: (e: Error) => { clearTimeout(timer); reject(e) } }
        // Timed out: off the list, so a later answer is kept for the next call.
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1)
          reject(new Error(`no ext_proc answer within ${timeoutMs} ms`))
        }, timeoutMs)
        waiting.push(waiter)
      })
    },
    end: () => { call.end() },
    close: () => { call.cancel(); client.close() }
  }
}
