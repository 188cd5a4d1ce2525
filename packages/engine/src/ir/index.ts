/**
 * `@portico/engine/ir`: the IR alone — its types, `contentVersion` and the semantic checks
 * (`validateIR`) — for packages that produce or carry IR (the controller, the xDS codec)
 * without loading the engine (undici, gRPC, the MCP SDK, CEL…). Loads nothing outside ir/
 * but the linear-time regex helper the checks share with the route table.
 */
export type * from './types.ts'
export type * from './policy.ts'
export type * from './traffic.ts'
export type { HeaderMap } from './header-map.ts'
export { EFFECTIVE_POLICY_KEYS } from './policy.ts'
export { contentVersion } from './version.ts'
export { MAX_LISTENER_FILTERS } from './types.ts'
export { MAX_FALLBACK_TARGETS, channelTarget, fallbackTargetsProblem } from './picker-targets.ts'
export { validateIR, validateRoute, formatIrPath, formatIrDiagnostic, extProcBuffersResponses, type IrDiagnostic, type IrPath } from './validate.ts'
export { checkOriginPattern, canonicalOrigin, normalizeOrigin } from './origin.ts'
export { HEADER_NAME_PATTERN, HEADER_VALUE_PATTERN, isHeaderName, isHeaderValue } from './http-grammar.ts'
