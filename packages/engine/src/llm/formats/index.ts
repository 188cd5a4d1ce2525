/**
 * The wire formats, by name, and how a client's request path names its format and
 * operation. Each module is pure (no I/O) and loads with the first config that has an AI
 * backend (loadWireFormats).
 */

import type { WireFormat, WireFormatName } from '../canonical.ts'
import type { LlmOperation } from '../provider.ts'
import { lazyRequire } from '../../util/lazy-require.ts'

// The format modules (about 220 KB of source) load when a config has an AI backend
// (loadWireFormats, from the engine's compile step), not with the engine: a gateway of plain
// routes, and each of its data-plane workers, never pays for them (bench/footprint.ts).
const openaiChat = lazyRequire<typeof import('./openai-chat.ts')>('../llm/formats/openai-chat.ts')
const openaiResponses = lazyRequire<typeof import('./openai-responses.ts')>('../llm/formats/openai-responses.ts')
/** The Anthropic Messages module (its model-list codec serves llm/operations.ts too). */
export const anthropicMessages = lazyRequire<typeof import('./anthropic-messages.ts')>('../llm/formats/anthropic-messages.ts')
const gemini = lazyRequire<typeof import('./gemini.ts')>('../llm/formats/gemini.ts')
const bedrockConverse = lazyRequire<typeof import('./bedrock-converse.ts')>('../llm/formats/bedrock-converse.ts')

const FORMATS: Partial<Record<WireFormatName, () => WireFormat>> = {
  'openai-chat': () => openaiChat().openaiChatFormat,
  'openai-responses': () => openaiResponses().openaiResponsesFormat,
  'anthropic-messages': () => anthropicMessages().anthropicMessagesFormat,
  gemini: () => gemini().geminiFormat,
  'bedrock-converse': () => bedrockConverse().bedrockConverseFormat
}

/** The format module, or undefined when this build does not have it. */
export function formatByName (name: WireFormatName): WireFormat | undefined {
  return FORMATS[name]?.()
}

/**
 * Loads every format module now. The engine calls it when it compiles a config with an AI
 * backend, so that no request is the one that pays for a synchronous require.
 */
export function loadWireFormats (): void {
  for (const format of Object.values(FORMATS)) format()
}

export interface ClientEndpoint {
  /** The client's wire format (for `embeddings` and `models`: OpenAI's). */
  format: WireFormatName
  operation: LlmOperation
  /** The model, for formats whose path names it (Gemini, Bedrock Converse); their bodies do not. */
  model?: string
  /** Whether the path asks for a stream (Gemini's `:streamGenerateContent`, Bedrock's `/converse-stream`). */
  streaming?: boolean
}

const CHAT_COMPLETIONS: ClientEndpoint = { format: 'openai-chat', operation: 'chat' }
const RESPONSES: ClientEndpoint = { format: 'openai-responses', operation: 'chat' }
const MESSAGES: ClientEndpoint = { format: 'anthropic-messages', operation: 'chat' }
const EMBEDDINGS: ClientEndpoint = { format: 'openai-chat', operation: 'embeddings' }
const MODELS: ClientEndpoint = { format: 'openai-chat', operation: 'models' }

/** `/models/{model}:generateContent` or `:streamGenerateContent` (Gemini API, any version prefix). */
const GEMINI_PATH = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/
/** `/model/{modelId}/converse` or `/converse-stream` (Bedrock Runtime; the id is percent-encoded: ARNs have `:` and `/`). */
const BEDROCK_PATH = /\/model\/([^/]+)\/(converse|converse-stream)$/

function pathModel (segment: string): string | null {
  try {
    return decodeURIComponent(segment)
  } catch {
    return null
  }
}

/**
 * The client's format and operation, from the last segments of its path (query excluded), so
 * a route's prefix does not matter: `/v1/chat/completions`, `/openai/chat/completions` (an SDK
 * whose base URL is the route's prefix), `/team-a/v1/messages`. Any other path is a chat
 * completion, as every request to an `ai` route was before clients formats were told apart —
 * configs that point SDKs at odd paths keep working.
 */
export function clientEndpoint (path: string): ClientEndpoint {
  let end = path.length
  const q = path.indexOf('?')
  if (q !== -1) end = q
  while (end > 1 && path.charCodeAt(end - 1) === 47 /* / */) end--
  const p = end === path.length ? path : path.slice(0, end)
  if (p.endsWith('/chat/completions')) return CHAT_COMPLETIONS
  // Formats whose path names the model and the method (no `/models` list path ends like these).
  const gemini = GEMINI_PATH.exec(p)
  if (gemini !== null) {
    const model = pathModel(gemini[1]!)
    if (model !== null) return { format: 'gemini', operation: 'chat', model, streaming: gemini[2] === 'streamGenerateContent' }
  }
  const bedrock = BEDROCK_PATH.exec(p)
  if (bedrock !== null) {
    const model = pathModel(bedrock[1]!)
    if (model !== null) return { format: 'bedrock-converse', operation: 'chat', model, streaming: bedrock[2] === 'converse-stream' }
  }
  if (p.endsWith('/responses')) return RESPONSES
  if (p.endsWith('/messages')) return MESSAGES
  if (p.endsWith('/embeddings')) return EMBEDDINGS
  if (p.endsWith('/models')) return MODELS
  return CHAT_COMPLETIONS
}
