/**
 * An endpoint picker (EPP) for benchmarks: Envoy's ext_proc gRPC service answering as the
 * Gateway API Inference Extension's reference picker (cmd/lwepp) does, but always picking
 * the one endpoint it is given, and keeping nothing per request:
 * - request headers: a request without a body is picked at once, else the headers' answer
 *   waits for the body's last chunk (the reference picker reads the model from the body);
 * - each body chunk gets an empty answer (the chunk goes on unchanged), the deferred headers
 *   answer — `x-gateway-destination-endpoint` and the same in dynamic_metadata["envoy.lb"] —
 *   just before the last chunk's;
 * - response headers: answered with `x-conformance-test-served-endpoint` set to the served
 *   endpoint the gateway reported, as lwepp does.
 * Plaintext gRPC (Portico's `tls: false`). A process of its own, so its CPU is measured apart
 * from Portico's. Usage: node bench/servers/endpoint-picker.ts PORT ENDPOINT — prints "ready".
 */

import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'

interface PickerRequest {
  request_headers?: { end_of_stream?: boolean }
  request_body?: { body?: Buffer, end_of_stream?: boolean }
  response_headers?: unknown
  metadata_context?: { filter_metadata?: Record<string, { fields?: Record<string, { stringValue?: string }> }> }
}

const port = Number(process.argv[2] ?? 0)
const endpoint = process.argv[3]
if (endpoint === undefined) throw new Error('usage: endpoint-picker.ts PORT ENDPOINT')

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) } })
// The same answers every time: built once.
const PICK = {
  request_headers: { response: { clear_route_cache: true, header_mutation: { set_headers: [set('x-gateway-destination-endpoint', endpoint)] } } },
  dynamic_metadata: { fields: { 'envoy.lb': { structValue: { fields: { 'x-gateway-destination-endpoint': { stringValue: endpoint } } } } } }
}
/** lwepp's largest streamed_response chunk. */
const BODY_CHUNK_BYTES = 62_000

const pkg = grpc.loadPackageDefinition(envoyProtos('envoy/service/ext_proc/v3/external_processor.proto')) as unknown as { envoy: { service: { ext_proc: { v3: { ExternalProcessor: grpc.ServiceClientConstructor } } } } }
const server = new grpc.Server()
server.addService(pkg.envoy.service.ext_proc.v3.ExternalProcessor.service, {
  Process: (call: grpc.ServerDuplexStream<PickerRequest, unknown>) => {
    let ended = false
    let chunks: Buffer[] = []
    const write = (m: unknown): void => { if (!ended) call.write(m) }
    call.on('data', (m: PickerRequest) => {
      if (m.request_headers != null) {
        if (m.request_headers.end_of_stream === true) write(PICK)
      } else if (m.request_body != null) {
        // As lwepp answers: nothing until the body's last chunk; then the pick, then the whole
        // body back as the full-duplex mode's new body, in chunks, end_of_stream on the last.
        chunks.push(Buffer.from(m.request_body.body ?? []))
        if (m.request_body.end_of_stream !== true) return
        write(PICK)
        const body = Buffer.concat(chunks)
        chunks = []
        for (let at = 0; at === 0 || at < body.length; at += BODY_CHUNK_BYTES) {
          const end = Math.min(body.length, at + BODY_CHUNK_BYTES)
          write({ request_body: { response: { body_mutation: { streamed_response: { body: body.subarray(at, end), end_of_stream: end === body.length } } } } })
        }
      } else if (m.response_headers != null) {
        const served = m.metadata_context?.filter_metadata?.['envoy.lb']?.fields?.['x-gateway-destination-endpoint-served']?.stringValue ?? 'fail: no served endpoint'
        write({ response_headers: { response: { header_mutation: { set_headers: [set('x-conformance-test-served-endpoint', served)] } } } })
      }
    })
    const close = (): void => {
      if (ended) return
      ended = true
      call.end()
    }
    call.on('end', close)
    call.on('error', () => { ended = true })
    call.on('cancelled', () => { ended = true })
  }
})
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), err => {
  if (err !== null) throw err
  process.stdout.write('ready\n')
})

process.on('SIGTERM', () => {
  server.tryShutdown(() => process.exit(0))
  setTimeout(() => process.exit(0), 1000).unref()
})
