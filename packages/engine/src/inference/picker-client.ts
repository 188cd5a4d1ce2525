/**
 * The gRPC client of an InferencePool's endpoint picker: Envoy's ext_proc service
 * (`envoy.service.ext_proc.v3.ExternalProcessor/Process`), its streams driven by
 * traffic/ext-proc-grpc.ts ExtProcStream as the extProc policy's are. What differs is how the
 * channel is made: the reference picker serves TLS with a self-signed certificate
 * (`insecureSkipVerify` accepts it, `ca` verifies it), and its answers may carry a replaced
 * request body, so messages up to `maxBodyBytes` + 1 MiB are read.
 *
 * One client (one HTTP/2 channel) per picker target and TLS setting lives for the process,
 * so config reloads reuse the connection.
 */

import type * as grpc from '@grpc/grpc-js'
import { envoyProtos, grpcJs } from '../util/envoy-grpc.ts'
import type { ExternalProcessorClient } from '../traffic/ext-proc-grpc.ts'
import type { InferencePoolIR } from '../ir/types.ts'

const PROTO_FILE = 'envoy/service/ext_proc/v3/external_processor.proto'

const clients = new Map<string, ExternalProcessorClient>()

export function pickerClient (picker: InferencePoolIR['picker']): ExternalProcessorClient {
  const tls = picker.tls
  const key = `${picker.target}|${tls === null ? 'plain' : tls.insecureSkipVerify ? 'insecure' : tls.ca ?? 'roots'}|${picker.maxBodyBytes}`
  let client = clients.get(key)
  if (client !== undefined) return client
  const g = grpcJs()
  const credentials = tls === null
    ? g.credentials.createInsecure()
    : g.credentials.createSsl(tls.ca !== undefined ? Buffer.from(tls.ca) : null, null, null, tls.insecureSkipVerify ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {})
  let node: unknown = g.loadPackageDefinition(envoyProtos(PROTO_FILE))
  for (const part of 'envoy.service.ext_proc.v3.ExternalProcessor'.split('.')) node = (node as Record<string, unknown>)[part]
  const Ctor = node as grpc.ServiceClientConstructor
  client = new Ctor(picker.target, credentials, {
    'grpc.primary_user_agent': 'portico-inference-pool',
    // Reconnect soon after the picker comes back (the default backoff grows to 2 minutes).
    'grpc.max_reconnect_backoff_ms': 5000,
    'grpc.max_receive_message_length': picker.maxBodyBytes + 1024 * 1024
  }) as unknown as ExternalProcessorClient
  clients.set(key, client)
  return client
}
