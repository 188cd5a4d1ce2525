/**
 * @portico/engine/serving -- what a data-plane worker thread's modules take from the engine:
 * the engine itself and the few helpers its listeners, access log and settings use. A worker
 * imports this instead of the package's index (index.ts), which also loads what only the
 * primary uses -- config files and their validation, the IR's redaction for dumps, the CEL
 * checker's entry points -- into every worker's isolate (docs/multicore.md, Memory).
 */
export { Engine, type PreparedConfig } from './engine/engine.ts'
export { renewEmitterInit } from './util/emitter-init.ts'
export { applyAccessLogFields, compileAccessLogFields, compileCelFields, type AccessLogFields, type CelFields } from './pipeline/access-log-fields.ts'
export { setPublicHeaders } from './ir/redact.ts'
export { servedModel } from './pipeline/models.ts'
export { PorticoError } from './util/errors.ts'
export { hostnameMatches, hostnameSpecificity } from './routing/hostname.ts'
export { requestHeadersTimeoutMs } from './http/frontend.ts'
export { serverSecureContext, serverContextOptions } from './stream/server-tls.ts'
export { undici } from './util/undici.ts'
export type * from './ir/types.ts'
export type { ClientFacts } from './request/context.ts'
export type { InboundRequest, InboundResponse } from './http/inbound.ts'
export type { RequestContext } from './request/context.ts'
export type { RequestTracing } from './trace/otel.ts'
export type { StaticMeshIdentity } from './mesh/identity.ts'
export type { StreamConnectionRecord } from './stream/stream-proxy.ts'
export type { UdpFlowRecord } from './stream/udp-proxy.ts'
