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

import { extProcChannel, type ExternalProcessorClient } from '../traffic/ext-proc-grpc.ts'
import type { InferencePoolIR } from '../ir/types.ts'

const clients = new Map<string, ExternalProcessorClient>()

export function pickerClient (picker: InferencePoolIR['picker']): ExternalProcessorClient {
  const tls = picker.tls
  const key = `${picker.target}|${tls === null ? 'plain' : tls.insecureSkipVerify ? 'insecure' : tls.ca ?? 'roots'}|${picker.maxBodyBytes}`
  let client = clients.get(key)
  if (client !== undefined) return client
  client = extProcChannel({
    target: picker.target,
    tls: tls === null ? null : tls.insecureSkipVerify ? { insecureSkipVerify: true } : tls.ca !== undefined ? { ca: tls.ca } : {},
    userAgent: 'portico-inference-pool',
    maxReceiveBytes: picker.maxBodyBytes + 1024 * 1024
  })
  clients.set(key, client)
  return client
}
