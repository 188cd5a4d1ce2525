/**
 * The config → IR converters every front end shares, exported alone as
 * `@portico/engine/config`: the YAML file (to-ir.ts) and the Kubernetes controller's Gateway
 * API translation both turn a redirect, a rewrite, CORS, header modifiers, a retry or a
 * mirror into IR through these functions, so defaults (302, 1 retry of 500/502/503/504 after
 * 25ms, a 100 % mirror) and semantic checks (origin grammar, `*` alone, maxAge ≥ 1s) are
 * written once. Front ends map their own shapes onto the YAML config shapes below and collect
 * what `report` tells them.
 */

export { policiesToIR, type PolicyContext } from './policies-to-ir.ts'
export { retryToIR, mirrorsToIR, DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_CODES, DEFAULT_RETRY_BACKOFF_MS, type RetryConfig, type RequestMirrorConfig } from './traffic-to-ir.ts'
export { checkPrefixModifiers } from './http-policy-to-ir.ts'
export type { CorsConfig, PathModifierConfig, RequestRedirectConfig, UrlRewriteConfig } from './http-policy-schema.ts'
export { formatPath } from './diagnostics.ts'
// What front ends check and convert with besides: the duration syntax, listener × route
// hostname intersection, and whether the route table's regex engine can run a pattern.
export { parseDuration } from '../util/duration.ts'
export { intersectHostnames, intersectHostnamesWithOrigins } from '../routing/hostname.ts'
export { linearRegexProblem } from '../util/linear-regex.ts'
// The whole loader, for blocks a cluster resource carries in the config file's own shape
// (PorticoPolicy): loaded as the same lines of a file would be. The schema, and which of its
// fields hold secrets, shape those resources' CRDs.
export { loadConfigText, type LoadResult } from './load.ts'
export { configJsonSchema } from './validate.ts'
export { SECRET_FILE, SECRET_VALUE } from './secret-fields.ts'
export type { ConfigDiagnostic } from './diagnostics.ts'
export { grpcPathMatch } from './grpc-match.ts'
export { serverTlsOptionsToIR } from './tls-options-to-ir.ts'
// The model API in a cluster (the controller's PorticoModels): the SSRF check of a baseURL and
// when two model patterns tie on one parent, as the file's loader decides them.
export { ssrfRefusal } from '../util/ssrf.ts'
export { tiesWith, patternRank } from '../llm/model-match.ts'
export { MODEL_API_PATHS, modelTies, routeModelTable } from './models-to-ir.ts'
