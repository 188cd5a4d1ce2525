/**
 * A test endpoint picker (EPP) speaking the Gateway API Inference Extension's protocol over
 * Envoy's ext_proc gRPC service, as the reference picker (cmd/lwepp, pkg/lwepp/handlers)
 * does:
 *
 * - request headers: kept; a request without a body is picked at once, else the headers'
 *   answer waits for the body's last chunk; each body chunk gets an empty answer (the chunk
 *   goes on unchanged), the deferred headers answer just before the last one;
 * - the pick: the `test-epp-endpoint-selection` header's value as it is (so a test can name a
 *   list, a dead pod or an address outside the pool), else round robin over `pods` — or over
 *   the subset hint (metadata_context["envoy.lb.subset_hint"]) when the gateway sends one;
 * - the answer: the `x-gateway-destination-endpoint` header mutation and the same value in
 *   dynamic_metadata["envoy.lb"], plus `X-Echo-Set-Header` as lwepp sets it;
 * - response headers: answered with `x-conformance-test-served-endpoint` set to the served
 *   endpoint the gateway reported in metadata_context["envoy.lb"].
 *
 * A `test-picker-mode` header makes it misbehave: hang (never answers), error (ends the
 * stream with INTERNAL), immediate (429), huge (100 header mutations), malformed (CR LF in
 * the endpoint), metadata-only (the pick only in dynamic_metadata), none (no pick at all), response-body (asks for the
 * response body with mode_override and answers it with a body of its own).
 * Serves TLS (a certificate of its own, as lwepp's self-signed one) or plaintext.
 */

import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'
import { headersOf, type HeaderMapMessage } from './ext-proc.ts'

const packageDefinition = envoyProtos('envoy/service/ext_proc/v3/external_processor.proto')

/** google.protobuf.Struct: protobufjs's well-known types have camelCase fields whatever keepCase says. */
interface StructValue { fields?: Record<string, { stringValue?: string, structValue?: StructValue, listValue?: { values?: Array<{ stringValue?: string }> } }> }

interface PickerRequest {
  request_headers?: { headers?: HeaderMapMessage, end_of_stream?: boolean }
  request_body?: { body?: Buffer, end_of_stream?: boolean }
  response_headers?: { headers?: HeaderMapMessage, end_of_stream?: boolean }
  response_body?: { body?: Buffer, end_of_stream?: boolean }
  protocol_config?: { request_body_mode?: number, response_body_mode?: number }
  metadata_context?: { filter_metadata?: Record<string, StructValue> }
}

/** What one stream carried. */
export interface PickerStreamRecord {
  headers: Record<string, string>
  protocolConfig: PickerRequest['protocol_config'] | undefined
  /** The subset hint, when the gateway sent one. */
  subset: string[] | null
  bodyChunks: number
  body: Buffer
  /** What the picker answered. */
  picked: string | null
  /** The served endpoint the gateway reported with the response headers. */
  served: string | null
  /** The response headers the gateway sent. */
  responseHeaders: Record<string, string> | null
  /** The response body the gateway sent (mode response-body). */
  responseBody: Buffer | null
}

export interface TestPicker {
  host: string
  pods: string[]
  streams: PickerStreamRecord[]
  close(): Promise<void>
}

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) } })

function pickAnswer (endpoint: string, mode: string): Record<string, unknown> {
  const headers = mode === 'metadata-only' ? [] : [set('x-gateway-destination-endpoint', mode === 'malformed' ? `${endpoint}\r\nx-evil: 1` : endpoint)]
  headers.push(set('X-Echo-Set-Header', `x-conformance-test-served-endpoint:${endpoint}`))
  if (mode === 'huge') for (let i = 0; i < 100; i++) headers.push(set(`x-huge-${i}`, 'v'.repeat(100)))
  const message: Record<string, unknown> = { request_headers: { response: { clear_route_cache: true, header_mutation: { set_headers: mode === 'none' ? [] : headers } } } }
  // Asks for the response body, as a picker reading the model's token usage does.
  if (mode === 'response-body') message.mode_override = { response_body_mode: 4 }
  if (mode !== 'none') message.dynamic_metadata = { fields: { 'envoy.lb': { structValue: { fields: { 'x-gateway-destination-endpoint': { stringValue: endpoint } } } } } }
  return message
}

export async function startTestPicker (pods: string[], tls?: { cert: Buffer, key: Buffer }): Promise<TestPicker> {
  const pkg = grpc.loadPackageDefinition(packageDefinition) as unknown as { envoy: { service: { ext_proc: { v3: { ExternalProcessor: grpc.ServiceClientConstructor } } } } }
  const server = new grpc.Server()
  let turn = 0
  const state: TestPicker = { host: '', pods, streams: [], close: async () => { server.forceShutdown() } }
  server.addService(pkg.envoy.service.ext_proc.v3.ExternalProcessor.service, {
    Process: (call: grpc.ServerDuplexStream<PickerRequest, unknown>) => {
      const record: PickerStreamRecord = { headers: {}, protocolConfig: undefined, subset: null, bodyChunks: 0, body: Buffer.alloc(0), picked: null, served: null, responseHeaders: null, responseBody: null }
      state.streams.push(record)
      const chunks: Buffer[] = []
      const responseChunks: Buffer[] = []
      let mode = ''
      let ended = false
      const write = (m: unknown): void => { if (!ended) call.write(m) }
      const pick = (): boolean => {
        if (mode === 'hang') return false
        if (mode === 'error') {
          ended = true
          call.emit('error', Object.assign(new Error('picker broke'), { code: grpc.status.INTERNAL, details: 'picker broke' }))
          return false
        }
        if (mode === 'immediate') {
          write({ immediate_response: { status: { code: 429 }, body: Buffer.from('shed by the picker'), details: 'sheddable' } })
          return false
        }
        const steer = record.headers['test-epp-endpoint-selection']
        const candidates = record.subset ?? state.pods
        if ((steer === undefined || steer === '') && candidates.length === 0) {
          // The protocol: no eligible endpoint is a 503 immediate response.
          write({ immediate_response: { status: { code: 503 }, body: Buffer.from('no endpoint to pick') } })
          return false
        }
        const endpoint = steer !== undefined && steer !== '' ? steer : candidates[turn++ % candidates.length]!
        record.picked = endpoint
        write(pickAnswer(endpoint, mode))
        return true
      }
      call.on('data', (m: PickerRequest) => {
        if (m.request_headers !== undefined && m.request_headers !== null) {
          record.headers = headersOf(m.request_headers.headers)
          record.protocolConfig = m.protocol_config ?? undefined
          mode = record.headers['test-picker-mode'] ?? ''
          const hint = m.metadata_context?.filter_metadata?.['envoy.lb.subset_hint']?.fields?.['x-gateway-destination-endpoint-subset']
          if (hint !== undefined) record.subset = (hint.listValue?.values ?? []).map(v => v.stringValue ?? '')
          if (m.request_headers.end_of_stream === true) pick()
        } else if (m.request_body !== undefined && m.request_body !== null) {
          record.bodyChunks++
          chunks.push(Buffer.from(m.request_body.body ?? []))
          if (m.request_body.end_of_stream === true) {
            record.body = Buffer.concat(chunks)
            if (!pick()) return
          }
          if (mode === 'hang') return
          write({ request_body: { response: {} } })
        } else if (m.response_body !== undefined && m.response_body !== null) {
          responseChunks.push(Buffer.from(m.response_body.body ?? []))
          if (m.response_body.end_of_stream !== true) return
          record.responseBody = Buffer.concat(responseChunks)
          write({ response_body: { response: { body_mutation: { streamed_response: { body: Buffer.from(`seen by the picker: ${record.responseBody.length} bytes`), end_of_stream: true } } } } })
        } else if (m.response_headers !== undefined && m.response_headers !== null) {
          record.responseHeaders = headersOf(m.response_headers.headers)
          record.served = m.metadata_context?.filter_metadata?.['envoy.lb']?.fields?.['x-gateway-destination-endpoint-served']?.stringValue ?? null
          write({ response_headers: { response: { header_mutation: { set_headers: [set('x-conformance-test-served-endpoint', record.served ?? 'fail: missing destination endpoint served metadata')] } } } })
        }
      })
      call.on('end', () => {
        if (!ended) {
          ended = true
          call.end()
        }
      })
      call.on('error', () => { ended = true })
      call.on('cancelled', () => { ended = true })
    }
  })
  const credentials = tls === undefined ? grpc.ServerCredentials.createInsecure() : grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }])
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', credentials, (err, p) => err !== null ? reject(err) : resolve(p))
  })
  state.host = `127.0.0.1:${port}`
  return state
}
