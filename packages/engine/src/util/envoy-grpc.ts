/**
 * Envoy's gRPC services that policies call (ext_authz, ext_proc, the rate limit service):
 * their protos from the repository's `protos/` directory (Envoy's field numbers), loaded once
 * per file with @grpc/proto-loader, and grpc-js clients made the same way for ext_authz and
 * the rate limit service. ext_proc, a stream per request, has a client of its own without
 * grpc-js (traffic/grpc-stream-channel.ts, traffic/ext-proc-codec.ts).
 */

import { fileURLToPath } from 'node:url'
import type * as GrpcJs from '@grpc/grpc-js'
import type * as ProtoLoader from '@grpc/proto-loader'
import type { PackageDefinition } from '@grpc/proto-loader'
import { lazyRequire } from './lazy-require.ts'

/** @grpc/grpc-js, loaded when a config first needs a gRPC client. */
export const grpcJs = lazyRequire<typeof GrpcJs>('@grpc/grpc-js')
const protoLoader = lazyRequire<typeof ProtoLoader>('@grpc/proto-loader')

/** The repository's protos/ (PORTICO_PROTOS_DIR overrides it, as for the xDS protos). */
export const PROTO_DIR = process.env.PORTICO_PROTOS_DIR ?? fileURLToPath(new URL('../../../../protos', import.meta.url))

const definitions = new Map<string, PackageDefinition>()

/** The package definition of one proto file under protos/ (snake_case fields, enums as numbers). */
export function envoyProtos (file: string): PackageDefinition {
  let definition = definitions.get(file)
  if (definition === undefined) {
    definition = protoLoader().loadSync(file, { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: true })
    definitions.set(file, definition)
  }
  return definition
}

/**
 * The metadata of one call: the W3C trace context of its span (trace/otel.ts
 * callTraceHeaders), so the service's own spans join the request's trace, as Envoy sends it.
 */
export function callMetadata (traceHeaders: Readonly<Record<string, string>> | null): GrpcJs.Metadata {
  const metadata = new (grpcJs().Metadata)()
  if (traceHeaders !== null) for (const [name, value] of Object.entries(traceHeaders)) metadata.set(name, value)
  return metadata
}

/**
 * A client of `service` (fully qualified, e.g. `envoy.service.auth.v3.Authorization`) defined
 * in `file`, for `target` (`host:port`), plaintext or TLS with the system's roots. One client
 * is one HTTP/2 channel; PolicyServices keeps one per target so reloads reuse it.
 */
export function envoyClient<T> (file: string, service: string, target: string, tls: boolean, userAgent: string): T {
  const grpc = grpcJs()
  let node: unknown = grpc.loadPackageDefinition(envoyProtos(file))
  for (const part of service.split('.')) node = (node as Record<string, unknown>)[part]
  const Ctor = node as GrpcJs.ServiceClientConstructor
  return new Ctor(target, tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure(), {
    'grpc.primary_user_agent': userAgent,
    // Reconnect soon after the service comes back (the default backoff grows to 2 minutes).
    'grpc.max_reconnect_backoff_ms': 5000
  }) as unknown as T
}
