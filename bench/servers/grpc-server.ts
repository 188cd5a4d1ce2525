/**
 * A gRPC server for benchmarks (@grpc/grpc-js): one unary method, /bench.Echo/Echo, echoing
 * its bytes. Usage: node bench/servers/grpc-server.ts PORT — prints "ready".
 */

import * as grpc from '@grpc/grpc-js'

export const ECHO_SERVICE: grpc.ServiceDefinition = {
  Echo: {
    path: '/bench.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b
  }
}

if (import.meta.main) {
  const server = new grpc.Server()
  server.addService(ECHO_SERVICE, { Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) })
  server.bindAsync(`127.0.0.1:${process.argv[2] ?? 0}`, grpc.ServerCredentials.createInsecure(), err => {
    if (err !== null) throw err
    process.stdout.write('ready\n')
  })
}
