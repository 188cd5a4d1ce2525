/**
 * A gRPC server over TLS for tests that run it as its own process (e.g. in a test host's
 * network namespace). Usage: node grpc-tls-server.ts ADDRESS PORT NAME CERT KEY — prints
 * "listening" when ready; its one method, /tls.Echo/Echo (raw bytes, no protobuf), answers
 * `NAME: <request>`.
 */

import { readFileSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'

const [address, port, name, cert, key] = process.argv.slice(2) as [string, string, string, string, string]
const raw = (b: Buffer) => b
const server = new grpc.Server()
server.addService({
  Echo: { path: '/tls.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw }
}, {
  Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(`${name}: ${call.request.toString()}`))
})
server.bindAsync(`${address}:${port}`, grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(cert), private_key: readFileSync(key) }]), err => {
  if (err !== null) throw err
  process.stdout.write('listening\n')
})
