/**
 * Envoy's external authorization protocol over gRPC: `envoy.service.auth.v3.Authorization/
 * Check`, with the protos in the repository's `protos/` directory (Envoy's field numbers,
 * trimmed to the fields used), loaded once with @grpc/proto-loader. One client (one HTTP/2
 * channel) per target lives in PolicyServices, so reloads reuse the connection.
 *
 * Answer mapping, as Envoy's ext_authz filter does it: `status.code` 0 (or no status) allows
 * and applies `ok_response`; otherwise `error_response` marks a failure of the service and
 * anything else is a denial (`denied_response`'s status, default 403, headers and body).
 */

import type * as grpc from '@grpc/grpc-js'
import type { PackageDefinition } from '@grpc/proto-loader'
import { callMetadata, envoyClient, envoyProtos, grpcJs } from '../util/envoy-grpc.ts'
import type { CheckInput, CheckResult, HeaderAction, HeaderMutation } from './ext-authz-check.ts'

export const CHECK_METHOD = '/envoy.service.auth.v3.Authorization/Check'

const PROTO_FILE = 'envoy/service/auth/v3/external_auth.proto'

/** The loaded protos (also for tests that run a real Authorization server). */
export function extAuthzProtos (): PackageDefinition {
  return envoyProtos(PROTO_FILE)
}

type CheckCallback = (err: grpc.ServiceError | null, response?: CheckResponseMessage) => void

export interface AuthorizationClient extends grpc.Client {
  Check(request: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, callback: CheckCallback): grpc.ClientUnaryCall
}

/** A client for `target` (`host:port`), plaintext or TLS with the system's roots. */
export function createAuthorizationClient (target: string, tls: boolean): AuthorizationClient {
  return envoyClient<AuthorizationClient>(PROTO_FILE, 'envoy.service.auth.v3.Authorization', target, tls, 'portico-ext-authz')
}

interface HeaderValueOptionMessage {
  header?: { key?: string, value?: string, raw_value?: Buffer }
  append?: { value?: boolean } | null
  append_action?: number
}

interface HttpResponseMessage {
  status?: { code?: number }
  headers?: HeaderValueOptionMessage[]
  body?: string
  headers_to_remove?: string[]
  response_headers_to_add?: HeaderValueOptionMessage[]
}

export interface CheckResponseMessage {
  status?: { code?: number, message?: string }
  denied_response?: HttpResponseMessage
  ok_response?: HttpResponseMessage
  error_response?: HttpResponseMessage
}

/** The CheckRequest message for a request (plain object in the protos' field names). */
export function checkRequestMessage (input: CheckInput, options: { packAsBytes: boolean }): Record<string, unknown> {
  const http: Record<string, unknown> = {
    id: input.id,
    method: input.method,
    headers: input.headers,
    path: input.path,
    host: input.host,
    scheme: input.scheme,
    size: input.size,
    protocol: input.protocol
  }
  if (input.body !== null) {
    if (options.packAsBytes) http.raw_body = input.body
    else http.body = input.body.toString('utf8')
  }
  return {
    attributes: {
      source: { address: socketAddress(input.source) },
      destination: { address: socketAddress(input.destination) },
      request: {
        time: { seconds: Math.floor(input.time / 1000), nanos: (input.time % 1000) * 1_000_000 },
        http
      },
      context_extensions: input.contextExtensions
    }
  }
}

function socketAddress (peer: { address: string, port: number }): Record<string, unknown> {
  return { socket_address: { address: peer.address, port_value: peer.port } }
}

/** Sends one Check call; never rejects (failures are `decision: 'error'`). */
export async function grpcCheck (client: AuthorizationClient, input: CheckInput, options: { timeoutMs: number, packAsBytes: boolean }): Promise<CheckResult> {
  const request = checkRequestMessage(input, options)
  const response = await new Promise<CheckResponseMessage | grpc.ServiceError>(resolve => {
    client.Check(request, callMetadata(input.traceHeaders), { deadline: Date.now() + options.timeoutMs }, (err, res) => resolve(err ?? res ?? {}))
  })
  if (response instanceof Error) {
    const code = (response as grpc.ServiceError).code
    if (code === grpcJs().status.DEADLINE_EXCEEDED) return { decision: 'error', reason: `timed out after ${options.timeoutMs}ms` }
    return { decision: 'error', reason: `${grpcJs().status[code] ?? code}: ${(response as grpc.ServiceError).details || response.message}` }
  }
  return checkResult(response)
}

export function checkResult (response: CheckResponseMessage): CheckResult {
  const code = response.status?.code ?? 0
  if (code === 0) {
    const ok = response.ok_response ?? {}
    return {
      decision: 'allow',
      requestHeaders: mutations(ok.headers),
      removeHeaders: (ok.headers_to_remove ?? []).map(h => h.toLowerCase()),
      responseHeaders: mutations(ok.response_headers_to_add)
    }
  }
  const grpcName = grpcJs().status[code] ?? String(code)
  if (response.error_response !== undefined) {
    const e = response.error_response
    const reason = `service error ${grpcName}${response.status?.message ? `: ${response.status.message}` : ''}`
    const result: CheckResult = { decision: 'error', reason, headers: mutations(e.headers, 'overwrite') }
    const status = e.status?.code ?? 0
    if (status > 0) result.status = status
    if (e.body !== undefined && e.body !== '') result.body = e.body
    return result
  }
  const d = response.denied_response ?? {}
  const status = d.status?.code ?? 0
  return { decision: 'deny', status: status >= 200 && status <= 599 ? status : 403, headers: mutations(d.headers, 'overwrite'), body: d.body ?? '' }
}

const APPEND_ACTIONS: readonly HeaderAction[] = ['append', 'addIfAbsent', 'overwrite', 'overwriteIfExists']
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/
const BAD_VALUE = /[\r\n\0]/

/**
 * HeaderValueOptions → mutations. The deprecated `append` wins when set (true appends, false
 * overwrites); otherwise `append_action`. Invalid names or values are dropped.
 * `fallback` is the action when neither is set; Envoy appends on the upstream request and
 * sets on local replies.
 */
function mutations (options: HeaderValueOptionMessage[] | undefined, fallback: HeaderAction = 'append'): HeaderMutation[] {
  const out: HeaderMutation[] = []
  for (const o of options ?? []) {
    const name = (o.header?.key ?? '').toLowerCase()
    const value = o.header?.value !== undefined && o.header.value !== '' ? o.header.value : (o.header?.raw_value?.toString('utf8') ?? '')
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) continue
    let action: HeaderAction = fallback
    // A BoolValue false may arrive as an empty message (proto3 omits default scalars).
    if (o.append !== undefined && o.append !== null) action = o.append.value === true ? 'append' : 'overwrite'
    else if (o.append_action !== undefined) action = APPEND_ACTIONS[o.append_action] ?? 'overwrite'
    out.push({ name, value, action })
  }
  return out
}

/** HeaderValueOptions → mutations (also for external processing's HeaderMutation.set_headers). */
export const headerMutations = mutations
