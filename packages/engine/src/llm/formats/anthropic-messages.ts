/**
 * Anthropic's Messages API (`POST /v1/messages`, `anthropic-version: 2023-06-01`), both ways:
 * as a client format (Anthropic SDK, Claude Code) and as a provider format.
 *
 * Shapes follow the official SDK's types (`@anthropic-ai/sdk` resources/messages) and the API
 * reference. Choices this module makes, each also in docs/llm.md:
 * - `max_tokens` is required by Anthropic; a neutral request without one is sent with
 *   `ANTHROPIC_DEFAULT_MAX_TOKENS` (4096, as agentgateway and LiteLLM do).
 * - Usage: Anthropic's `input_tokens` excludes cache reads and writes ("total input tokens is
 *   the sum of input_tokens, cache_creation_input_tokens and cache_read_input_tokens"); the
 *   neutral `inputTokens` includes them. Decoding adds them up, encoding subtracts.
 * - Structured output is `output_config.format: {type: "json_schema", schema}` (the older
 *   top-level `output_format` is read too). Anthropic has no schema-less JSON mode, so a neutral
 *   `json_object` is refused with a 400.
 * - `redacted_thinking` blocks are encrypted for Anthropic alone; a translated request goes to
 *   another provider (Anthropic → Anthropic is pass-through and never comes here), so they are
 *   dropped from requests and answers, as are unsigned reasoning parts when encoding (Anthropic
 *   rejects a thinking block without its signature; earlier turns' thinking is optional).
 * - Server tools, documents, search results, citations, containers, file sources: refused
 *   with a 400 naming the field — no other provider can run or express them.
 */

import type {
  ChatMessage, ChatRequest, ChatResponse, ContentPart, EncodeOptions, StopReason,
  StreamEncoder, StreamEvent, ToolChoice, ToolDefinition, TranslationError, Usage, WireFormat
} from '../canonical.ts'
import { translationError } from '../canonical.ts'
import { SseStreamDecoder, sseEvent, type SseEvent } from '../sse.ts'

/** Sent as `max_tokens` when the neutral request has no limit (the field is required by Anthropic). */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096

/**
 * Request fields dropped on purpose when translating, with the reason (see canonical.ts):
 * each is meaningful to Anthropic's own account or infrastructure only.
 */
export const IGNORED: Readonly<Record<string, string>> = {
  metadata: 'metadata.user_id is an abuse-detection id for Anthropic only',
  service_tier: 'Anthropic capacity tier; the target provider has its own',
  speed: 'Anthropic inference speed mode',
  inference_geo: 'Anthropic inference region',
  cache_control: 'a prompt-cache breakpoint hint; other providers cache by themselves',
  diagnostics: 'Anthropic prompt-cache diagnostics',
  user_profile_id: 'Anthropic account attribution; a translated request is billed to the backend\'s key',
  workspace_id: 'Anthropic account attribution; a translated request is billed to the backend\'s key'
}

const IMAGE_MEDIA_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])

// ---------------------------------------------------------------------------------------------
// Refusals: thrown inside the decoders (deep in nested content), caught once at the top.

class Refusal {
  readonly error: TranslationError
  constructor (error: TranslationError) { this.error = error }
}

function refuse (field: string, message: string): never {
  throw new Refusal(translationError(400, 'invalid_request', `${field}: ${message}`, field))
}

/** A provider answer this module cannot read: the gateway's problem (502), never the client's. */
function badAnswer (message: string): never {
  throw new Refusal(translationError(502, 'api_error', `invalid answer from Anthropic: ${message}`))
}

function guarded<T> (fn: () => T): T | TranslationError {
  try {
    return fn()
  } catch (err) {
    if (err instanceof Refusal) return err.error
    throw err
  }
}

type Json = Record<string, unknown>

function isObject (v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}
function obj (v: unknown, field: string): Json {
  if (!isObject(v)) refuse(field, 'must be an object')
  return v
}
function str (v: unknown, field: string): string {
  if (typeof v !== 'string') refuse(field, 'must be a string')
  return v
}
function num (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) refuse(field, 'must be a number')
  return v
}
function arr (v: unknown, field: string): unknown[] {
  if (!Array.isArray(v)) refuse(field, 'must be an array')
  return v
}
/** Fields of `o` outside `known` and not null: refused, naming the first. */
function onlyKnown (o: Json, known: ReadonlySet<string>, field: string): void {
  for (const key of Object.keys(o)) {
    if (!known.has(key) && o[key] !== null && o[key] !== undefined) refuse(field === '' ? key : `${field}.${key}`, 'not supported when translating to another provider')
  }
}
const fields = (...names: string[]): ReadonlySet<string> => new Set(names)

// ---------------------------------------------------------------------------------------------
// Request: Anthropic → neutral

const REQUEST_FIELDS = fields('model', 'messages', 'max_tokens', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k',
  'tools', 'tool_choice', 'thinking', 'output_config', 'output_format', ...Object.keys(IGNORED))

function decodeRequest (body: Json): ChatRequest {
  onlyKnown(body, REQUEST_FIELDS, '')
  const request: ChatRequest = {
    model: body.model === undefined ? '' : str(body.model, 'model'),
    system: [],
    messages: [],
    stream: body.stream === true
  }
  if (body.system !== undefined && body.system !== null) request.system.push(...systemTexts(body.system, 'system'))
  const messages = arr(body.messages, 'messages')
  messages.forEach((m, i) => {
    const field = `messages[${i}]`
    const message = obj(m, field)
    onlyKnown(message, fields('role', 'content'), field)
    if (message.role === 'system') {
      // SystemMessageParam: a system turn before the conversation is the system prompt; later ones
      // (instructions changed mid-conversation) have no neutral form.
      if (request.messages.length > 0) refuse(`${field}.role`, 'a system message after the conversation started has no equivalent in other providers')
      request.system.push(...systemTexts(message.content, `${field}.content`))
      return
    }
    if (message.role !== 'user' && message.role !== 'assistant') refuse(`${field}.role`, 'must be "user", "assistant" or "system"')
    request.messages.push({ role: message.role, content: decodeContent(message.content, message.role, `${field}.content`) })
  })
  if (body.max_tokens !== undefined && body.max_tokens !== null) request.maxTokens = num(body.max_tokens, 'max_tokens')
  if (body.temperature !== undefined && body.temperature !== null) request.temperature = num(body.temperature, 'temperature')
  if (body.top_p !== undefined && body.top_p !== null) request.topP = num(body.top_p, 'top_p')
  if (body.top_k !== undefined && body.top_k !== null) request.topK = num(body.top_k, 'top_k')
  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    request.stop = arr(body.stop_sequences, 'stop_sequences').map((s, i) => str(s, `stop_sequences[${i}]`))
  }
  if (body.tools !== undefined && body.tools !== null) request.tools = arr(body.tools, 'tools').map((t, i) => decodeTool(t, `tools[${i}]`))
  if (body.tool_choice !== undefined && body.tool_choice !== null) decodeToolChoice(obj(body.tool_choice, 'tool_choice'), request)
  if (body.thinking !== undefined && body.thinking !== null) decodeThinking(obj(body.thinking, 'thinking'), request)
  if (body.output_config !== undefined && body.output_config !== null) {
    const config = obj(body.output_config, 'output_config')
    onlyKnown(config, fields('effort', 'format'), 'output_config')
    if (config.effort !== undefined && config.effort !== null) {
      const effort = config.effort
      if (effort !== 'low' && effort !== 'medium' && effort !== 'high') refuse('output_config.effort', `"${String(effort)}" has no equivalent in other providers (low, medium, high do)`)
      request.reasoning = { ...request.reasoning, effort }
    }
    if (config.format !== undefined && config.format !== null) request.responseFormat = decodeOutputFormat(config.format, 'output_config.format')
  }
  if (body.output_format !== undefined && body.output_format !== null) request.responseFormat = decodeOutputFormat(body.output_format, 'output_format')
  return request
}

function systemTexts (value: unknown, field: string): string[] {
  if (typeof value === 'string') return [value]
  return arr(value, field).map((b, i) => {
    const block = obj(b, `${field}[${i}]`)
    if (block.type !== 'text') refuse(`${field}[${i}].type`, 'system blocks must be text')
    onlyKnown(block, fields('type', 'text', 'cache_control'), `${field}[${i}]`)
    return str(block.text, `${field}[${i}].text`)
  })
}

function decodeContent (value: unknown, role: 'user' | 'assistant', field: string): ContentPart[] {
  if (typeof value === 'string') return [{ type: 'text', text: value }]
  const parts: ContentPart[] = []
  arr(value, field).forEach((b, i) => {
    const part = decodeBlock(obj(b, `${field}[${i}]`), role, `${field}[${i}]`)
    if (part !== null) parts.push(part)
  })
  return parts
}

function decodeBlock (block: Json, role: 'user' | 'assistant', field: string): ContentPart | null {
  switch (block.type) {
    case 'text':
      onlyKnown(block, fields('type', 'text', 'cache_control', 'citations'), field)
      // Citations point into documents and search results, which are refused; an empty list (as
      // an answer passed back may carry) says nothing.
      if (Array.isArray(block.citations) && block.citations.length > 0) refuse(`${field}.citations`, 'citations are not supported when translating to another provider')
      return { type: 'text', text: str(block.text, `${field}.text`) }
    case 'image':
      onlyKnown(block, fields('type', 'source', 'cache_control'), field)
      return { type: 'image', source: decodeImageSource(obj(block.source, `${field}.source`), `${field}.source`) }
    case 'tool_use': {
      if (role !== 'assistant') refuse(`${field}.type`, 'tool_use blocks belong to assistant turns')
      // `caller` is on every tool_use block of an answer passed back; only the model's own calls translate.
      onlyKnown(block, fields('type', 'id', 'name', 'input', 'cache_control', 'caller'), field)
      if (isObject(block.caller) && block.caller.type !== 'direct') refuse(`${field}.caller`, 'calls made by server tools are not supported')
      return { type: 'tool_call', id: str(block.id, `${field}.id`), name: str(block.name, `${field}.name`), input: obj(block.input, `${field}.input`) }
    }
    case 'tool_result': {
      if (role !== 'user') refuse(`${field}.type`, 'tool_result blocks belong to user turns')
      onlyKnown(block, fields('type', 'tool_use_id', 'content', 'is_error', 'cache_control'), field)
      const part: ContentPart = { type: 'tool_result', callId: str(block.tool_use_id, `${field}.tool_use_id`), content: decodeToolResultContent(block.content, `${field}.content`) }
      if (block.is_error === true) part.isError = true
      return part
    }
    case 'thinking':
      onlyKnown(block, fields('type', 'thinking', 'signature'), field)
      return { type: 'reasoning', text: str(block.thinking, `${field}.thinking`), signature: str(block.signature, `${field}.signature`) }
    case 'redacted_thinking':
      // Encrypted for Anthropic only (see the header): nothing another provider could read.
      str(block.data, `${field}.data`)
      return null
    default:
      return refuse(`${field}.type`, `"${String(block.type)}" blocks are not supported when translating to another provider`)
  }
}

function decodeImageSource (source: Json, field: string): Extract<ContentPart, { type: 'image' }>['source'] {
  if (source.type === 'base64') {
    onlyKnown(source, fields('type', 'media_type', 'data'), field)
    return { kind: 'base64', mediaType: str(source.media_type, `${field}.media_type`), data: str(source.data, `${field}.data`) }
  }
  if (source.type === 'url') {
    onlyKnown(source, fields('type', 'url'), field)
    return { kind: 'url', url: str(source.url, `${field}.url`) }
  }
  return refuse(`${field}.type`, `"${String(source.type)}" image sources exist only at Anthropic (base64 and url do)`)
}

function decodeToolResultContent (value: unknown, field: string): Extract<ContentPart, { type: 'tool_result' }>['content'] {
  if (value === undefined || value === null) return []
  if (typeof value === 'string') return [{ type: 'text', text: value }]
  return arr(value, field).map((b, i) => {
    const block = obj(b, `${field}[${i}]`)
    if (block.type === 'text') {
      onlyKnown(block, fields('type', 'text', 'cache_control'), `${field}[${i}]`)
      return { type: 'text', text: str(block.text, `${field}[${i}].text`) }
    }
    if (block.type === 'image') {
      onlyKnown(block, fields('type', 'source', 'cache_control'), `${field}[${i}]`)
      return { type: 'image', source: decodeImageSource(obj(block.source, `${field}[${i}].source`), `${field}[${i}].source`) }
    }
    return refuse(`${field}[${i}].type`, `"${String(block.type)}" blocks in a tool result are not supported when translating`)
  })
}

function decodeTool (value: unknown, field: string): ToolDefinition {
  const tool = obj(value, field)
  if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom') refuse(`${field}.type`, `"${String(tool.type)}" is an Anthropic server or built-in tool; only custom tools translate`)
  onlyKnown(tool, fields('type', 'name', 'description', 'input_schema', 'cache_control', 'strict'), field)
  const out: ToolDefinition = { name: str(tool.name, `${field}.name`), parameters: obj(tool.input_schema, `${field}.input_schema`) }
  if (tool.description !== undefined && tool.description !== null) out.description = str(tool.description, `${field}.description`)
  return out
}

function decodeToolChoice (choice: Json, request: ChatRequest): void {
  const known = fields('type', 'name', 'disable_parallel_tool_use')
  onlyKnown(choice, known, 'tool_choice')
  let out: ToolChoice
  switch (choice.type) {
    case 'auto': out = { type: 'auto' }; break
    case 'any': out = { type: 'required' }; break
    case 'none': out = { type: 'none' }; break
    case 'tool': out = { type: 'tool', name: str(choice.name, 'tool_choice.name') }; break
    default: return refuse('tool_choice.type', 'must be "auto", "any", "tool" or "none"')
  }
  request.toolChoice = out
  if (choice.disable_parallel_tool_use === true) request.parallelToolCalls = false
}

function decodeThinking (thinking: Json, request: ChatRequest): void {
  // `display` (summarized or omitted thinking) is a presentation choice no other provider has.
  onlyKnown(thinking, fields('type', 'budget_tokens', 'display'), 'thinking')
  switch (thinking.type) {
    case 'enabled': request.reasoning = { ...request.reasoning, budgetTokens: num(thinking.budget_tokens, 'thinking.budget_tokens') }; return
    case 'adaptive': request.reasoning = { ...request.reasoning }; return // reasoning on, the model decides how much
    case 'disabled': return
    default: refuse('thinking.type', `"${String(thinking.type)}" has no equivalent in other providers (enabled, adaptive, disabled do)`)
  }
}

function decodeOutputFormat (value: unknown, field: string): ChatRequest['responseFormat'] {
  const format = obj(value, field)
  if (format.type !== 'json_schema') refuse(`${field}.type`, 'must be "json_schema"')
  onlyKnown(format, fields('type', 'schema'), field)
  // Anthropic's format has no name; the neutral one needs one (OpenAI requires it): a fixed label.
  return { type: 'json_schema', name: 'output', schema: obj(format.schema, `${field}.schema`), strict: true }
}

// ---------------------------------------------------------------------------------------------
// Request: neutral → Anthropic

function encodeRequest (request: ChatRequest, model: string): Json {
  const body: Json = { model, max_tokens: request.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS }
  if (request.system.length === 1) body.system = request.system[0]
  else if (request.system.length > 1) body.system = request.system.map(text => ({ type: 'text', text }))
  body.messages = request.messages.map((m, i) => encodeMessage(m, `messages[${i}]`))
  if (request.stop !== undefined && request.stop.length > 0) body.stop_sequences = request.stop
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.topK !== undefined) body.top_k = request.topK
  if (request.tools !== undefined && request.tools.length > 0) {
    body.tools = request.tools.map(t => {
      // Anthropic requires `type: "object"` at the schema's root; OpenAI lets it be left out.
      const schema = t.parameters.type === undefined ? { type: 'object', ...t.parameters } : t.parameters
      return t.description === undefined ? { name: t.name, input_schema: schema } : { name: t.name, description: t.description, input_schema: schema }
    })
  }
  const choice = encodeToolChoice(request.toolChoice, request.parallelToolCalls)
  if (choice !== undefined) body.tool_choice = choice
  const outputConfig: Json = {}
  if (request.responseFormat !== undefined) {
    const format = request.responseFormat
    if (format.type === 'json_object') refuse('response_format', 'Anthropic has no schema-less JSON mode; send a json_schema')
    // name, description and strict have no place in Anthropic's format: its output is always held to the schema.
    if (format.type === 'json_schema') outputConfig.format = { type: 'json_schema', schema: format.schema }
  }
  if (request.reasoning !== undefined) {
    const { effort, budgetTokens } = request.reasoning
    if (budgetTokens !== undefined) body.thinking = { type: 'enabled', budget_tokens: budgetTokens }
    else if (effort === undefined) body.thinking = { type: 'adaptive' }
    // Anthropic's lowest effort is "low".
    if (effort !== undefined) outputConfig.effort = effort === 'minimal' ? 'low' : effort
  }
  if (Object.keys(outputConfig).length > 0) body.output_config = outputConfig
  if (request.stream) body.stream = true
  return body
}

function encodeToolChoice (choice: ToolChoice | undefined, parallel: boolean | undefined): Json | undefined {
  const noParallel = parallel === false ? { disable_parallel_tool_use: true } : {}
  switch (choice?.type) {
    case undefined: return parallel === false ? { type: 'auto', ...noParallel } : undefined
    case 'auto': return { type: 'auto', ...noParallel }
    case 'required': return { type: 'any', ...noParallel }
    case 'tool': return { type: 'tool', name: choice.name, ...noParallel }
    case 'none': return { type: 'none' }
  }
}

function encodeMessage (message: ChatMessage, field: string): Json {
  const content: Json[] = []
  message.content.forEach((part, i) => {
    const block = encodePart(part, `${field}.content[${i}]`)
    if (block !== null) content.push(block)
  })
  return { role: message.role, content }
}

function encodePart (part: ContentPart, field: string): Json | null {
  switch (part.type) {
    case 'text': return { type: 'text', text: part.text }
    case 'image': return { type: 'image', source: encodeImageSource(part.source, field) }
    case 'tool_call': return { type: 'tool_use', id: part.id, name: part.name, input: part.input }
    case 'tool_result': {
      // `content` is optional at Anthropic; an empty result leaves it out.
      const block: Json = { type: 'tool_result', tool_use_id: part.callId }
      if (part.content.length > 0) block.content = part.content.map(c => c.type === 'text' ? { type: 'text', text: c.text } : { type: 'image', source: encodeImageSource(c.source, field) })
      if (part.isError === true) block.is_error = true
      return block
    }
    case 'reasoning':
      // Anthropic rejects thinking without its signature, and earlier turns' thinking is optional.
      return part.signature === undefined || part.signature === '' ? null : { type: 'thinking', thinking: part.text, signature: part.signature }
  }
}

function encodeImageSource (source: Extract<ContentPart, { type: 'image' }>['source'], field: string): Json {
  if (source.kind === 'url') {
    // A data: URL (OpenAI clients send inline images so) is inline data for Anthropic.
    const data = /^data:([^;,]+);base64,(.*)$/s.exec(source.url)
    if (data === null) return { type: 'url', url: source.url }
    return base64Source(data[1] ?? '', data[2] ?? '', field)
  }
  return base64Source(source.mediaType, source.data, field)
}

function base64Source (mediaType: string, data: string, field: string): Json {
  if (!IMAGE_MEDIA_TYPES.has(mediaType)) refuse(field, `image type "${mediaType}" is not accepted by Anthropic (jpeg, png, gif, webp are)`)
  return { type: 'base64', media_type: mediaType, data }
}

// ---------------------------------------------------------------------------------------------
// Answers

const STOP_IN: Readonly<Record<string, StopReason>> = {
  end_turn: 'end_turn',
  max_tokens: 'max_tokens',
  stop_sequence: 'stop_sequence',
  tool_use: 'tool_use',
  pause_turn: 'pause',
  refusal: 'refusal',
  // The context window ran out: for the client, the output limit was reached.
  model_context_window_exceeded: 'max_tokens'
}

const STOP_OUT: Readonly<Record<StopReason, string>> = {
  end_turn: 'end_turn',
  max_tokens: 'max_tokens',
  stop_sequence: 'stop_sequence',
  tool_use: 'tool_use',
  pause: 'pause_turn',
  refusal: 'refusal',
  content_filter: 'refusal',
  // A generation that ended in error has no Anthropic reason; the error itself travels separately.
  error: 'end_turn'
}

function decodeStop (value: unknown): StopReason {
  if (typeof value !== 'string') return 'end_turn'
  return STOP_IN[value] ?? badAnswer(`unknown stop_reason "${value}"`)
}

const count = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0

function decodeUsage (value: unknown): Usage | null {
  if (!isObject(value)) return null
  const cacheRead = count(value.cache_read_input_tokens)
  const cacheWrite = count(value.cache_creation_input_tokens)
  const usage: Usage = { inputTokens: count(value.input_tokens) + cacheRead + cacheWrite, outputTokens: count(value.output_tokens) }
  if (value.cache_read_input_tokens !== undefined && value.cache_read_input_tokens !== null) usage.cachedInputTokens = cacheRead
  if (value.cache_creation_input_tokens !== undefined && value.cache_creation_input_tokens !== null) usage.cacheCreationInputTokens = cacheWrite
  if (isObject(value.output_tokens_details) && typeof value.output_tokens_details.thinking_tokens === 'number') usage.reasoningTokens = count(value.output_tokens_details.thinking_tokens)
  return usage
}

function encodeUsage (usage: Usage | null | undefined): Json {
  const u = usage ?? { inputTokens: 0, outputTokens: 0 }
  const cacheRead = u.cachedInputTokens ?? 0
  const cacheWrite = u.cacheCreationInputTokens ?? 0
  const out: Json = {
    input_tokens: Math.max(0, u.inputTokens - cacheRead - cacheWrite),
    output_tokens: u.outputTokens,
    cache_creation_input_tokens: cacheWrite,
    cache_read_input_tokens: cacheRead
  }
  if (u.reasoningTokens !== undefined) out.output_tokens_details = { thinking_tokens: u.reasoningTokens }
  return out
}

function decodeResponse (body: Json): ChatResponse {
  // An error body under a success status (a proxy on the way, an overloaded backend): the error it carries.
  if (body.type === 'error') throw new Refusal(decodeError(errorStatus(body), body))
  const content: ContentPart[] = []
  const blocks = Array.isArray(body.content) ? body.content : badAnswer('no content array')
  for (const b of blocks) {
    if (!isObject(b)) badAnswer('a content block is not an object')
    const part = answerBlock(b)
    if (part !== null) content.push(part)
  }
  const response: ChatResponse = {
    id: typeof body.id === 'string' ? body.id : '',
    model: typeof body.model === 'string' ? body.model : '',
    content,
    stopReason: decodeStop(body.stop_reason),
    usage: decodeUsage(body.usage)
  }
  if (typeof body.stop_sequence === 'string') response.stopSequence = body.stop_sequence
  return response
}

function answerBlock (b: Json): ContentPart | null {
  switch (b.type) {
    // Citations only come back for documents and search results, which are refused in requests.
    case 'text': return { type: 'text', text: typeof b.text === 'string' ? b.text : badAnswer('a text block without text') }
    case 'thinking': return { type: 'reasoning', text: typeof b.thinking === 'string' ? b.thinking : '', ...(typeof b.signature === 'string' ? { signature: b.signature } : {}) }
    case 'redacted_thinking': return null
    case 'tool_use':
      return {
        type: 'tool_call',
        id: typeof b.id === 'string' ? b.id : badAnswer('a tool_use block without id'),
        name: typeof b.name === 'string' ? b.name : badAnswer('a tool_use block without name'),
        input: isObject(b.input) ? b.input : badAnswer('a tool_use block whose input is not an object')
      }
    default: return badAnswer(`unsupported content block "${String(b.type)}"`)
  }
}

function encodeResponse (response: ChatResponse, options: EncodeOptions): Json {
  const content: Json[] = []
  for (const part of response.content) {
    // Anthropic answers hold text, thinking and tool calls only; an image or tool result in a
    // neutral answer (no provider returns them) has no block to go in.
    if (part.type === 'text') content.push({ type: 'text', text: part.text })
    else if (part.type === 'reasoning') content.push({ type: 'thinking', thinking: part.text, signature: part.signature ?? '' })
    else if (part.type === 'tool_call') content.push({ type: 'tool_use', id: part.id, name: part.name, input: part.input })
  }
  return {
    id: response.id,
    type: 'message',
    role: 'assistant',
    model: response.model === '' ? options.requestModel : response.model,
    content,
    stop_reason: STOP_OUT[response.stopReason],
    stop_sequence: response.stopSequence ?? null,
    usage: encodeUsage(response.usage)
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

const ERROR_KIND: Readonly<Record<string, TranslationError['kind']>> = {
  invalid_request_error: 'invalid_request',
  request_too_large: 'invalid_request',
  authentication_error: 'authentication',
  billing_error: 'permission',
  permission_error: 'permission',
  not_found_error: 'not_found',
  rate_limit_error: 'rate_limit',
  timeout_error: 'timeout',
  api_error: 'api_error',
  overloaded_error: 'overloaded'
}

/** The status Anthropic answers each error type with (used for error events inside a 200 stream). */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529
}

/** The status of an error body that came without one (inside a 200 or a stream). */
function errorStatus (body: Json): number {
  const type = isObject(body.error) ? body.error.type : undefined
  return typeof type === 'string' ? ERROR_STATUS[type] ?? 502 : 502
}

function kindOfStatus (status: number): TranslationError['kind'] {
  if (status === 401) return 'authentication'
  if (status === 402 || status === 403) return 'permission'
  if (status === 404) return 'not_found'
  if (status === 429) return 'rate_limit'
  if (status === 529 || status === 503) return 'overloaded'
  if (status === 504 || status === 408) return 'timeout'
  if (status >= 400 && status < 500) return 'invalid_request'
  return 'api_error'
}

function decodeError (status: number, body: unknown): TranslationError {
  const error = isObject(body) && isObject(body.error) ? body.error : null
  const type = error !== null && typeof error.type === 'string' ? error.type : ''
  const message = error !== null && typeof error.message === 'string' ? error.message : `Anthropic answered ${status}`
  return translationError(status, ERROR_KIND[type] ?? kindOfStatus(status), message)
}

function errorType (error: TranslationError): string {
  switch (error.kind) {
    case 'invalid_request': return error.status === 413 ? 'request_too_large' : 'invalid_request_error'
    case 'authentication': return 'authentication_error'
    case 'permission': return error.status === 402 ? 'billing_error' : 'permission_error'
    case 'not_found': return 'not_found_error'
    case 'rate_limit': return 'rate_limit_error'
    case 'overloaded': return 'overloaded_error'
    case 'timeout': return 'timeout_error'
    case 'api_error': return 'api_error'
  }
}

function encodeError (error: TranslationError): Json {
  return { type: 'error', error: { type: errorType(error), message: error.message } }
}

// ---------------------------------------------------------------------------------------------
// Streams: Anthropic SSE → neutral events

/**
 * Reads Anthropic's typed events (message_start, content_block_start/delta/stop, message_delta,
 * message_stop, ping, error). `finish` is emitted at message_delta (which carries the stop reason
 * and final usage), so a stream cut between it and message_stop is still whole. Anything else
 * going wrong — bad JSON, an unknown block, a stream ending before message_delta (a tool call cut
 * in half) — becomes one `error` event, after which input is ignored.
 */
class AnthropicStreamDecoder extends SseStreamDecoder {
  private finished = false
  private startUsage: Json = {}
  /** Indices of blocks with no neutral form (redacted thinking): their events are skipped. */
  private readonly skipped = new Set<number>()

  protected invalidStream (message: string): TranslationError {
    return translationError(502, 'api_error', `invalid stream from the provider: ${message}`)
  }

  protected ended (out: StreamEvent[]): void {
    // After message_delta the answer is whole (a missing message_stop loses nothing).
    if (this.finished) this.done = true
    else this.fail(out, this.invalidStream('the stream ended before the message was complete'))
  }

  protected event ({ event: name, data }: SseEvent, out: StreamEvent[]): void {
    try {
      this.decodeEvent(name, data, out)
    } catch (err) {
      if (!(err instanceof Refusal)) throw err
      this.fail(out, err.error)
    }
  }

  private decodeEvent (name: string, data: string, out: StreamEvent[]): void {
    if (name === 'ping') return
    let payload: unknown
    try {
      payload = JSON.parse(data)
    } catch {
      badAnswer(`an event that is not JSON (${name === '' ? 'unnamed' : name})`)
    }
    if (!isObject(payload)) badAnswer('an event that is not an object')
    const type = typeof payload.type === 'string' ? payload.type : name
    switch (type) {
      case 'message_start': {
        const message = isObject(payload.message) ? payload.message : badAnswer('message_start without a message')
        this.startUsage = isObject(message.usage) ? message.usage : {}
        const start: StreamEvent = { type: 'start', id: typeof message.id === 'string' ? message.id : '', model: typeof message.model === 'string' ? message.model : '' }
        const usage = decodeUsage(message.usage)
        if (usage !== null) start.usage = usage
        out.push(start)
        return
      }
      case 'content_block_start': {
        const index = blockIndex(payload.index)
        const block = isObject(payload.content_block) ? payload.content_block : badAnswer('content_block_start without a block')
        if (block.type === 'text') {
          out.push({ type: 'block_start', index, block: { type: 'text' } })
          if (typeof block.text === 'string' && block.text !== '') out.push({ type: 'text_delta', index, text: block.text })
        } else if (block.type === 'thinking') {
          out.push({ type: 'block_start', index, block: { type: 'reasoning' } })
          if (typeof block.thinking === 'string' && block.thinking !== '') out.push({ type: 'reasoning_delta', index, text: block.thinking })
        } else if (block.type === 'tool_use') {
          if (typeof block.id !== 'string' || typeof block.name !== 'string') badAnswer('a tool_use block without id or name')
          out.push({ type: 'block_start', index, block: { type: 'tool_call', id: block.id, name: block.name } })
          // The input starts as {} and comes in input_json_delta fragments; a non-empty one is sent whole.
          if (isObject(block.input) && Object.keys(block.input).length > 0) out.push({ type: 'tool_args_delta', index, json: JSON.stringify(block.input) })
        } else if (block.type === 'redacted_thinking') {
          this.skipped.add(index)
        } else {
          badAnswer(`unsupported content block "${String(block.type)}"`)
        }
        return
      }
      case 'content_block_delta': {
        const index = blockIndex(payload.index)
        if (this.skipped.has(index)) return
        const delta = isObject(payload.delta) ? payload.delta : badAnswer('content_block_delta without a delta')
        switch (delta.type) {
          case 'text_delta': out.push({ type: 'text_delta', index, text: stringField(delta.text) }); return
          case 'input_json_delta': {
            // Anthropic opens each call with an empty fragment; it says nothing.
            const json = stringField(delta.partial_json)
            if (json !== '') out.push({ type: 'tool_args_delta', index, json })
            return
          }
          case 'thinking_delta': out.push({ type: 'reasoning_delta', index, text: stringField(delta.thinking) }); return
          case 'signature_delta': out.push({ type: 'reasoning_delta', index, text: '', signature: stringField(delta.signature) }); return
          case 'citations_delta': return // see answerBlock: citations only follow refused inputs
          default: badAnswer(`unknown delta "${String(delta.type)}"`)
        }
        return
      }
      case 'content_block_stop': {
        const index = blockIndex(payload.index)
        if (!this.skipped.has(index)) out.push({ type: 'block_stop', index })
        return
      }
      case 'message_delta': {
        const delta = isObject(payload.delta) ? payload.delta : {}
        // message_delta usage is cumulative; fields it leaves null keep message_start's values.
        const merged: Json = { ...this.startUsage }
        if (isObject(payload.usage)) for (const [k, v] of Object.entries(payload.usage)) if (v !== null && v !== undefined) merged[k] = v
        const finish: StreamEvent = { type: 'finish', stopReason: decodeStop(delta.stop_reason), usage: decodeUsage(merged) }
        if (typeof delta.stop_sequence === 'string') finish.stopSequence = delta.stop_sequence
        out.push(finish)
        this.finished = true
        return
      }
      case 'message_stop':
        if (!this.finished) badAnswer('message_stop before message_delta')
        this.done = true
        return
      case 'error': {
        this.fail(out, decodeError(errorStatus(payload), payload))
        return
      }
      default:
        // Anthropic documents that new event types may appear; clients are to ignore them.
    }
  }
}

function blockIndex (v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : badAnswer('an event without a valid block index')
}
function stringField (v: unknown): string {
  return typeof v === 'string' ? v : badAnswer('a delta without its text')
}

// ---------------------------------------------------------------------------------------------
// Streams: neutral events → Anthropic SSE

/**
 * Writes Anthropic's event sequence. Anthropic blocks are strictly sequential and numbered from
 * 0 (the SDK indexes its snapshot by position), so neutral indices are renumbered, and a block
 * still open when the next starts is stopped first. Text arriving for a stopped text block opens
 * a new one; tool arguments for a stopped tool call cannot be expressed (the call's input is one
 * block) and end the stream with an error event.
 */
class AnthropicStreamEncoder implements StreamEncoder {
  private readonly options: EncodeOptions
  private started = false
  private ended = false
  private next = 0
  /** Neutral index → client index of the block currently carrying it. */
  private readonly blocks = new Map<number, { index: number, kind: 'text' | 'reasoning' | 'tool_call', open: boolean }>()
  private open: number | null = null

  constructor (options: EncodeOptions) { this.options = options }

  encode (event: StreamEvent): string {
    if (this.ended) return ''
    let out = ''
    if (!this.started && event.type !== 'error') out += this.start(event.type === 'start' ? event : { type: 'start', id: '', model: '' })
    switch (event.type) {
      case 'start': return out
      case 'block_start': return out + this.openBlock(event.index, event.block.type, event.block)
      case 'text_delta': return out + this.delta(event.index, 'text', { type: 'text_delta', text: event.text })
      case 'reasoning_delta': {
        if (event.text !== '') out += this.delta(event.index, 'reasoning', { type: 'thinking_delta', thinking: event.text })
        if (event.signature !== undefined) out += this.delta(event.index, 'reasoning', { type: 'signature_delta', signature: event.signature })
        return out
      }
      case 'tool_args_delta': {
        const block = this.blocks.get(event.index)
        if (block === undefined || !block.open || block.kind !== 'tool_call' || this.open !== event.index) {
          return out + this.fail('tool call arguments arrived outside their block, which Anthropic\'s stream cannot express')
        }
        return out + this.delta(event.index, 'tool_call', { type: 'input_json_delta', partial_json: event.json })
      }
      case 'block_stop': return out + this.stop(event.index)
      case 'finish': {
        out += this.closeOpen()
        const usage = encodeUsage(event.usage)
        out += send('message_delta', { type: 'message_delta', delta: { stop_reason: STOP_OUT[event.stopReason], stop_sequence: event.stopSequence ?? null }, usage })
        out += send('message_stop', { type: 'message_stop' })
        this.ended = true
        return out
      }
      case 'error': return out + this.fail(event.error)
    }
  }

  end (): string { return '' }

  private start (event: Extract<StreamEvent, { type: 'start' }>): string {
    this.started = true
    const usage = encodeUsage(event.usage)
    return send('message_start', {
      type: 'message_start',
      message: {
        id: event.id,
        type: 'message',
        role: 'assistant',
        model: event.model === '' ? this.options.requestModel : event.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage
      }
    })
  }

  private openBlock (neutral: number, kind: 'text' | 'reasoning' | 'tool_call', block?: Extract<StreamEvent, { type: 'block_start' }>['block']): string {
    let out = this.closeOpen()
    const index = this.next++
    this.blocks.set(neutral, { index, kind, open: true })
    this.open = neutral
    let contentBlock: Json
    if (kind === 'text') contentBlock = { type: 'text', text: '' }
    else if (kind === 'reasoning') contentBlock = { type: 'thinking', thinking: '', signature: '' }
    else {
      const call = block as { type: 'tool_call', id: string, name: string }
      contentBlock = { type: 'tool_use', id: call.id, name: call.name, input: {} }
    }
    out += send('content_block_start', { type: 'content_block_start', index, content_block: contentBlock })
    return out
  }

  private delta (neutral: number, kind: 'text' | 'reasoning' | 'tool_call', delta: Json): string {
    let out = ''
    let block = this.blocks.get(neutral)
    if (block === undefined || !block.open || this.open !== neutral) {
      // A delta without its block_start, after its block_stop, or interleaved with another
      // block: text and thinking go on in a new block (tool calls never get here, see encode).
      out += this.openBlock(neutral, kind)
      block = this.blocks.get(neutral)!
    }
    return out + send('content_block_delta', { type: 'content_block_delta', index: block.index, delta })
  }

  private stop (neutral: number): string {
    const block = this.blocks.get(neutral)
    if (block === undefined || !block.open) return ''
    block.open = false
    if (this.open === neutral) this.open = null
    return send('content_block_stop', { type: 'content_block_stop', index: block.index })
  }

  private closeOpen (): string {
    return this.open === null ? '' : this.stop(this.open)
  }

  private fail (error: TranslationError | string): string {
    this.ended = true
    const e = typeof error === 'string' ? translationError(502, 'api_error', error) : error
    return send('error', encodeError(e))
  }
}

function send (event: string, data: Json): string {
  return sseEvent(JSON.stringify(data), event)
}

// ---------------------------------------------------------------------------------------------

export const anthropicMessagesFormat: WireFormat = {
  name: 'anthropic-messages',
  decodeRequest: body => guarded(() => decodeRequest(body)),
  encodeRequest: (request, model) => guarded(() => encodeRequest(request, model)),
  decodeResponse: body => guarded(() => decodeResponse(body)),
  encodeResponse,
  decodeError,
  encodeError,
  newStreamDecoder: () => new AnthropicStreamDecoder(),
  newStreamEncoder: options => new AnthropicStreamEncoder(options),
  streamContentType: 'text/event-stream'
}

// ---------------------------------------------------------------------------------------------
// The model list (`GET /v1/models`), for a route that serves `/v1/models` in another format than
// its provider's. Not part of `WireFormat` (which is about chat); plain functions.

/** One model in a list, in neutral terms. */
export interface ListedModel {
  id: string
  /** Seconds since the epoch, when known. */
  created?: number
  displayName?: string
}

/** Anthropic's `{data: [{type: "model", id, display_name, created_at}], has_more, first_id, last_id}` → models. */
export function decodeAnthropicModelList (body: unknown): ListedModel[] | TranslationError {
  if (!isObject(body) || !Array.isArray(body.data)) return translationError(502, 'api_error', 'invalid answer from Anthropic: a model list without data')
  const out: ListedModel[] = []
  for (const m of body.data) {
    if (!isObject(m) || typeof m.id !== 'string') continue
    const model: ListedModel = { id: m.id }
    const created = typeof m.created_at === 'string' ? Date.parse(m.created_at) : NaN
    if (Number.isFinite(created)) model.created = Math.floor(created / 1000)
    if (typeof m.display_name === 'string') model.displayName = m.display_name
    out.push(model)
  }
  return out
}

/** Models → Anthropic's list page (one page: `has_more: false`). */
export function encodeAnthropicModelList (models: ListedModel[]): Record<string, unknown> {
  return {
    data: models.map(m => ({
      type: 'model',
      id: m.id,
      display_name: m.displayName ?? m.id,
      created_at: new Date((m.created ?? 0) * 1000).toISOString().replace('.000Z', 'Z')
    })),
    has_more: false,
    first_id: models[0]?.id ?? null,
    last_id: models.at(-1)?.id ?? null
  }
}
