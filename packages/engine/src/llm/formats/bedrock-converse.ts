/**
 * AWS Bedrock's Converse API (`POST /model/{modelId}/converse`) and ConverseStream
 * (`POST /model/{modelId}/converse-stream`), to the shapes of the AWS SDK's model
 * (`@aws-sdk/client-bedrock-runtime`: ConverseRequest, Message, ContentBlock, ToolConfiguration,
 * ConverseResponse, ConverseStreamOutput) in their JSON wire form (restJson1: blobs are base64).
 *
 * Things of Converse that shape this module:
 * - The model and the streaming choice are in the PATH, not the body: `encodeRequest` ignores
 *   its `model` argument (the provider adapter puts it in the path), and `decodeRequest` gives
 *   `model: ''` and `stream: false` for the caller to fill in from the path it served.
 * - Answers carry no id and no model name: `decodeResponse` and the stream's `start` give
 *   `id: ''` and `model: ''` (the caller knows the model it asked for and may use the
 *   `x-amzn-requestid` header as the id).
 * - `inputTokens` counts only the uncached input; cache reads and writes are reported beside
 *   it (`totalTokens` is their sum with the output). The neutral `inputTokens` includes them,
 *   so they are added on decode and subtracted on encode.
 * - Images are inline bytes only (`{image: {format, source: {bytes}}}`); an image by URL is
 *   refused (400 naming it): Converse would need Portico to fetch it, which it does not do.
 * - `top_k` and extended thinking are model-specific: they travel in
 *   `additionalModelRequestFields` (`top_k`, `thinking: {type: 'enabled', budget_tokens}`), as
 *   the Bedrock docs show for Anthropic models.
 * - ConverseStream answers are the binary AWS event stream (`eventstream.ts`), not SSE.
 */

import {
  translationError, type BinaryStreamEncoder,
  type ChatMessage, type ChatRequest, type ChatResponse, type ContentPart, type EncodeOptions,
  type StopReason, type StreamDecoder, type StreamEncoder, type StreamEvent, type ToolChoice,
  type ToolDefinition, type TranslationError, type Usage, type WireFormat
} from '../canonical.ts'
import { EventStreamReader, encodeEventStreamMessage, type EventStreamMessage } from '../eventstream.ts'

type Json = Record<string, unknown>

/**
 * Request fields of Converse dropped on decode, each harmless to omit on another provider.
 * Everything else the neutral shape cannot carry is refused with a 400 naming it.
 */
export const IGNORED: Record<string, string> = {
  modelId: 'the SDK sends the model in the path; a body copy is redundant',
  requestMetadata: 'key-value tags for Bedrock invocation logs only',
  performanceConfig: 'Bedrock latency tier; other providers have no such setting and the answer is the same',
  serviceTier: 'Bedrock capacity tier; as OpenAI service_tier, a billing choice, not content',
  additionalModelResponseFieldPaths: 'asks Bedrock to echo model-specific fields; the neutral answer has no place for them',
  cachePoint: 'a prompt-cache marker (content, system or tools); caching is the provider\'s optimisation, the request means the same without it'
}

/** Image formats Converse takes, by media type. */
const IMAGE_FORMATS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' }
const MEDIA_TYPES: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp' }

function isObject (value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function bad (message: string, field: string): TranslationError {
  return translationError(400, 'invalid_request', message, field)
}

/** The single member of a Converse union (`{text: ...}`, `{toolUse: {...}}`), ignoring the wire's padding field `p`. */
function member (value: Json): [string, unknown] | null {
  const keys = Object.keys(value).filter(k => k !== 'p')
  const key = keys[0]
  return keys.length === 1 && key !== undefined ? [key, value[key]] : null
}

// ---------------------------------------------------------------------------------------------
// Requests: Converse → neutral (a Bedrock-format client)

function decodeImage (image: unknown, field: string): Extract<ContentPart, { type: 'image' }>['source'] | TranslationError {
  if (!isObject(image)) return bad('image must be an object', field)
  const mediaType = typeof image.format === 'string' ? MEDIA_TYPES[image.format] : undefined
  if (mediaType === undefined) return bad('image.format must be one of png, jpeg, gif, webp', `${field}.format`)
  if (!isObject(image.source)) return bad('image.source is required', `${field}.source`)
  if (typeof image.source.bytes !== 'string') {
    return bad('only image.source.bytes (base64) is supported; an S3 location cannot be sent to other providers', `${field}.source`)
  }
  return { kind: 'base64', mediaType, data: image.source.bytes }
}

function decodeToolResult (block: unknown, field: string): ContentPart | TranslationError {
  if (!isObject(block) || typeof block.toolUseId !== 'string') return bad('toolResult.toolUseId is required', `${field}.toolUseId`)
  if (!Array.isArray(block.content)) return bad('toolResult.content must be an array', `${field}.content`)
  const content: Extract<ContentPart, { type: 'tool_result' }>['content'] = []
  for (let i = 0; i < block.content.length; i++) {
    const f = `${field}.content[${i}]`
    const item = block.content[i] as unknown
    const m = isObject(item) ? member(item) : null
    if (m === null) return bad('a tool result content block must have exactly one member', f)
    if (m[0] === 'text' && typeof m[1] === 'string') content.push({ type: 'text', text: m[1] })
    // The neutral tool result carries text: a JSON result is sent as its JSON text (what every other provider takes).
    else if (m[0] === 'json') content.push({ type: 'text', text: JSON.stringify(m[1]) })
    else if (m[0] === 'image') {
      const source = decodeImage(m[1], `${f}.image`)
      if ('status' in source) return source
      content.push({ type: 'image', source })
    } else return bad(`tool result content "${m[0]}" is not supported`, `${f}.${m[0]}`)
  }
  if (block.status !== undefined && block.status !== 'success' && block.status !== 'error') return bad('toolResult.status must be success or error', `${field}.status`)
  const part: ContentPart = { type: 'tool_result', callId: block.toolUseId, content }
  if (block.status !== undefined) part.isError = block.status === 'error'
  return part
}

function decodeContentBlock (block: unknown, field: string): ContentPart | null | TranslationError {
  const m = isObject(block) ? member(block) : null
  if (m === null) return bad('a content block must have exactly one member', field)
  const [kind, value] = m
  switch (kind) {
    case 'text':
      if (typeof value !== 'string') return bad('text must be a string', `${field}.text`)
      return { type: 'text', text: value }
    case 'image': {
      const source = decodeImage(value, `${field}.image`)
      return 'status' in source ? source : { type: 'image', source }
    }
    case 'toolUse':
      if (!isObject(value) || typeof value.toolUseId !== 'string' || typeof value.name !== 'string') return bad('toolUse needs toolUseId and name', `${field}.toolUse`)
      if (!isObject(value.input)) return bad('toolUse.input must be an object', `${field}.toolUse.input`)
      return { type: 'tool_call', id: value.toolUseId, name: value.name, input: value.input }
    case 'toolResult':
      return decodeToolResult(value, `${field}.toolResult`)
    case 'reasoningContent': {
      const r = isObject(value) ? value.reasoningText : undefined
      if (!isObject(r) || typeof r.text !== 'string') return bad('only reasoningContent.reasoningText is supported (redactedContent cannot be sent to other providers)', `${field}.reasoningContent`)
      const part: ContentPart = { type: 'reasoning', text: r.text }
      if (typeof r.signature === 'string') part.signature = r.signature
      return part
    }
    case 'cachePoint':
      return null
    default:
      return bad(`content block "${kind}" is not supported`, `${field}.${kind}`)
  }
}

function decodeToolConfig (config: unknown, out: ChatRequest): TranslationError | undefined {
  if (!isObject(config)) return bad('toolConfig must be an object', 'toolConfig')
  if (!Array.isArray(config.tools)) return bad('toolConfig.tools must be an array', 'toolConfig.tools')
  const tools: ToolDefinition[] = []
  for (let i = 0; i < config.tools.length; i++) {
    const f = `toolConfig.tools[${i}]`
    const tool = config.tools[i] as unknown
    const m = isObject(tool) ? member(tool) : null
    if (m === null) return bad('a tool must have exactly one member', f)
    if (m[0] === 'cachePoint') continue
    if (m[0] !== 'toolSpec') return bad(`tool kind "${m[0]}" is not supported`, `${f}.${m[0]}`)
    const spec = m[1]
    if (!isObject(spec) || typeof spec.name !== 'string') return bad('toolSpec.name is required', `${f}.toolSpec.name`)
    const schema = isObject(spec.inputSchema) ? spec.inputSchema.json : undefined
    if (!isObject(schema)) return bad('toolSpec.inputSchema.json must be a JSON Schema object', `${f}.toolSpec.inputSchema`)
    if (spec.strict !== undefined) return bad('toolSpec.strict is not supported', `${f}.toolSpec.strict`)
    const def: ToolDefinition = { name: spec.name, parameters: schema }
    if (typeof spec.description === 'string') def.description = spec.description
    tools.push(def)
  }
  out.tools = tools
  if (config.toolChoice !== undefined) {
    const m = isObject(config.toolChoice) ? member(config.toolChoice) : null
    if (m?.[0] === 'auto') out.toolChoice = { type: 'auto' }
    else if (m?.[0] === 'any') out.toolChoice = { type: 'required' }
    else if (m?.[0] === 'tool' && isObject(m[1]) && typeof m[1].name === 'string') out.toolChoice = { type: 'tool', name: m[1].name }
    else return bad('toolChoice must be {auto: {}}, {any: {}} or {tool: {name}}', 'toolConfig.toolChoice')
  }
  return undefined
}

function decodeRequest (body: Json): ChatRequest | TranslationError {
  const out: ChatRequest = { model: '', system: [], messages: [], stream: false }
  for (const key of Object.keys(body)) {
    const known = ['messages', 'system', 'inferenceConfig', 'toolConfig', 'additionalModelRequestFields', 'outputConfig'].includes(key)
    if (!known && (IGNORED[key] === undefined || key === 'cachePoint')) {
      return bad(`"${key}" is not supported`, key)
    }
  }
  if (!Array.isArray(body.messages)) return bad('messages must be an array', 'messages')
  for (let i = 0; i < body.messages.length; i++) {
    const message = body.messages[i] as unknown
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant')) return bad('role must be user or assistant', `messages[${i}].role`)
    if (!Array.isArray(message.content)) return bad('content must be an array', `messages[${i}].content`)
    const content: ContentPart[] = []
    for (let j = 0; j < message.content.length; j++) {
      const part = decodeContentBlock(message.content[j], `messages[${i}].content[${j}]`)
      if (part === null) continue
      if ('status' in part) return part
      content.push(part)
    }
    out.messages.push({ role: message.role, content })
  }
  if (body.system !== undefined) {
    if (!Array.isArray(body.system)) return bad('system must be an array', 'system')
    for (let i = 0; i < body.system.length; i++) {
      const block = body.system[i] as unknown
      const m = isObject(block) ? member(block) : null
      if (m?.[0] === 'cachePoint') continue
      if (m?.[0] !== 'text' || typeof m[1] !== 'string') return bad('only text system blocks are supported', `system[${i}]`)
      out.system.push(m[1])
    }
  }
  const inference = body.inferenceConfig
  if (inference !== undefined) {
    if (!isObject(inference)) return bad('inferenceConfig must be an object', 'inferenceConfig')
    for (const [key, value] of Object.entries(inference)) {
      const f = `inferenceConfig.${key}`
      if (key === 'stopSequences') {
        if (!Array.isArray(value) || !value.every(s => typeof s === 'string')) return bad('stopSequences must be strings', f)
        out.stop = value as string[]
      } else if (key === 'maxTokens' || key === 'temperature' || key === 'topP') {
        if (typeof value !== 'number') return bad(`${key} must be a number`, f)
        if (key === 'maxTokens') out.maxTokens = value
        else if (key === 'temperature') out.temperature = value
        else out.topP = value
      } else return bad(`"${key}" is not supported`, f)
    }
  }
  if (body.toolConfig !== undefined) {
    const err = decodeToolConfig(body.toolConfig, out)
    if (err !== undefined) return err
  }
  const extra = body.additionalModelRequestFields
  if (extra !== undefined) {
    if (!isObject(extra)) return bad('additionalModelRequestFields must be an object', 'additionalModelRequestFields')
    for (const [key, value] of Object.entries(extra)) {
      const f = `additionalModelRequestFields.${key}`
      if (key === 'top_k' && typeof value === 'number') out.topK = value
      else if (key === 'thinking' && isObject(value) && value.type === 'enabled' && typeof value.budget_tokens === 'number') out.reasoning = { ...out.reasoning, budgetTokens: value.budget_tokens }
      else if (key === 'thinking' && isObject(value) && value.type === 'disabled') continue
      else return bad(`model-specific field "${key}" cannot be translated to other providers`, f)
    }
  }
  const output = body.outputConfig
  if (output !== undefined) {
    if (!isObject(output)) return bad('outputConfig must be an object', 'outputConfig')
    for (const [key, value] of Object.entries(output)) {
      if (key === 'effort') {
        if (value !== 'low' && value !== 'medium' && value !== 'high') return bad('effort must be low, medium or high (xhigh and max have no equivalent elsewhere)', 'outputConfig.effort')
        out.reasoning = { ...out.reasoning, effort: value }
      } else if (key === 'textFormat') {
        const structure = isObject(value) && value.type === 'json_schema' && isObject(value.structure) ? value.structure.jsonSchema : undefined
        if (!isObject(structure) || typeof structure.schema !== 'string') return bad('textFormat must be {type: json_schema, structure: {jsonSchema: {schema}}}', 'outputConfig.textFormat')
        let schema: unknown
        try { schema = JSON.parse(structure.schema) } catch { return bad('jsonSchema.schema is not valid JSON', 'outputConfig.textFormat.structure.jsonSchema.schema') }
        if (!isObject(schema)) return bad('jsonSchema.schema must be a JSON object', 'outputConfig.textFormat.structure.jsonSchema.schema')
        const format: ChatRequest['responseFormat'] = { type: 'json_schema', name: typeof structure.name === 'string' ? structure.name : 'response', schema }
        if (typeof structure.description === 'string') format.description = structure.description
        out.responseFormat = format
      } else return bad(`"${key}" is not supported`, `outputConfig.${key}`)
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Requests: neutral → Converse (Bedrock as the provider)

function encodeImage (source: Extract<ContentPart, { type: 'image' }>['source'], field: string): Json | TranslationError {
  if (source.kind === 'url') return bad('Bedrock Converse takes images as inline bytes only, not by URL', `${field}.url`)
  const format = IMAGE_FORMATS[source.mediaType]
  if (format === undefined) return bad(`Bedrock Converse does not take images of type ${source.mediaType} (png, jpeg, gif, webp)`, `${field}.mediaType`)
  return { format, source: { bytes: source.data } }
}

function encodePart (part: ContentPart, field: string): Json | TranslationError {
  switch (part.type) {
    case 'text': return { text: part.text }
    case 'image': {
      const image = encodeImage(part.source, `${field}.source`)
      return 'status' in image ? image : { image }
    }
    case 'tool_call': return { toolUse: { toolUseId: part.id, name: part.name, input: part.input } }
    case 'tool_result': {
      const content: Json[] = []
      for (const [i, c] of part.content.entries()) {
        if (c.type === 'text') content.push({ text: c.text })
        else {
          const image = encodeImage(c.source, `${field}.content[${i}].source`)
          if ('status' in image) return image
          content.push({ image })
        }
      }
      const result: Json = { toolUseId: part.callId, content }
      if (part.isError !== undefined) result.status = part.isError ? 'error' : 'success'
      return { toolResult: result }
    }
    case 'reasoning': {
      const text: Json = { text: part.text }
      if (part.signature !== undefined) text.signature = part.signature
      return { reasoningContent: { reasoningText: text } }
    }
  }
}

function hasToolBlocks (messages: ChatMessage[]): boolean {
  return messages.some(m => m.content.some(p => p.type === 'tool_call' || p.type === 'tool_result'))
}

function encodeToolChoice (choice: ToolChoice): Json | null {
  switch (choice.type) {
    case 'auto': return { auto: {} }
    case 'required': return { any: {} }
    case 'tool': return { tool: { name: choice.name } }
    case 'none': return null
  }
}

function encodeRequest (request: ChatRequest, _model: string): Json | TranslationError {
  const body: Json = {}
  const messages: Json[] = []
  for (const [i, message] of request.messages.entries()) {
    const content: Json[] = []
    for (const [j, part] of message.content.entries()) {
      const block = encodePart(part, `messages[${i}].content[${j}]`)
      if ('status' in block) return block as TranslationError
      content.push(block)
    }
    // Converse wants turns to alternate ("A conversation must alternate between user and
    // assistant roles"); other formats allow two in a row (OpenAI's tool results followed by
    // a user message). Consecutive turns of one role are one turn with both contents.
    const previous = messages.at(-1)
    if (previous !== undefined && previous.role === message.role) (previous.content as Json[]).push(...content)
    else messages.push({ role: message.role, content })
  }
  body.messages = messages
  if (request.system.length > 0) body.system = request.system.map(text => ({ text }))

  const inference: Json = {}
  if (request.maxTokens !== undefined) inference.maxTokens = request.maxTokens
  if (request.temperature !== undefined) inference.temperature = request.temperature
  if (request.topP !== undefined) inference.topP = request.topP
  if (request.stop !== undefined && request.stop.length > 0) inference.stopSequences = request.stop
  if (Object.keys(inference).length > 0) body.inferenceConfig = inference

  const tools = request.tools ?? []
  const choice = request.toolChoice
  if (request.parallelToolCalls === false) return bad('Bedrock Converse cannot forbid parallel tool calls', 'parallel_tool_calls')
  if (choice?.type === 'none') {
    // Converse has no "none": not offering the tools means the same, as long as the
    // conversation holds no tool calls (Bedrock refuses those without a toolConfig).
    if (tools.length > 0 && hasToolBlocks(request.messages)) return bad('Bedrock Converse has no tool_choice "none" and needs the tools when the conversation holds tool calls', 'tool_choice')
  } else if (tools.length > 0) {
    const config: Json = {
      tools: tools.map(t => {
        const spec: Json = { name: t.name }
        if (t.description !== undefined) spec.description = t.description
        spec.inputSchema = { json: t.parameters }
        return { toolSpec: spec }
      })
    }
    if (choice !== undefined) config.toolChoice = encodeToolChoice(choice)
    body.toolConfig = config
  } else if (choice !== undefined && choice.type !== 'auto') {
    return bad('tool_choice needs tools', 'tool_choice')
  }

  const extra: Json = {}
  if (request.topK !== undefined) extra.top_k = request.topK
  if (request.reasoning?.budgetTokens !== undefined) extra.thinking = { type: 'enabled', budget_tokens: request.reasoning.budgetTokens }
  if (Object.keys(extra).length > 0) body.additionalModelRequestFields = extra

  const output: Json = {}
  const effort = request.reasoning?.effort
  if (effort !== undefined) {
    if (effort === 'minimal') return bad('Bedrock Converse has no effort "minimal" (low, medium, high)', 'reasoning.effort')
    output.effort = effort
  }
  const format = request.responseFormat
  if (format?.type === 'json_object') return bad('Bedrock Converse takes structured output only with a JSON schema (json_schema), not json_object', 'response_format')
  if (format?.type === 'json_schema') {
    // strict needs no field: Converse's structured output is always constrained to the schema.
    const jsonSchema: Json = { schema: JSON.stringify(format.schema), name: format.name }
    if (format.description !== undefined) jsonSchema.description = format.description
    output.textFormat = { type: 'json_schema', structure: { jsonSchema } }
  }
  if (Object.keys(output).length > 0) body.outputConfig = output
  return body
}

// ---------------------------------------------------------------------------------------------
// Answers

const STOP_REASONS: Record<string, StopReason> = {
  end_turn: 'end_turn',
  tool_use: 'tool_use',
  max_tokens: 'max_tokens',
  stop_sequence: 'stop_sequence',
  guardrail_intervened: 'content_filter',
  content_filtered: 'content_filter',
  // The context filled up: the model was cut off, as by a token limit (Anthropic reports the same as its own stop reason).
  model_context_window_exceeded: 'max_tokens',
  malformed_model_output: 'error',
  malformed_tool_use: 'error'
}

const BEDROCK_STOP_REASONS: Record<StopReason, string> = {
  end_turn: 'end_turn',
  tool_use: 'tool_use',
  max_tokens: 'max_tokens',
  stop_sequence: 'stop_sequence',
  content_filter: 'content_filtered',
  refusal: 'content_filtered',
  pause: 'end_turn',
  error: 'malformed_model_output'
}

function decodeUsage (usage: unknown): Usage | null {
  if (!isObject(usage)) return null
  const num = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) ? v : 0
  const cacheRead = num(usage.cacheReadInputTokens)
  const cacheWrite = num(usage.cacheWriteInputTokens)
  const out: Usage = { inputTokens: num(usage.inputTokens) + cacheRead + cacheWrite, outputTokens: num(usage.outputTokens) }
  if (usage.cacheReadInputTokens !== undefined) out.cachedInputTokens = cacheRead
  if (usage.cacheWriteInputTokens !== undefined) out.cacheCreationInputTokens = cacheWrite
  return out
}

function encodeUsage (usage: Usage | null): Json {
  const u = usage ?? { inputTokens: 0, outputTokens: 0 }
  const cacheRead = u.cachedInputTokens ?? 0
  const cacheWrite = u.cacheCreationInputTokens ?? 0
  const out: Json = { inputTokens: Math.max(0, u.inputTokens - cacheRead - cacheWrite), outputTokens: u.outputTokens, totalTokens: u.inputTokens + u.outputTokens }
  if (u.cachedInputTokens !== undefined) out.cacheReadInputTokens = cacheRead
  if (u.cacheCreationInputTokens !== undefined) out.cacheWriteInputTokens = cacheWrite
  return out
}

function providerError (message: string): TranslationError {
  return translationError(502, 'api_error', `Bedrock answer not understood: ${message}`)
}

function decodeResponse (body: Json): ChatResponse | TranslationError {
  const message = isObject(body.output) ? body.output.message : undefined
  if (!isObject(message) || !Array.isArray(message.content)) return providerError('output.message.content is missing')
  const content: ContentPart[] = []
  for (let i = 0; i < message.content.length; i++) {
    const block = message.content[i] as unknown
    const m = isObject(block) ? member(block) : null
    if (m === null) return providerError(`content[${i}] has no single member`)
    const [kind, value] = m
    if (kind === 'text' && typeof value === 'string') content.push({ type: 'text', text: value })
    else if (kind === 'toolUse' && isObject(value) && typeof value.toolUseId === 'string' && typeof value.name === 'string') {
      if (!isObject(value.input)) return providerError(`content[${i}].toolUse.input is not an object`)
      content.push({ type: 'tool_call', id: value.toolUseId, name: value.name, input: value.input })
    } else if (kind === 'reasoningContent' && isObject(value)) {
      const r = value.reasoningText
      if (isObject(r) && typeof r.text === 'string') {
        const part: ContentPart = { type: 'reasoning', text: r.text }
        if (typeof r.signature === 'string') part.signature = r.signature
        content.push(part)
      }
      // redactedContent: encrypted reasoning only Bedrock itself can read back; no neutral form (docs/llm.md).
    } else return providerError(`content block "${kind}" is not supported`)
  }
  const stopReason = typeof body.stopReason === 'string' ? STOP_REASONS[body.stopReason] : undefined
  if (stopReason === undefined) return providerError(`unknown stopReason ${JSON.stringify(body.stopReason)}`)
  const out: ChatResponse = { id: '', model: '', content, stopReason, usage: decodeUsage(body.usage) }
  const stopSequence = stopSequenceOf(body.additionalModelResponseFields)
  if (stopSequence !== undefined) out.stopSequence = stopSequence
  return out
}

/** Anthropic models on Bedrock say which stop sequence matched in `additionalModelResponseFields.stop_sequence`. */
function stopSequenceOf (fields: unknown): string | undefined {
  return isObject(fields) && typeof fields.stop_sequence === 'string' ? fields.stop_sequence : undefined
}

function encodeResponse (response: ChatResponse, _options: EncodeOptions): Json {
  const content: Json[] = []
  for (const part of response.content) {
    const block = encodePart(part, 'content')
    // An answer holds only text, tool calls and reasoning, which always encode.
    if (!('status' in block)) content.push(block)
  }
  const out: Json = {
    output: { message: { role: 'assistant', content } },
    stopReason: BEDROCK_STOP_REASONS[response.stopReason],
    usage: encodeUsage(response.usage),
    metrics: { latencyMs: 0 }
  }
  if (response.stopSequence !== undefined) out.additionalModelResponseFields = { stop_sequence: response.stopSequence }
  return out
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Bedrock's exception names (the `x-amzn-ErrorType` header) and their statuses, from the SDK's error model. */
const ERROR_KINDS: Record<number, TranslationError['kind']> = {
  400: 'invalid_request',
  401: 'authentication',
  403: 'permission',
  404: 'not_found',
  408: 'timeout',
  429: 'rate_limit',
  500: 'api_error',
  503: 'overloaded'
}

/** The exception type Bedrock names for an error (`x-amzn-ErrorType` header of a Bedrock-format client's answer). */
export function bedrockErrorType (error: TranslationError): string {
  switch (error.kind) {
    case 'invalid_request': return 'ValidationException'
    case 'authentication': return 'UnrecognizedClientException'
    case 'permission': return 'AccessDeniedException'
    case 'not_found': return 'ResourceNotFoundException'
    case 'rate_limit': return 'ThrottlingException'
    case 'timeout': return 'ModelTimeoutException'
    case 'overloaded': return 'ServiceUnavailableException'
    case 'api_error': return 'InternalServerException'
  }
}

function decodeError (status: number, body: unknown): TranslationError {
  const message = isObject(body) && typeof (body.message ?? body.Message) === 'string' ? (body.message ?? body.Message) as string : `Bedrock answered ${status}`
  // 424 is ModelErrorException (the model itself failed): a bad gateway to the client.
  if (status === 424) return translationError(502, 'api_error', message)
  const kind = ERROR_KINDS[status] ?? (status >= 500 ? 'api_error' : 'invalid_request')
  return translationError(status, kind, message)
}

function encodeError (error: TranslationError): Json {
  return { message: error.message }
}

// ---------------------------------------------------------------------------------------------
// Streams

/** Exceptions ConverseStream sends inside the stream (`:exception-type`), as neutral errors. */
const STREAM_EXCEPTIONS: Record<string, [number, TranslationError['kind']]> = {
  throttlingException: [429, 'rate_limit'],
  validationException: [400, 'invalid_request'],
  internalServerException: [500, 'api_error'],
  serviceUnavailableException: [503, 'overloaded'],
  modelStreamErrorException: [502, 'api_error'],
  modelTimeoutException: [408, 'timeout']
}

type BlockKind = 'text' | 'reasoning' | 'tool_call'

/** Blocks open at once: a model opens one at a time; a stream opening thousands is hostile, not memory to spend. */
const MAX_OPEN_BLOCKS = 256

export class ConverseStreamDecoder implements StreamDecoder {
  private readonly reader: EventStreamReader
  private started = false
  private readonly open = new Map<number, BlockKind>()
  private stop: { reason: StopReason, sequence?: string } | null = null
  private usage: Usage | null = null
  private done = false

  constructor (maxMessageBytes?: number) {
    this.reader = new EventStreamReader(maxMessageBytes)
  }

  push (chunk: Buffer): StreamEvent[] {
    if (this.done) return []
    const out: StreamEvent[] = []
    for (const message of this.reader.push(chunk)) {
      this.onMessage(message, out)
      if (this.done) return out
    }
    if (this.reader.failed !== null) this.fail(out, this.reader.failed)
    return out
  }

  end (): StreamEvent[] {
    if (this.done) return []
    const out: StreamEvent[] = []
    const cut = this.reader.end()
    if (cut !== null) this.fail(out, cut)
    else if (this.stop !== null) this.finish(out)
    else {
      const tool = [...this.open.values()].includes('tool_call')
      this.fail(out, tool ? 'the stream ended in the middle of a tool call' : 'the stream ended before messageStop')
    }
    return out
  }

  /** Ends the stream with an error: a reason of Portico's (a malformed stream, a 502) or Bedrock's own error. */
  private fail (out: StreamEvent[], reason: string | TranslationError): void {
    out.push({ type: 'error', error: typeof reason === 'string' ? providerError(reason) : reason })
    this.done = true
  }

  private finish (out: StreamEvent[]): void {
    if (this.stop === null) return
    for (const index of this.open.keys()) out.push({ type: 'block_stop', index })
    this.open.clear()
    const event: StreamEvent = { type: 'finish', stopReason: this.stop.reason, usage: this.usage }
    if (this.stop.sequence !== undefined) event.stopSequence = this.stop.sequence
    out.push(event)
    this.done = true
  }

  private ensureStarted (out: StreamEvent[]): void {
    if (this.started) return
    this.started = true
    out.push({ type: 'start', id: '', model: '' })
  }

  private onMessage (message: EventStreamMessage, out: StreamEvent[]): void {
    const messageType = message.headers[':message-type']
    if (messageType === 'error') {
      return this.fail(out, translationError(502, 'api_error', message.headers[':error-message'] ?? message.headers[':error-code'] ?? 'Bedrock stream error'))
    }
    let payload: unknown
    try {
      payload = JSON.parse(message.payload.toString('utf8'))
    } catch {
      return this.fail(out, 'an event payload is not JSON')
    }
    if (!isObject(payload)) return this.fail(out, 'an event payload is not an object')
    if (messageType === 'exception') {
      const type = message.headers[':exception-type'] ?? ''
      const [status, kind] = STREAM_EXCEPTIONS[type] ?? [502, 'api_error']
      const text = typeof payload.message === 'string' ? payload.message : type
      return this.fail(out, translationError(status, kind, text))
    }
    if (messageType !== 'event') return this.fail(out, `unknown message type ${JSON.stringify(messageType)}`)
    const index = payload.contentBlockIndex
    if (index !== undefined && !(Number.isSafeInteger(index) && (index as number) >= 0)) return this.fail(out, 'contentBlockIndex is not a non-negative integer')
    switch (message.headers[':event-type']) {
      case 'messageStart':
        return this.ensureStarted(out)
      case 'contentBlockStart': {
        const start = isObject(payload.start) ? payload.start.toolUse : undefined
        if (typeof index !== 'number' || !isObject(start) || typeof start.toolUseId !== 'string' || typeof start.name !== 'string') return this.fail(out, 'contentBlockStart is not a toolUse start')
        if (this.open.has(index)) return this.fail(out, `content block ${index} started twice`)
        if (this.open.size >= MAX_OPEN_BLOCKS) return this.fail(out, `more than ${MAX_OPEN_BLOCKS} content blocks open at once`)
        this.ensureStarted(out)
        this.open.set(index, 'tool_call')
        out.push({ type: 'block_start', index, block: { type: 'tool_call', id: start.toolUseId, name: start.name } })
        return
      }
      case 'contentBlockDelta':
        return this.onDelta(index, payload.delta, out)
      case 'contentBlockStop':
        if (typeof index !== 'number') return this.fail(out, 'contentBlockStop without contentBlockIndex')
        // A block that never opened (its only content was redacted reasoning) has nothing to close.
        if (this.open.delete(index)) out.push({ type: 'block_stop', index })
        return
      case 'messageStop': {
        const reason = typeof payload.stopReason === 'string' ? STOP_REASONS[payload.stopReason] : undefined
        if (reason === undefined) return this.fail(out, `unknown stopReason ${JSON.stringify(payload.stopReason)}`)
        this.stop = { reason }
        const sequence = stopSequenceOf(payload.additionalModelResponseFields)
        if (sequence !== undefined) this.stop.sequence = sequence
        return
      }
      case 'metadata':
        this.usage = decodeUsage(payload.usage)
        // Usage comes after messageStop: that is the end of the generation.
        return this.finish(out)
      default:
        // An event type newer than this module (the SDK likewise skips unknown members).
    }
  }

  private onDelta (index: unknown, delta: unknown, out: StreamEvent[]): void {
    const m = isObject(delta) ? member(delta) : null
    if (typeof index !== 'number' || m === null) return this.fail(out, 'contentBlockDelta without index or delta')
    const [kind, value] = m
    const open = this.open.get(index)
    /** Opens a text or reasoning block at its first delta (Converse sends no start for those); an error when it cannot. */
    const openAs = (block: 'text' | 'reasoning'): string | null => {
      if (open === block) return null
      if (open !== undefined) return `${block} delta for ${open} block ${index}`
      if (this.open.size >= MAX_OPEN_BLOCKS) return `more than ${MAX_OPEN_BLOCKS} content blocks open at once`
      this.ensureStarted(out)
      this.open.set(index, block)
      out.push({ type: 'block_start', index, block: { type: block } })
      return null
    }
    if (kind === 'text' && typeof value === 'string') {
      const error = openAs('text')
      if (error !== null) return this.fail(out, error)
      out.push({ type: 'text_delta', index, text: value })
    } else if (kind === 'toolUse' && isObject(value) && typeof value.input === 'string') {
      if (open !== 'tool_call') return this.fail(out, `tool input delta for block ${index}, which is not a tool call`)
      out.push({ type: 'tool_args_delta', index, json: value.input })
    } else if (kind === 'reasoningContent' && isObject(value)) {
      if (typeof value.text === 'string' || typeof value.signature === 'string') {
        const error = openAs('reasoning')
        if (error !== null) return this.fail(out, error)
        const event: StreamEvent = { type: 'reasoning_delta', index, text: typeof value.text === 'string' ? value.text : '' }
        if (typeof value.signature === 'string') event.signature = value.signature
        out.push(event)
      }
      // redactedContent: no neutral form (see decodeResponse).
    } else return this.fail(out, `unsupported delta "${kind}"`)
  }
}

/**
 * Neutral events → ConverseStream's binary event stream, one message per Converse event: the
 * format's `BinaryStreamEncoder` (a Bedrock-format client's stream; tests and emulators too).
 */
export class ConverseStreamEncoder implements BinaryStreamEncoder {
  private usage: Usage | null = null
  private blockKinds = new Map<number, BlockKind>()

  encode (event: StreamEvent): Buffer {
    const frame = (eventType: string, payload: Json): Buffer =>
      encodeEventStreamMessage({ ':event-type': eventType, ':content-type': 'application/json', ':message-type': 'event' }, JSON.stringify(payload))
    switch (event.type) {
      case 'start':
        return frame('messageStart', { role: 'assistant' })
      case 'block_start':
        this.blockKinds.set(event.index, event.block.type)
        // Converse announces only tool-use blocks; text and reasoning blocks begin with their first delta.
        return event.block.type === 'tool_call'
          ? frame('contentBlockStart', { start: { toolUse: { toolUseId: event.block.id, name: event.block.name } }, contentBlockIndex: event.index })
          : Buffer.alloc(0)
      case 'text_delta':
        return frame('contentBlockDelta', { delta: { text: event.text }, contentBlockIndex: event.index })
      case 'reasoning_delta': {
        const parts: Buffer[] = []
        if (event.text !== '') parts.push(frame('contentBlockDelta', { delta: { reasoningContent: { text: event.text } }, contentBlockIndex: event.index }))
        if (event.signature !== undefined) parts.push(frame('contentBlockDelta', { delta: { reasoningContent: { signature: event.signature } }, contentBlockIndex: event.index }))
        return Buffer.concat(parts)
      }
      case 'tool_args_delta':
        return frame('contentBlockDelta', { delta: { toolUse: { input: event.json } }, contentBlockIndex: event.index })
      case 'block_stop':
        this.blockKinds.delete(event.index)
        return frame('contentBlockStop', { contentBlockIndex: event.index })
      case 'finish': {
        this.usage = event.usage
        const stop: Json = { stopReason: BEDROCK_STOP_REASONS[event.stopReason] }
        if (event.stopSequence !== undefined) stop.additionalModelResponseFields = { stop_sequence: event.stopSequence }
        return Buffer.concat([frame('messageStop', stop), frame('metadata', { usage: encodeUsage(this.usage), metrics: { latencyMs: 0 } })])
      }
      case 'error': {
        // Only these exceptions are members of ConverseStreamOutput (what the SDK can parse mid-stream).
        const member = ({ rate_limit: 'throttlingException', invalid_request: 'validationException', overloaded: 'serviceUnavailableException' } as Record<string, string>)[event.error.kind] ?? (event.error.status === 502 ? 'modelStreamErrorException' : 'internalServerException')
        return encodeEventStreamMessage({ ':exception-type': member, ':content-type': 'application/json', ':message-type': 'exception' }, JSON.stringify({ message: event.error.message }))
      }
    }
  }

  end (): Buffer {
    return Buffer.alloc(0)
  }
}

export const bedrockConverseFormat: WireFormat = {
  name: 'bedrock-converse',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  decodeError,
  encodeError,
  errorHeaders: error => ({ 'x-amzn-errortype': bedrockErrorType(error) }),
  newStreamDecoder: () => new ConverseStreamDecoder(),
  newStreamEncoder (): StreamEncoder {
    // The text stream encoder cannot carry ConverseStream, which is binary: a client stream
    // uses `newBinaryStreamEncoder`. Refused rather than corrupted for any caller that asks.
    throw translationError(400, 'invalid_request', 'a Bedrock ConverseStream is binary: use newBinaryStreamEncoder', 'stream')
  },
  newBinaryStreamEncoder: () => new ConverseStreamEncoder(),
  streamContentType: 'application/vnd.amazon.eventstream'
}
