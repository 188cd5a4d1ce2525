/**
 * The `ai` operations besides chat, where the client's format is not the provider's: model
 * lists (`GET /v1/models`) and embeddings (`POST /v1/embeddings`). Chat goes through the neutral
 * shape of canonical.ts; these are small and flat, so each pair is one plain function here.
 * Pure (no I/O), like the format modules.
 *
 * - Model lists: OpenAI's `{object: "list", data: [{id, object: "model", created, owned_by}]}`
 *   (OpenAI, Azure, the OpenAI-compatible servers, Gemini's OpenAI-compatible endpoint) and
 *   Anthropic's `{data: [{type: "model", id, display_name, created_at}], has_more, first_id,
 *   last_id}`, either way.
 * - Embeddings, OpenAI's request and answer ↔ Bedrock's InvokeModel bodies for Amazon Titan Text
 *   Embeddings and Cohere Embed, and Vertex AI's `:predict` (`instances` / `predictions`) — the
 *   mappings agentgateway makes, from each provider's model-parameter reference.
 */

import { translationError, type TranslationError } from './canonical.ts'
import type { ListedModel } from './formats/anthropic-messages.ts'
import { anthropicMessages } from './formats/index.ts'

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)
const bad = (message: string, field?: string): TranslationError => translationError(400, 'invalid_request', message, field)

/** The two shapes of a model list. */
export type ModelListShape = 'openai' | 'anthropic'

export function decodeModelList (shape: ModelListShape, body: unknown): ListedModel[] | TranslationError {
  if (shape === 'anthropic') return anthropicMessages().decodeAnthropicModelList(body)
  if (!isObject(body) || !Array.isArray(body.data)) return translationError(502, 'api_error', 'invalid answer from the provider: a model list without data')
  const out: ListedModel[] = []
  for (const m of body.data) {
    if (!isObject(m) || typeof m.id !== 'string') continue
    const model: ListedModel = { id: m.id }
    if (typeof m.created === 'number' && Number.isFinite(m.created)) model.created = m.created
    out.push(model)
  }
  return out
}

/** Models in the client's shape; `ownedBy` is OpenAI's `owned_by` (the provider, as the list does not say). */
export function encodeModelList (shape: ModelListShape, models: ListedModel[], ownedBy: string): Json {
  if (shape === 'anthropic') return anthropicMessages().encodeAnthropicModelList(models)
  return { object: 'list', data: models.map(m => ({ id: m.id, object: 'model', created: m.created ?? 0, owned_by: ownedBy })) }
}

// ---------------------------------------------------------------------------------------------
// Embeddings

/** An OpenAI embeddings request, checked: its texts and options. */
interface EmbeddingsRequest {
  texts: string[]
  /** True when `input` was one string (not an array). */
  single: boolean
  base64: boolean
  dimensions?: number
}

/** Fields of OpenAI's embeddings request; `user` only identifies the end user to OpenAI. */
const EMBEDDINGS_FIELDS = new Set(['input', 'model', 'encoding_format', 'dimensions', 'user'])

function decodeEmbeddingsRequest (body: Json, provider: string): EmbeddingsRequest | TranslationError {
  for (const key of Object.keys(body)) {
    if (!EMBEDDINGS_FIELDS.has(key)) return bad(`${key} cannot be translated to ${provider}'s embeddings API`, key)
  }
  const input = body.input
  let texts: string[]
  if (typeof input === 'string') texts = [input]
  else if (Array.isArray(input) && input.length > 0 && input.every(t => typeof t === 'string')) texts = input as string[]
  else return bad(`input must be a string or an array of strings for ${provider} (token arrays are OpenAI's own)`, 'input')
  const request: EmbeddingsRequest = { texts, single: typeof input === 'string', base64: false }
  if (body.encoding_format !== undefined) {
    if (body.encoding_format !== 'float' && body.encoding_format !== 'base64') return bad('encoding_format must be float or base64', 'encoding_format')
    request.base64 = body.encoding_format === 'base64'
  }
  if (body.dimensions !== undefined) {
    if (typeof body.dimensions !== 'number' || !Number.isInteger(body.dimensions) || body.dimensions < 1) return bad('dimensions must be a positive integer', 'dimensions')
    request.dimensions = body.dimensions
  }
  return request
}

/** A vector as OpenAI sends it: numbers, or with `encoding_format: base64` the float32 little-endian bytes in base64 (what the openai SDK asks for by default). */
function vector (values: number[], base64: boolean): number[] | string {
  if (!base64) return values
  const floats = new Float32Array(values)
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64')
}

function openaiEmbeddings (vectors: number[][], model: string, promptTokens: number, base64: boolean): Json {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: vector(v, base64) })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens }
  }
}

const isVector = (v: unknown): v is number[] => Array.isArray(v) && v.every(x => typeof x === 'number')

/** Which Bedrock embedding API a model id speaks (a bare id, an inference profile or an ARN naming one). */
export function bedrockEmbeddingFamily (model: string): 'titan' | 'cohere' | null {
  if (/amazon\.titan-embed-(text|g1-text)/.test(model)) return 'titan'
  if (/cohere\.embed-/.test(model)) return 'cohere'
  return null
}

/**
 * OpenAI's request → the InvokeModel body: Titan Text Embeddings (`{inputText, dimensions}`, one
 * text per call; `dimensions` on v2 only) or Cohere Embed (`{texts, input_type}`; `input_type`
 * is required and OpenAI has none: `search_query`, as agentgateway sends).
 */
export function encodeBedrockEmbeddings (body: Json, model: string): Json | TranslationError {
  const family = bedrockEmbeddingFamily(model)
  if (family === null) return bad(`Bedrock embeddings are served for Amazon Titan Text Embeddings and Cohere Embed models, not ${model}`, 'model')
  const request = decodeEmbeddingsRequest(body, 'Bedrock')
  if ('kind' in request) return request
  if (family === 'titan') {
    if (request.texts.length !== 1) return bad('Amazon Titan Text Embeddings embed one text per request: send input as one string', 'input')
    const out: Json = { inputText: request.texts[0] }
    if (request.dimensions !== undefined) {
      if (!model.includes('titan-embed-text-v2')) return bad('dimensions: only Titan Text Embeddings V2 takes a dimension', 'dimensions')
      out.dimensions = request.dimensions
    }
    return out
  }
  if (request.dimensions !== undefined && !model.includes('embed-v4')) return bad('dimensions: only Cohere Embed v4 takes an output dimension', 'dimensions')
  const out: Json = { texts: request.texts, input_type: 'search_query' }
  if (request.dimensions !== undefined) out.output_dimension = request.dimensions
  return out
}

/**
 * The InvokeModel answer → OpenAI's. Titan says its token count in the body
 * (`inputTextTokenCount`), Cohere only in Bedrock's `x-amzn-bedrock-input-token-count` header.
 */
export function decodeBedrockEmbeddings (json: unknown, request: Json, model: string, inputTokenHeader: string | undefined): { body: Json, promptTokens: number } | TranslationError {
  const base64 = request.encoding_format === 'base64'
  const headerTokens = Number(inputTokenHeader)
  if (!isObject(json)) return translationError(502, 'api_error', 'invalid answer from Bedrock: not a JSON object')
  if (bedrockEmbeddingFamily(model) === 'titan') {
    if (!isVector(json.embedding)) return translationError(502, 'api_error', 'invalid answer from Bedrock: no embedding')
    const tokens = typeof json.inputTextTokenCount === 'number' ? json.inputTextTokenCount : Number.isFinite(headerTokens) ? headerTokens : 0
    return { body: openaiEmbeddings([json.embedding], model, tokens, base64), promptTokens: tokens }
  }
  // Cohere: `embeddings` is the float vectors (`response_type: embeddings_floats`) or, when
  // `embedding_types` was sent (never by this gateway), an object by type.
  const embeddings = isObject(json.embeddings) ? json.embeddings.float : json.embeddings
  if (!Array.isArray(embeddings) || !embeddings.every(isVector)) return translationError(502, 'api_error', 'invalid answer from Bedrock: no embeddings')
  const tokens = Number.isFinite(headerTokens) ? headerTokens : 0
  return { body: openaiEmbeddings(embeddings, model, tokens, base64), promptTokens: tokens }
}

/**
 * OpenAI's request → Vertex AI's `:predict` body for its text-embedding models
 * (`{instances: [{content}], parameters: {outputDimensionality}}`).
 */
export function encodeVertexEmbeddings (body: Json): Json | TranslationError {
  const request = decodeEmbeddingsRequest(body, 'Vertex AI')
  if ('kind' in request) return request
  const out: Json = { instances: request.texts.map(content => ({ content })) }
  if (request.dimensions !== undefined) out.parameters = { outputDimensionality: request.dimensions }
  return out
}

/** Vertex AI's `predictions` → OpenAI's answer; the tokens are the sum of each prediction's `statistics.token_count`. */
export function decodeVertexEmbeddings (json: unknown, request: Json, model: string): { body: Json, promptTokens: number } | TranslationError {
  if (!isObject(json) || !Array.isArray(json.predictions)) return translationError(502, 'api_error', 'invalid answer from Vertex AI: no predictions')
  const vectors: number[][] = []
  let tokens = 0
  for (const p of json.predictions) {
    const e = isObject(p) ? p.embeddings : undefined
    if (!isObject(e) || !isVector(e.values)) return translationError(502, 'api_error', 'invalid answer from Vertex AI: a prediction without embeddings.values')
    vectors.push(e.values)
    const count = isObject(e.statistics) ? e.statistics.token_count : undefined
    if (typeof count === 'number') tokens += count
  }
  return { body: openaiEmbeddings(vectors, model, tokens, request.encoding_format === 'base64'), promptTokens: tokens }
}
