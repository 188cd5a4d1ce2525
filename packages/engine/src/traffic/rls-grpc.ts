/**
 * Envoy's rate limit service protocol over gRPC: `envoy.service.ratelimit.v3.RateLimitService/
 * ShouldRateLimit`, with the protos in the repository's `protos/` directory (Envoy's field
 * numbers), loaded once with @grpc/proto-loader. Envoy's own `ratelimit` service, and any
 * server written for Envoy's ratelimit filter, answers it unchanged. One client (one HTTP/2
 * channel) per target lives in PolicyServices, so reloads reuse the connection.
 */

import type * as grpc from '@grpc/grpc-js'
import type { PackageDefinition } from '@grpc/proto-loader'
import { callMetadata, envoyClient, envoyProtos, grpcJs } from '../util/envoy-grpc.ts'

export const SHOULD_RATE_LIMIT_METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'

const PROTO_FILE = 'envoy/service/ratelimit/v3/rls.proto'

/** The loaded protos (also for tests that run a rate limit server of their own). */
export function rateLimitProtos (): PackageDefinition {
  return envoyProtos(PROTO_FILE)
}

export interface HeaderValueMessage {
  key?: string
  value?: string
  raw_value?: Buffer
}

export interface RateLimitResponseMessage {
  /** 0 UNKNOWN, 1 OK, 2 OVER_LIMIT. */
  overall_code?: number
  statuses?: Array<{ code?: number, current_limit?: { name?: string, requests_per_unit?: number, unit?: number }, limit_remaining?: number }>
  response_headers_to_add?: HeaderValueMessage[]
  request_headers_to_add?: HeaderValueMessage[]
  raw_body?: Buffer
}

type Callback = (err: grpc.ServiceError | null, response?: RateLimitResponseMessage) => void

export interface RateLimitClient extends grpc.Client {
  ShouldRateLimit(request: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, callback: Callback): grpc.ClientUnaryCall
}

/** A client for `target` (`host:port`), plaintext or TLS with the system's roots. */
export function createRateLimitClient (target: string, tls: boolean): RateLimitClient {
  return envoyClient<RateLimitClient>(PROTO_FILE, 'envoy.service.ratelimit.v3.RateLimitService', target, tls, 'portico-ratelimit')
}

export type RateLimitResult =
  | { decision: 'ok' | 'overLimit', requestHeaders: Array<[string, string]>, responseHeaders: Array<[string, string]>, body: Buffer | null, statuses: RateLimitResponseMessage['statuses'] }
  | { decision: 'error', reason: string }

/** A descriptor to send: its entries and, when set, its own hits_addend (0 checks without a hit). */
export interface DescriptorToSend {
  entries: Array<[string, string]>
  hitsAddend?: number
  /** RateLimitDescriptor.limit: the limit the service applies instead of its configured one (unit: envoy.type.v3.RateLimitUnit). */
  limit?: { requestsPerUnit: number, unit: number }
}

/** One ShouldRateLimit call; never rejects (failures are `decision: 'error'`). */
export async function shouldRateLimit (
  client: RateLimitClient,
  request: { domain: string, descriptors: DescriptorToSend[] },
  timeoutMs: number,
  /** The call's W3C trace context (trace/otel.ts callTraceHeaders), sent as metadata. */
  traceHeaders: Readonly<Record<string, string>> | null = null
): Promise<RateLimitResult> {
  const message = {
    domain: request.domain,
    descriptors: request.descriptors.map(d => ({
      entries: d.entries.map(([key, value]) => ({ key, value })),
      // A wrapper message, so 0 (check only) is told apart from unset (the request's, 1).
      ...(d.hitsAddend !== undefined ? { hits_addend: { value: d.hitsAddend } } : {}),
      ...(d.limit !== undefined ? { limit: { requests_per_unit: d.limit.requestsPerUnit, unit: d.limit.unit } } : {})
    }))
  }
  const response = await new Promise<RateLimitResponseMessage | grpc.ServiceError>(resolve => {
    client.ShouldRateLimit(message, callMetadata(traceHeaders), { deadline: Date.now() + timeoutMs }, (err, res) => resolve(err ?? res ?? {}))
  })
  if (response instanceof Error) {
    const code = (response as grpc.ServiceError).code
    if (code === grpcJs().status.DEADLINE_EXCEEDED) return { decision: 'error', reason: `timed out after ${timeoutMs}ms` }
    return { decision: 'error', reason: `${grpcJs().status[code] ?? code}: ${(response as grpc.ServiceError).details || response.message}` }
  }
  return {
    // As Envoy's client: OVER_LIMIT limits; OK and UNKNOWN let the request through.
    decision: response.overall_code === 2 ? 'overLimit' : 'ok',
    requestHeaders: headerPairs(response.request_headers_to_add),
    responseHeaders: headerPairs(response.response_headers_to_add),
    body: response.raw_body !== undefined && response.raw_body.length > 0 ? Buffer.from(response.raw_body) : null,
    statuses: response.statuses
  }
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/
const BAD_VALUE = /[\r\n\0]/

/** HeaderValues → [name, value]; invalid names or values are dropped. */
function headerPairs (headers: HeaderValueMessage[] | undefined): Array<[string, string]> {
  const out: Array<[string, string]> = []
  for (const h of headers ?? []) {
    const name = (h.key ?? '').toLowerCase()
    const value = h.value !== undefined && h.value !== '' ? h.value : (h.raw_value !== undefined ? Buffer.from(h.raw_value).toString('utf8') : '')
    if (TOKEN.test(name) && !BAD_VALUE.test(value)) out.push([name, value])
  }
  return out
}
