/**
 * OpenAI and every server that speaks its API (the presets: Ollama, vLLM, llama.cpp,
 * Mistral, Groq, ...; `custom` with format openai-chat): operations are appended to the
 * provider's base path. OpenAI itself also takes Responses API requests as they are
 * (`{base}/responses`). The key (backendAuth) is `Authorization: Bearer`, set by the header
 * policy the config adds, so `authorize` has nothing to add.
 */

import type { AiBackendSpecIR } from '../../ir/types.ts'
import type { LlmOperation, ProviderAdapter, ProviderRequest } from '../provider.ts'

const SUFFIX: Readonly<Record<LlmOperation, string>> = {
  chat: '/chat/completions',
  embeddings: '/embeddings',
  models: '/models'
}

export function openaiAdapter (spec: AiBackendSpecIR, system = 'openai'): ProviderAdapter {
  const paths: Record<LlmOperation, string> = {
    chat: spec.path ?? spec.pathPrefix + SUFFIX.chat,
    embeddings: spec.pathPrefix + SUFFIX.embeddings,
    models: spec.pathPrefix + SUFFIX.models
  }
  const responses = spec.pathPrefix + '/responses'
  return {
    format: 'openai-chat',
    // OpenAI serves the Responses API beside chat completions; `custom` servers and the
    // presets are taken at their word for chat completions only (the rest is translated).
    passThrough: system === 'openai' ? ['openai-responses'] : [],
    system,
    path: (request: ProviderRequest) => request.format === 'openai-responses' ? responses : paths[request.operation],
    authorize: () => {}
  }
}

/**
 * A server that speaks only OpenAI's Responses API (`custom` with format openai-responses):
 * chat goes to `{base}/responses` (or `pathOverride`) in the Responses format — translated from
 * any client format, a Responses client's own request included (a `custom` provider always goes
 * through the neutral shape) —; embeddings and models to `{base}/embeddings` and `{base}/models`.
 */
export function openaiResponsesAdapter (spec: AiBackendSpecIR): ProviderAdapter {
  const paths: Record<LlmOperation, string> = {
    chat: spec.path ?? spec.pathPrefix + '/responses',
    embeddings: spec.pathPrefix + SUFFIX.embeddings,
    models: spec.pathPrefix + SUFFIX.models
  }
  return {
    format: 'openai-responses',
    system: 'custom',
    path: (request: ProviderRequest) => paths[request.operation],
    authorize: () => {}
  }
}
