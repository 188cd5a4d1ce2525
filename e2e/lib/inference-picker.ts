/**
 * A test endpoint picker (EPP) speaking the Gateway API Inference Extension's protocol over
 * Envoy's ext_proc gRPC service, as the reference picker (cmd/lwepp, pkg/lwepp/handlers)
 * does:
 *
 * - request headers: kept; a request without a body is picked at once, else the headers'
 *   answer waits for the body's last chunk; chunks before it get no answer; after the last
 *   one, the headers' answer, then the whole body back as `streamed_response` chunks of at
 *   most 62,000 bytes, `end_of_stream` on the last (no separate end message);
 * - the pick: round robin over the candidates — the `pods` matching the
 *   `test-epp-endpoint-selection` header (IPs or `ip:port`s, comma-separated), else those in
 *   the subset hint (metadata_context["envoy.lb.subset_hint"]) when the gateway sends one,
 *   else all `pods`; when none matches (or there are no pods) the stream ends with gRPC
 *   INTERNAL ("no endpoints available"), as lwepp v1.6.2 does;
 * - the answer: the `x-gateway-destination-endpoint` header mutation and the same value in
 *   dynamic_metadata["envoy.lb"], plus `X-Echo-Set-Header` as lwepp sets it;
 * - response headers: answered with `x-conformance-test-served-endpoint` set to the served
 *   endpoint the gateway reported in metadata_context["envoy.lb"].
 *
 * A `test-picker-mode` header makes it misbehave: verbatim (answers the steering header's
 * value as it is, unchecked — a list, a dead pod, an address outside the pool), hang (never answers), error (ends the
 * stream with INTERNAL), immediate (429), huge (100 header mutations), malformed (CR LF in
 * the endpoint), metadata-only (the pick only in dynamic_metadata), none (no pick at all), response-body (asks for the
 * response body with mode_override FULL_DUPLEX_STREAMED and answers it, once it has all of
 * it, with a body of its own), response-stream (the same mode, each chunk answered at once
 * upper-cased, as a picker reading token usage passes a model server's stream on),
 * response-streamed (STREAMED, each chunk's answer its upper-cased body mutation),
 * response-hang (full duplex, never answers the body), response-stall (answers the first
 * body chunk, then nothing).
 * Serves TLS (a certificate of its own, as lwepp's self-signed one) or plaintext.
 */

import type * as grpc from '@grpc/grpc-js'
import { headersOf, processStreamEnd, serveExtProc, type HeaderMapMessage } from './ext-proc.ts'

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
  /** response_body messages the gateway sent. */
  responseChunks: number
}

export interface TestPicker {
  host: string
  pods: string[]
  streams: PickerStreamRecord[]
  close(): Promise<void>
}

/** The modes that ask for the response body. */
const RESPONSE_BODY_MODES = new Set(['response-body', 'response-stream', 'response-streamed', 'response-hang', 'response-stall'])

/** lwepp's largest streamed_response chunk. */
const BODY_CHUNK_BYTES = 62_000

/** `candidates` matching the steering value: an entry is an IP (every port of it) or an `ip:port`. */
function steered (candidates: string[], steer: string): string[] {
  const wanted = steer.split(',').map(s => s.trim()).filter(s => s !== '')
  return candidates.filter(c => wanted.some(w => w === c || c.slice(0, c.lastIndexOf(':')) === w))
}

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) } })

function pickAnswer (endpoint: string, mode: string): Record<string, unknown> {
  const headers = mode === 'metadata-only' ? [] : [set('x-gateway-destination-endpoint', mode === 'malformed' ? `${endpoint}\r\nx-evil: 1` : endpoint)]
  headers.push(set('X-Echo-Set-Header', `x-conformance-test-served-endpoint:${endpoint}`))
  if (mode === 'huge') for (let i = 0; i < 100; i++) headers.push(set(`x-huge-${i}`, 'v'.repeat(100)))
  const message: Record<string, unknown> = { request_headers: { response: { clear_route_cache: true, header_mutation: { set_headers: mode === 'none' ? [] : headers } } } }
  // Asks for the response body, as a picker reading the model's token usage does (STREAMED for response-streamed).
  if (RESPONSE_BODY_MODES.has(mode)) message.mode_override = { response_body_mode: mode === 'response-streamed' ? 1 : 4 }
  if (mode !== 'none') message.dynamic_metadata = { fields: { 'envoy.lb': { structValue: { fields: { 'x-gateway-destination-endpoint': { stringValue: endpoint } } } } } }
  return message
}

export async function startTestPicker (pods: string[], tls?: { cert: Buffer, key: Buffer }): Promise<TestPicker> {
  let turn = 0
  const state: TestPicker = { host: '', pods, streams: [], close: async () => {} }
  const server = await serveExtProc((call: grpc.ServerDuplexStream<PickerRequest, unknown>) => {
    const record: PickerStreamRecord = { headers: {}, protocolConfig: undefined, subset: null, bodyChunks: 0, body: Buffer.alloc(0), picked: null, served: null, responseHeaders: null, responseBody: null, responseChunks: 0 }
    state.streams.push(record)
    const chunks: Buffer[] = []
    const responseChunks: Buffer[] = []
    let mode = ''
    const stream = processStreamEnd(call)
    const write = (m: unknown): void => { if (!stream.ended) call.write(m) }
    const pick = (): boolean => {
      if (mode === 'hang') return false
      if (mode === 'error') {
        stream.fail('picker broke')
        return false
      }
      if (mode === 'immediate') {
        write({ immediate_response: { status: { code: 429 }, body: Buffer.from('shed by the picker'), details: 'sheddable' } })
        return false
      }
      const steer = record.headers['test-epp-endpoint-selection'] ?? ''
      let endpoint: string
      if (mode === 'verbatim' && steer !== '') endpoint = steer
      else {
        const hinted = record.subset !== null ? state.pods.filter(p => record.subset!.includes(p)) : state.pods
        const candidates = steer !== '' ? steered(state.pods, steer) : hinted
        if (candidates.length === 0) {
          stream.fail('no endpoints available')
          return false
        }
        endpoint = candidates[turn++ % candidates.length]!
      }
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
        if (m.request_body.end_of_stream !== true) return
        record.body = Buffer.concat(chunks)
        if (!pick()) return
        // The whole body back, as lwepp sends it: the new body of the full-duplex mode.
        for (let at = 0; at === 0 || at < record.body.length; at += BODY_CHUNK_BYTES) {
          const end = Math.min(record.body.length, at + BODY_CHUNK_BYTES)
          write({ request_body: { response: { body_mutation: { streamed_response: { body: record.body.subarray(at, end), end_of_stream: end === record.body.length } } } } })
        }
      } else if (m.response_body !== undefined && m.response_body !== null) {
        const chunk = Buffer.from(m.response_body.body ?? [])
        const eos = m.response_body.end_of_stream === true
        responseChunks.push(chunk)
        record.responseChunks++
        if (mode === 'response-hang' || (mode === 'response-stall' && record.responseChunks > 1)) return
        // Each chunk answered at once, upper-cased: full duplex as streamed_response, STREAMED as its body mutation.
        if (mode === 'response-stream' || mode === 'response-stall') {
          write({ response_body: { response: { body_mutation: { streamed_response: { body: Buffer.from(chunk.toString('utf8').toUpperCase()), end_of_stream: eos } } } } })
          return
        }
        if (mode === 'response-streamed') {
          write({ response_body: { response: { body_mutation: { body: Buffer.from(chunk.toString('utf8').toUpperCase()) } } } })
          return
        }
        if (!eos) return
        record.responseBody = Buffer.concat(responseChunks)
        write({ response_body: { response: { body_mutation: { streamed_response: { body: Buffer.from(`seen by the picker: ${record.responseBody.length} bytes`), end_of_stream: true } } } } })
      } else if (m.response_headers !== undefined && m.response_headers !== null) {
        record.responseHeaders = headersOf(m.response_headers.headers)
        record.served = m.metadata_context?.filter_metadata?.['envoy.lb']?.fields?.['x-gateway-destination-endpoint-served']?.stringValue ?? null
        write({ response_headers: { response: { header_mutation: { set_headers: [set('x-conformance-test-served-endpoint', record.served ?? 'fail: missing destination endpoint served metadata')] } } } })
      }
    })
  }, tls)
  state.host = server.host
  state.close = server.close
  return state
}
