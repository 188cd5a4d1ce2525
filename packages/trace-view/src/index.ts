/**
 * @portico/trace-view — how a request trace is shown: event type labels, one-line summaries,
 * the snapshot at an event and its unified diff against the previous stage; and how a
 * backend's TYPE, ENDPOINT and HEALTH and the mesh identity's state read. Used by `porticoctl` (terminal) and the admin web UI (browser); no
 * Node-only APIs.
 */
export type * from './events.ts'
export { typeLabel, summarize, formatMicros, formatBytes, bodyBytes } from './summary.ts'
export { detailLines, bodyLines, snapshotFor, previousSnapshot, stateText, unifiedDiff, type DetailMode, type DetailLine, type LineColor } from './detail.ts'
export { backendTypeText, backendTargetText, type BackendShape } from './backend-text.ts'
export { healthLevel, healthText, HEALTH_EXPLAINED, HEALTH_GOOD, HEALTH_POOR, type HealthLevel, type HealthStats } from './backend-health.ts'
export { meshConfigured, meshTone, meshExpiryText, meshSourceText, meshStatusRows, relativeText, type MeshStatusShape, type MeshTone } from './mesh-text.ts'
