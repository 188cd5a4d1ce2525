/**
 * An external processor for benchmarks: Envoy's ext_proc gRPC service answering every
 * message at once with an empty answer of its phase (nothing changed), as a processor that
 * only looks does. Plaintext gRPC; a process of its own, so its CPU is apart from Portico's.
 * Usage: node bench/servers/ext-processor.ts PORT — prints "ready".
 */

import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'

const PHASES = ['request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers'] as const
// The same answers every time: built once.
const ANSWERS = Object.fromEntries(PHASES.map(p => [p, { [p]: p.endsWith('trailers') ? {} : { response: {} } }]))

const port = Number(process.argv[2] ?? 0)
const pkg = grpc.loadPackageDefinition(envoyProtos('envoy/service/ext_proc/v3/external_processor.proto')) as unknown as { envoy: { service: { ext_proc: { v3: { ExternalProcessor: grpc.ServiceClientConstructor } } } } }
const server = new grpc.Server()
server.addService(pkg.envoy.service.ext_proc.v3.ExternalProcessor.service, {
  Process: (call: grpc.ServerDuplexStream<Record<string, unknown>, unknown>) => {
    let ended = false
    call.on('data', (m: Record<string, unknown>) => {
      const phase = PHASES.find(p => m[p] !== undefined && m[p] !== null)
      if (phase !== undefined && !ended) call.write(ANSWERS[phase])
    })
    call.on('end', () => {
      if (ended) return
      ended = true
      call.end()
    })
    call.on('error', () => { ended = true })
    call.on('cancelled', () => { ended = true })
  }
})
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), err => {
  if (err !== null) throw err
  process.stdout.write('ready\n')
})
