/**
 * The pipeline's one door to llm/ at run time: llm/data-path.ts, required when a config with
 * an AI backend is compiled (loadLlm, from engine/compiled.ts) rather than when the engine
 * loads. Requests reach it only through a route or backend of such a config, by then loaded,
 * so a cached getter is all a request pays.
 */

import { lazyRequire } from '../util/lazy-require.ts'

/** llm/data-path.ts (the path is the engine's util/ folder's: lazyRequire resolves from there). */
export const llm = lazyRequire<typeof import('../llm/data-path.ts')>('../llm/data-path.ts')

/** Loads the pipeline's LLM code and the wire formats now (compile time). */
export function loadLlm (): void {
  llm().loadLlmModules()
}
