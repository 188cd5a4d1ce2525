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
 * channel over all of them (traffic/grpc-stream-channel.ts), walked as gRPC's pick_first
 * walks an address list: in order, one at a time — the first address that connects serves
 * every pick, the next one is tried only when connecting fails (refused, reset, or not up
 * within the 20 s connect timeout; there is no Happy Eyeballs race), and once the serving
 * connection ends the next one walks the list from the start again. Picks made while it
 * connects wait for it rather than fail on the first refusal; when every address failed they
 * fail with UNAVAILABLE (the pool's failureMode decides what that means) and so do picks for
 * the next second. One picker answers at a time, as one Envoy cluster with a single healthy
 * EPP host would. The key below is `channelTarget` (ir/picker-targets.ts): a new address set
 * is a new channel.
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
    // Only the addresses the key names (validation rejects the rest before they get here).
    fallbackTargets: target === picker.target ? [] : picker.fallbackTargets ?? [],
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
