/**
 * The wire formats, by name, and how a client's request path names its format and
 * operation. Each module is pure (no I/O); the heavy parts one needs (the AWS event-stream
 * codec) are loaded at first use, so importing them all here costs a gateway nothing.
 */

import type { WireFormat, WireFormatName } from '../canonical.ts'
import type { LlmOperation } from '../provider.ts'
import { openaiChatFormat } from './openai-chat.ts'
import { openaiResponsesFormat } from './openai-responses.ts'
import { anthropicMessagesFormat } from './anthropic-messages.ts'
import { geminiFormat } from './gemini.ts'
import { bedrockConverseFormat } from './bedrock-converse.ts'

const FORMATS: Partial<Record<WireFormatName, WireFormat>> = {
  'openai-chat': openaiChatFormat,
  'openai-responses': openaiResponsesFormat,
  'anthropic-messages': anthropicMessagesFormat,
  gemini: geminiFormat,
  'bedrock-converse': bedrockConverseFormat
}

/** The format module, or undefined when this build does not have it. */
export function formatByName (name: WireFormatName): WireFormat | undefined {
  return FORMATS[name]
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
