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
 *
 * A picker with several addresses (`fallbackTargets`: its Service's ready endpoints) is one
 * channel over all of them, through gRPC's own `ipv4:`/`ipv6:` address-list resolver and its
 * default pick_first policy: the first address that accepts a connection serves, the next
 * one is tried when connecting fails (or the first stays silent for 250 ms: Happy
 * Eyeballs), and a broken connection goes down the list again. One picker answers at a time,
 * as one Envoy cluster with a single healthy EPP host would.
 */

import type * as grpc from '@grpc/grpc-js'
import { envoyProtos, grpcJs } from '../util/envoy-grpc.ts'
import type { ExternalProcessorClient } from '../traffic/ext-proc-grpc.ts'
import type { InferencePoolIR } from '../ir/types.ts'
import { channelTarget } from '../ir/picker-targets.ts'

const PROTO_FILE = 'envoy/service/ext_proc/v3/external_processor.proto'

/**
 * Clients by channel target and settings, least recently used first. Bounded: in a cluster
 * a picker's addresses change with its pods (each set a new key), so the oldest channel is
 * closed beyond MAX_CLIENTS (gRPC lets the calls under way on it finish).
 */
const clients = new Map<string, ExternalProcessorClient>()
const MAX_CLIENTS = 32

export function pickerClient (picker: InferencePoolIR['picker']): ExternalProcessorClient {
  const tls = picker.tls
  const target = channelTarget(picker)
  const key = `${target}|${tls === null ? 'plain' : tls.insecureSkipVerify ? 'insecure' : tls.ca ?? 'roots'}|${picker.maxBodyBytes}`
  let client = clients.get(key)
  if (client !== undefined) {
    clients.delete(key)
    clients.set(key, client)
    return client
  }
  const g = grpcJs()
  const credentials = tls === null
    ? g.credentials.createInsecure()
    : g.credentials.createSsl(tls.ca !== undefined ? Buffer.from(tls.ca) : null, null, null, tls.insecureSkipVerify ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {})
  let node: unknown = g.loadPackageDefinition(envoyProtos(PROTO_FILE))
  for (const part of 'envoy.service.ext_proc.v3.ExternalProcessor'.split('.')) node = (node as Record<string, unknown>)[part]
  const Ctor = node as grpc.ServiceClientConstructor
  client = new Ctor(target, credentials, {
    'grpc.primary_user_agent': 'portico-inference-pool',
    // Reconnect soon after the picker comes back (the default backoff grows to 2 minutes).
    'grpc.max_reconnect_backoff_ms': 5000,
    'grpc.max_receive_message_length': picker.maxBodyBytes + 1024 * 1024
  }) as unknown as ExternalProcessorClient
  clients.set(key, client)
  if (clients.size > MAX_CLIENTS) {
    const [oldestKey, oldest] = clients.entries().next().value!
    clients.delete(oldestKey)
    ;(oldest as unknown as grpc.Client).close()
  }
  return client
}
