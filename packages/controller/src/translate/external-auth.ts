/**
 * Gateway API `HTTPExternalAuthFilter` → the engine's ExtAuthzIR, for listener filters
 * (Gateway and ListenerSet listeners, GatewayListenerFilters). The backendRef must be a
 * Service port in the owner's namespace or one a ReferenceGrant opens; the check goes to the
 * Service's cluster DNS name (plaintext: a BackendTLSPolicy on the auth Service is not
 * applied to it — see docs/conformance.md).
 *
 * Spec defaults kept: GRPC with no allowedHeaders sends every header; HTTP always sends the
 * method, path, Content-Length, Authorization and the client's Host (as X-Forwarded-Host) plus
 * the allowedHeaders; HTTP with no allowedResponseHeaders copies every header of the 2xx
 * answer but Host and those of the answer's own body (the engine never lets any check change
 * Host or :authority); forwardBody.maxSize 0 or unset: no body.
 */

import type { ExtAuthzIR } from '@portico/engine/ir'
import { GATEWAY_GROUP, type Service } from './gateway-api.ts'
import type { ReferenceGrants } from './reference-grants.ts'

export interface HTTPExternalAuthFilter {
  protocol?: string
  backendRef?: { group?: string, kind?: string, name: string, namespace?: string, port?: number }
  grpc?: { allowedHeaders?: string[] }
  http?: { path?: string, allowedHeaders?: string[], allowedResponseHeaders?: string[] }
  forwardBody?: { maxSize?: number }
}

/** The engine's default wait for an answer (policies-to-ir DEFAULT_EXT_AUTHZ_TIMEOUT_MS): every check is bounded. */
const TIMEOUT_MS = 1000
/** The CRD's pattern for http.path (the spec says to sanitize it even so). */
const PATH = /^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+$/
/** The engine's cap on a buffered body sent to a check (config schema includeRequestBody.maxBytes). */
const MAX_BODY = 67_108_864

export type ExternalAuthProblem = { reason: 'RefNotPermitted' | 'BackendNotFound' | 'InvalidKind' | 'UnsupportedValue', message: string }

export function externalAuthIR (f: HTTPExternalAuthFilter, owner: { kind: string, namespace: string }, grants: ReferenceGrants, services: ReadonlyMap<string, Service>): ExtAuthzIR | ExternalAuthProblem {
  const ref = f.backendRef
  if (ref === undefined) return { reason: 'UnsupportedValue', message: 'externalAuth needs a backendRef' }
  const ns = ref.namespace ?? owner.namespace
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Service') !== 'Service') return { reason: 'InvalidKind', message: `externalAuth backendRef kind ${ref.group !== undefined && ref.group !== '' ? `${ref.group}/` : ''}${ref.kind ?? ''} is not supported (Service)` }
  if (!grants.allows({ fromGroup: GATEWAY_GROUP, fromKind: owner.kind, fromNamespace: owner.namespace, toGroup: '', toKind: 'Service', toNamespace: ns, toName: ref.name })) {
    return { reason: 'RefNotPermitted', message: `externalAuth Service ${ns}/${ref.name} is in another namespace without a ReferenceGrant` }
  }
  const svc = services.get(`${ns}/${ref.name}`)
  if (svc === undefined) return { reason: 'BackendNotFound', message: `externalAuth Service ${ns}/${ref.name} not found` }
  if (ref.port === undefined) return { reason: 'BackendNotFound', message: `externalAuth backendRef to Service ${ns}/${ref.name} needs a port` }
  if (svc.spec.type !== 'ExternalName' && !(svc.spec.ports ?? []).some(p => p.port === ref.port && (p.protocol ?? 'TCP') === 'TCP')) {
    return { reason: 'BackendNotFound', message: `externalAuth Service ${ns}/${ref.name} has no TCP port ${ref.port}` }
  }
  const lower = (names: string[] | undefined): string[] => (names ?? []).map(h => h.toLowerCase())
  let protocol: ExtAuthzIR['protocol']
  let includeRequestHeaders: string[] | null
  if (f.protocol === 'GRPC') {
    protocol = { grpc: {} }
    const allowed = lower(f.grpc?.allowedHeaders)
    includeRequestHeaders = allowed.length > 0 ? allowed : null
  } else if (f.protocol === 'HTTP') {
    const path = f.http?.path ?? ''
    if (path !== '' && (!PATH.test(path) || path.includes('..'))) return { reason: 'UnsupportedValue', message: `externalAuth http.path ${JSON.stringify(path)} is not a path prefix` }
    const allowedResponse = lower(f.http?.allowedResponseHeaders)
    protocol = { http: { pathPrefix: path === '' ? '' : `/${path.replace(/^\/+/, '').replace(/\/+$/, '')}`.replace(/^\/$/, ''), allowedResponseHeaders: allowedResponse.length > 0 ? allowedResponse : null } }
    // Method and path always go (as the check's own); Content-Length is the check's body's.
    // The check's Host names the service it is sent to, so the client's Host goes as
    // X-Forwarded-Host (the gateway always sets it to the request's host).
    includeRequestHeaders = [...new Set(['authorization', 'x-forwarded-host', ...lower(f.http?.allowedHeaders)])]
  } else {
    return { reason: 'UnsupportedValue', message: `externalAuth protocol ${JSON.stringify(f.protocol ?? '')} is not supported (HTTP, GRPC)` }
  }
  const maxSize = f.forwardBody?.maxSize ?? 0
  if (maxSize > MAX_BODY) return { reason: 'UnsupportedValue', message: `externalAuth forwardBody.maxSize ${maxSize} is over ${MAX_BODY}` }
  const target = svc.spec.type === 'ExternalName' && svc.spec.externalName !== undefined ? svc.spec.externalName : `${ref.name}.${ns}.svc.cluster.local`
  return {
    host: `http://${target}:${ref.port}`,
    protocol,
    failureMode: 'deny',
    timeoutMs: TIMEOUT_MS,
    includeRequestHeaders,
    includeRequestBody: maxSize > 0 ? { maxBytes: maxSize, packAsBytes: false } : null,
    contextExtensions: {}
  }
}
