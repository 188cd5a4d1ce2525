/**
 * @portico/engine — config schema → IR → route matching → policy phases → backend call,
 * with trace events at each step. Shared by the standalone proxy and cluster mode.
 */
export { Engine, DEFAULT_TRACE_BODY_LIMIT, type EngineOptions } from './engine/engine.ts'
export type { CompiledConfig, CompiledBind, CompiledListener, CompiledRoute } from './engine/compiled.ts'
export type * from './ir/types.ts'
export { EFFECTIVE_POLICY_KEYS, type PolicyKind, type PolicyPhase, type PolicySetIR } from './policy/types.ts'
export { loadConfigFile, loadConfigText, type LoadResult, type LoadedConfig } from './config/load.ts'
export { configToIR, contentVersion, parseHostTarget } from './config/to-ir.ts'
export { ConfigFileSchema, type ConfigFile, type StaticConfig } from './config/schema.ts'
export { formatDiagnostic, formatPath, type ConfigDiagnostic } from './config/diagnostics.ts'
export { TraceHub, type TraceCandidate, type TraceWatcher } from './trace/hub.ts'
export type { TraceEvent, TraceMessage, TraceSeverity, SnapshotStage } from './trace/types.ts'
export { RequestContext, type RequestReason } from './pipeline/context.ts'
export { PorticoError, isPorticoError } from './util/errors.ts'
export { parseDuration, formatSeconds } from './util/duration.ts'
export { redactSecrets, REDACTED_VALUE } from './ir/redact.ts'
export { BackendStats, type BackendStat } from './engine/backend-stats.ts'
export { McpGateway, DEFAULT_SESSION_TTL_MS, type McpGatewayOptions, type McpLogger, type McpChildProcess } from './mcp/gateway.ts'
export type { McpCallInfo } from './mcp/session.ts'
export { intersectHostnames, hostnameMatches, hostOnly } from './routing/hostname.ts'
export { compileCel, evalBool, CEL_VARIABLES, type CelProgram } from './cel/expression.ts'
export { envoyProtos, envoyClient, PROTO_DIR } from './util/envoy-grpc.ts'
