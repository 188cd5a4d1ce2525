/**
 * The protocol definitions in the repository's protos/ folder, loaded once: the gRPC service
 * (for @grpc/grpc-js) and the Resource message (for encoding into google.protobuf.Any).
 */

import { fileURLToPath } from 'node:url'
import { loadSync } from '@grpc/proto-loader'
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceDefinition } from '@grpc/grpc-js'
import protobuf from 'protobufjs'

export const PROTOS_DIR = process.env.PORTICO_PROTOS_DIR ?? fileURLToPath(new URL('../../../protos/', import.meta.url))

/** Type URL of Portico's resources on the discovery stream. */
export const RESOURCE_TYPE_URL = 'type.googleapis.com/portico.config.v1.Resource'

let cache: { service: ServiceDefinition, client: ServiceClientConstructor, resource: protobuf.Type } | undefined

export function protocol (): { service: ServiceDefinition, client: ServiceClientConstructor, resource: protobuf.Type } {
  if (cache !== undefined) return cache
  const definition = loadSync('envoy/service/discovery/v3/ads.proto', {
    includeDirs: [PROTOS_DIR],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true
  })
  const pkg = loadPackageDefinition(definition) as unknown as { envoy: { service: { discovery: { v3: GrpcObject } } } }
  const client = pkg.envoy.service.discovery.v3.AggregatedDiscoveryService as ServiceClientConstructor
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => target.startsWith('google/protobuf/') ? target : `${PROTOS_DIR}/${target}`
  root.loadSync('portico/config/v1/resource.proto', { keepCase: false })
  cache = { service: client.service, client, resource: root.lookupType('portico.config.v1.Resource') }
  return cache
}
