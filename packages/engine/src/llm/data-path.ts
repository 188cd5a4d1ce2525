/**
 * What the request pipeline uses of llm/, in one module that the pipeline loads with the
 * first config that has an AI backend (loadLlmDataPath, from the engine's compile step) — not
 * with the engine: a gateway of plain routes, and each of its data-plane workers, never loads
 * the LLM code (bench/footprint.ts). The pipeline names these through one lazy getter, so
 * there is one list of what it uses and one place that loads it.
 */

import { loadWireFormats } from './formats/index.ts'

export { BODY_EDIT_CEL_VARIABLES, llmRequestVar } from './body-edits.ts'
export { ModelMatcher } from './model-match.ts'
export { clientEndpoint, formatByName } from './formats/index.ts'
export { translationError } from './canonical.ts'
export { encodeModelList } from './operations.ts'
export { LLM_REQUEST_LIMIT, llmAnswerRewrite, prepareLlmRequest } from './request.ts'
export { llmRequestAttributes, llmResponseAttributes, llmSpanName } from './span.ts'
export { withLlmUsage } from './usage-handler.ts'

/** Loads the wire formats too (this module is loaded by then): nothing is left for a request to require. */
export function loadLlmModules (): void {
  loadWireFormats()
}
