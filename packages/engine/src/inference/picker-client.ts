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

import { extProcChannel, type ExternalProcessorClient } from '../traffic/ext-proc-grpc.ts'
import type { InferencePoolIR } from '../ir/types.ts'
import { channelTarget } from '../ir/picker-targets.ts'

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
  client = extProcChannel({
    target: picker.target,
    fallbackTargets: picker.fallbackTargets ?? [],
    tls: tls === null ? null : tls.insecureSkipVerify ? { insecureSkipVerify: true } : tls.ca !== undefined ? { ca: tls.ca } : {},
    userAgent: 'portico-inference-pool',
    maxReceiveBytes: picker.maxBodyBytes + 1024 * 1024
  })
  clients.set(key, client)
  if (clients.size > MAX_CLIENTS) {
    const [oldestKey, oldest] = clients.entries().next().value!
    clients.delete(oldestKey)
    ;oldest.close()
  }
  return client
}
