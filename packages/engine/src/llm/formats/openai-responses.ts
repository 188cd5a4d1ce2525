/**
 * OpenAI's Responses API (`POST /v1/responses`) as a wire format, both directions: a client
 * speaking it is decoded into the neutral shape (llm/canonical.ts), and a provider speaking it
 * (OpenAI, Azure OpenAI) is encoded to and decoded from. Shapes follow OpenAI's API reference
 * and the official SDK's types (`openai` resources/responses/responses.d.ts).
 *
 * The Responses API is stateful on OpenAI's side (stored responses, conversations, background
 * runs, hosted tools); another provider has none of that state, so those fields are refused
 * with a 400 naming them rather than answered without the context the client counted on
 * (`REFUSED`). Fields that only tune OpenAI's service and are harmless to omit elsewhere are
 * in `IGNORED`, each with its reason. Anything else unknown is refused: a field added to the
 * API later is not dropped silently.
 *
 * Normalisations a round trip (decode → encode) makes, all documented in docs/llm.md:
 * - `system` / `developer` messages anywhere in `input` join `instructions` as system text
 *   (in order); encoded back as one `instructions` string (joined with a blank line).
 * - consecutive items of one side (an assistant message and its `function_call`s; the
 *   `function_call_output`s and the user's next message) form one neutral turn.
 * - a string `input` or string message content becomes one text part.
 * - reasoning items the client sends back are decoded (summary text, `encrypted_content` as
 *   the signature) but not encoded to OpenAI: an input reasoning item must name the id of a
 *   reasoning item OpenAI produced, which the neutral shape does not keep.
 */

import {
  isTranslationError, translationError,
  type ChatMessage, type ChatRequest, type ChatResponse, type ContentPart, type EncodeOptions,
  type ResponseFormat, type StopReason, type StreamEncoder, type StreamEvent,
  type ToolChoice, type ToolDefinition, type TranslationError, type Usage, type WireFormat
} from '../canonical.ts'
import { SseStreamDecoder, sseEvent, type SseEvent } from '../sse.ts'
import { decodeOpenAIError as decodeError, encodeOpenAIError as encodeError, openAIErrorCode } from './openai-errors.ts'

/** Request fields that need OpenAI's server-side state or hosted features: refused (400 naming them). */
const REFUSED: Record<string, string> = {
  previous_response_id: 'continues a response stored by OpenAI; send the whole conversation in `input` instead',
  conversation: 'continues a conversation stored by OpenAI; send the whole conversation in `input` instead',
  background: 'background responses are run and stored by OpenAI',
  prompt: 'a prompt template stored by OpenAI',
  context_management: 'server-side compaction of a conversation stored by OpenAI',
  max_tool_calls: 'a limit on hosted tool calls, which only OpenAI runs',
  top_logprobs: 'log probabilities have no neutral form',
  image: 'image generation options',
  access_programs: 'programmatic tool calling runs on OpenAI',
  moderation: 'OpenAI moderation settings'
}

/** Request fields dropped on purpose: they tune OpenAI's service only (see the module comment). */
export const IGNORED: Record<string, string> = {
  user: 'an end-user id for OpenAI abuse monitoring',
  safety_identifier: 'an end-user id for OpenAI abuse monitoring',
  metadata: 'key-value tags stored with the response on OpenAI',
  service_tier: 'OpenAI processing tier',
  prompt_cache_key: 'OpenAI prompt-cache routing hint',
  prompt_cache_retention: 'OpenAI prompt-cache retention',
  prompt_cache_options: 'OpenAI prompt-cache options',
  truncation: 'OpenAI context truncation strategy (Portico sends the whole input)',
  include: 'extra fields in OpenAI output (encrypted reasoning, hosted tool results); other providers have none',
  stream_options: 'stream obfuscation padding on OpenAI',
  'text.verbosity': 'an answer-length hint to OpenAI models; other providers have no such control',
  'reasoning.summary': 'whether OpenAI returns reasoning summaries; other providers return what they return',
  'reasoning.generate_summary': 'deprecated alias of reasoning.summary',
  'reasoning.context': 'which reasoning items OpenAI renders back on later turns',
  'tools[].strict': 'OpenAI strict schema adherence; other providers have no such switch (Portico sends strict: false to OpenAI so any JSON Schema is accepted)'
}

/** Built-in (hosted) tool types: they run on OpenAI, no other provider can execute them. */
const HOSTED_TOOL_MESSAGE = 'is a tool OpenAI hosts and runs; it cannot be translated to another provider (only `function` tools can)'

const HANDLED = new Set(['model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls',
  'max_output_tokens', 'temperature', 'top_p', 'text', 'reasoning', 'stream', 'store'])

type Json = Record<string, unknown>

function isObject (value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function bad (message: string, field: string): TranslationError {
  return translationError(400, 'invalid_request', message, field)
}

// ---------------------------------------------------------------------------------------------
// Requests: client → neutral

function decodeRequest (body: Json): ChatRequest | TranslationError {
  for (const key of Object.keys(body)) {
    if (body[key] === undefined) continue
    if (key in REFUSED) {
      // `background: false` asks for nothing; `null` is the API's "unset".
      if (body[key] === null || (key === 'background' && body[key] === false)) continue
      return bad(`\`${key}\` cannot be translated to another provider: ${REFUSED[key]}`, key)
    }
    if (!HANDLED.has(key) && !(key in IGNORED && !key.includes('.'))) return bad(`unsupported field \`${key}\``, key)
  }
  if (typeof body.model !== 'string' || body.model === '') return bad('`model` must be a non-empty string', 'model')
  if (body.store === true) {
    return bad('`store: true` keeps the response on OpenAI for later `previous_response_id` use, which another provider cannot honour; send `store: false`', 'store')
  }
  if (body.store !== undefined && body.store !== null && body.store !== false) return bad('`store` must be a boolean', 'store')

  const request: ChatRequest = { model: body.model, system: [], messages: [], stream: false }
  if (body.stream !== undefined && body.stream !== null) {
    if (typeof body.stream !== 'boolean') return bad('`stream` must be a boolean', 'stream')
    request.stream = body.stream
  }
  if (body.instructions !== undefined && body.instructions !== null) {
    if (typeof body.instructions !== 'string') return bad('`instructions` must be a string', 'instructions')
    request.system.push(body.instructions)
  }

  const input = decodeInput(body.input, request)
  if (input !== null) return input

  if (body.tools !== undefined && body.tools !== null) {
    const tools = decodeTools(body.tools)
    if (isTranslationError(tools)) return tools
    if (tools.length > 0) request.tools = tools
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    const choice = decodeToolChoice(body.tool_choice)
    if (isTranslationError(choice)) return choice
    request.toolChoice = choice
  }
  if (body.parallel_tool_calls !== undefined && body.parallel_tool_calls !== null) {
    if (typeof body.parallel_tool_calls !== 'boolean') return bad('`parallel_tool_calls` must be a boolean', 'parallel_tool_calls')
    request.parallelToolCalls = body.parallel_tool_calls
  }
  for (const [key, target, min, max] of [
    ['max_output_tokens', 'maxTokens', 1, Number.MAX_SAFE_INTEGER],
    ['temperature', 'temperature', 0, 2],
    ['top_p', 'topP', 0, 1]
  ] as const) {
    const value = body[key]
    if (value === undefined || value === null) continue
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max ||
        (key === 'max_output_tokens' && !Number.isInteger(value))) {
      return bad(`\`${key}\` must be a number from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`, key)
    }
    request[target] = value
  }
  if (body.text !== undefined && body.text !== null) {
    if (!isObject(body.text)) return bad('`text` must be an object', 'text')
    for (const key of Object.keys(body.text)) {
      if (key !== 'format' && key !== 'verbosity') return bad(`unsupported field \`text.${key}\``, `text.${key}`)
    }
    if (body.text.format !== undefined && body.text.format !== null) {
      const format = decodeTextFormat(body.text.format)
      if (isTranslationError(format)) return format
      request.responseFormat = format
    }
  }
  if (body.reasoning !== undefined && body.reasoning !== null) {
    if (!isObject(body.reasoning)) return bad('`reasoning` must be an object', 'reasoning')
    for (const key of Object.keys(body.reasoning)) {
      if (key !== 'effort' && !(`reasoning.${key}` in IGNORED)) return bad(`unsupported field \`reasoning.${key}\``, `reasoning.${key}`)
    }
    const effort = body.reasoning.effort
    if (effort !== undefined && effort !== null && effort !== 'none') {
      if (effort !== 'minimal' && effort !== 'low' && effort !== 'medium' && effort !== 'high') {
        return bad(`\`reasoning.effort\` ${JSON.stringify(effort)} cannot be translated: use none, minimal, low, medium or high`, 'reasoning.effort')
      }
      request.reasoning = { effort }
    }
  }
  return request
}

/** Appends a part to the last message when it has the same role, else starts a turn. */
function append (messages: ChatMessage[], role: 'user' | 'assistant', part: ContentPart): void {
  const last = messages[messages.length - 1]
  if (last !== undefined && last.role === role) last.content.push(part)
  else messages.push({ role, content: [part] })
}

function decodeInput (input: unknown, request: ChatRequest): TranslationError | null {
  if (input === undefined || input === null) return bad('`input` is required', 'input')
  if (typeof input === 'string') {
    request.messages.push({ role: 'user', content: [{ type: 'text', text: input }] })
    return null
  }
  if (!Array.isArray(input)) return bad('`input` must be a string or a list of items', 'input')
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i]
    const at = `input[${i}]`
    if (!isObject(item)) return bad('an input item must be an object', at)
    const type = item.type ?? (typeof item.role === 'string' ? 'message' : undefined)
    if (type === 'message') {
      const error = decodeMessage(item, at, request)
      if (error !== null) return error
    } else if (type === 'function_call') {
      if (typeof item.call_id !== 'string' || item.call_id === '') return bad('`call_id` must be a non-empty string', `${at}.call_id`)
      if (typeof item.name !== 'string' || item.name === '') return bad('`name` must be a non-empty string', `${at}.name`)
      if (typeof item.arguments !== 'string') return bad('`arguments` must be a JSON string', `${at}.arguments`)
      const args = parseArguments(item.arguments)
      if (args === null) return bad('`arguments` must be a JSON object', `${at}.arguments`)
      append(request.messages, 'assistant', { type: 'tool_call', id: item.call_id, name: item.name, input: args })
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || item.call_id === '') return bad('`call_id` must be a non-empty string', `${at}.call_id`)
      const content = decodeToolOutput(item.output, `${at}.output`)
      if (isTranslationError(content)) return content
      append(request.messages, 'user', { type: 'tool_result', callId: item.call_id, content })
    } else if (type === 'reasoning') {
      const part = decodeReasoningItem(item, at)
      if (isTranslationError(part)) return part
      append(request.messages, 'assistant', part)
    } else if (type === 'item_reference') {
      return bad('`item_reference` names an item stored by OpenAI; another provider cannot resolve it — send the item itself', `${at}.type`)
    } else {
      return bad(`input item type ${JSON.stringify(type)} cannot be translated to another provider (only message, function_call, function_call_output and reasoning items can)`, `${at}.type`)
    }
  }
  if (request.messages.length === 0) return bad('`input` has no user or assistant turn', 'input')
  return null
}

function decodeMessage (item: Json, at: string, request: ChatRequest): TranslationError | null {
  const role = item.role
  if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer') {
    return bad('`role` must be user, assistant, system or developer', `${at}.role`)
  }
  const content = item.content
  if (typeof content === 'string') {
    if (role === 'system' || role === 'developer') request.system.push(content)
    else append(request.messages, role, { type: 'text', text: content })
    return null
  }
  if (!Array.isArray(content)) return bad('`content` must be a string or a list of parts', `${at}.content`)
  const texts: string[] = []
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j]
    const pat = `${at}.content[${j}]`
    if (!isObject(part)) return bad('a content part must be an object', pat)
    // As OpenAI validates: assistant turns carry output_text / refusal, the others input_text.
    if (part.type === (role === 'assistant' ? 'output_text' : 'input_text')) {
      if (typeof part.text !== 'string') return bad('`text` must be a string', `${pat}.text`)
      if (role === 'system' || role === 'developer') texts.push(part.text)
      else append(request.messages, role, { type: 'text', text: part.text })
    } else if (part.type === 'input_image' && role === 'user') {
      const image = decodeImage(part, pat)
      if (isTranslationError(image)) return image
      append(request.messages, 'user', image)
    } else if (part.type === 'refusal' && role === 'assistant') {
      // An earlier answer's refusal, sent back as history: its text is what the model said.
      if (typeof part.refusal !== 'string') return bad('`refusal` must be a string', `${pat}.refusal`)
      append(request.messages, 'assistant', { type: 'text', text: part.refusal })
    } else if (part.type === 'input_file') {
      return bad('`input_file` parts cannot be translated to another provider', `${pat}.type`)
    } else if (role === 'assistant') {
      return bad(`invalid value ${JSON.stringify(part.type)}: an assistant message takes output_text and refusal parts`, `${pat}.type`)
    } else {
      return bad(`content part type ${JSON.stringify(part.type)} is not allowed in a ${role} message`, `${pat}.type`)
    }
  }
  if (texts.length > 0) request.system.push(texts.join('\n'))
  return null
}

/** `input_image`: a data URL (inline) or an http(s) URL; `file_id` names a file stored by OpenAI. */
function decodeImage (part: Json, at: string): ContentPart | TranslationError {
  if (part.file_id !== undefined && part.file_id !== null) {
    return bad('`file_id` names a file stored by OpenAI; send the image as `image_url` (a URL or a data URL)', `${at}.file_id`)
  }
  if (typeof part.image_url !== 'string' || part.image_url === '') return bad('`image_url` must be a URL or a data URL', `${at}.image_url`)
  const detail = part.detail
  if (detail !== undefined && detail !== null && detail !== 'auto' && detail !== 'low' && detail !== 'high') {
    return bad('`detail` must be auto, low or high', `${at}.detail`)
  }
  const source = decodeImageUrl(part.image_url)
  if (source === null) return bad('`image_url` must be an http(s) URL or a base64 data URL', `${at}.image_url`)
  const image: ContentPart = { type: 'image', source }
  if (detail === 'low' || detail === 'high' || detail === 'auto') image.detail = detail
  return image
}

function decodeImageUrl (url: string): { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string } | null {
  if (url.startsWith('data:')) {
    const match = /^data:([\w.+-]+\/[\w.+-]+);base64,/.exec(url)
    if (match === null) return null
    return { kind: 'base64', mediaType: match[1]!, data: url.slice(match[0].length) }
  }
  if (url.startsWith('https://') || url.startsWith('http://')) return { kind: 'url', url }
  return null
}

function decodeToolOutput (output: unknown, at: string): Array<{ type: 'text', text: string } | { type: 'image', source: { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string } }> | TranslationError {
  if (typeof output === 'string') return [{ type: 'text', text: output }]
  if (!Array.isArray(output)) return bad('`output` must be a string or a list of parts', at)
  const content: Array<{ type: 'text', text: string } | { type: 'image', source: { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string } }> = []
  for (let j = 0; j < output.length; j++) {
    const part: unknown = output[j]
    const pat = `${at}[${j}]`
    if (!isObject(part)) return bad('an output part must be an object', pat)
    if (part.type === 'input_text') {
      if (typeof part.text !== 'string') return bad('`text` must be a string', `${pat}.text`)
      content.push({ type: 'text', text: part.text })
    } else if (part.type === 'input_image') {
      const image = decodeImage(part, pat)
      if (isTranslationError(image)) return image
      if (image.type === 'image') content.push({ type: 'image', source: image.source })
    } else {
      return bad(`output part type ${JSON.stringify(part.type)} cannot be translated to another provider`, `${pat}.type`)
    }
  }
  return content
}

function decodeReasoningItem (item: Json, at: string): ContentPart | TranslationError {
  const texts: string[] = []
  for (const [key, partType] of [['summary', 'summary_text'], ['content', 'reasoning_text']] as const) {
    const list = item[key]
    if (list === undefined || list === null) continue
    if (!Array.isArray(list)) return bad(`\`${key}\` must be a list`, `${at}.${key}`)
    for (let j = 0; j < list.length; j++) {
      const part: unknown = list[j]
      if (!isObject(part) || part.type !== partType || typeof part.text !== 'string') {
        return bad(`a reasoning ${key} part must be {type: "${partType}", text}`, `${at}.${key}[${j}]`)
      }
      texts.push(part.text)
    }
  }
  const part: ContentPart = { type: 'reasoning', text: texts.join('\n\n') }
  if (typeof item.encrypted_content === 'string') part.signature = item.encrypted_content
  return part
}

/** Function arguments are a JSON string holding an object; anything else is null. */
function parseArguments (text: string): Record<string, unknown> | null {
  if (text.trim() === '') return {}
  try {
    const value: unknown = JSON.parse(text)
    return isObject(value) ? value : null
  } catch {
    return null
  }
}

function decodeTools (tools: unknown): ToolDefinition[] | TranslationError {
  if (!Array.isArray(tools)) return bad('`tools` must be a list', 'tools')
  const out: ToolDefinition[] = []
  for (let i = 0; i < tools.length; i++) {
    const tool: unknown = tools[i]
    const at = `tools[${i}]`
    if (!isObject(tool)) return bad('a tool must be an object', at)
    if (tool.type !== 'function') {
      return bad(`tool type ${JSON.stringify(tool.type)} ${HOSTED_TOOL_MESSAGE}`, `${at}.type`)
    }
    for (const key of Object.keys(tool)) {
      if (key !== 'type' && key !== 'name' && key !== 'description' && key !== 'parameters' && key !== 'strict') {
        return bad(`unsupported field \`${key}\` in a function tool`, `${at}.${key}`)
      }
    }
    if (typeof tool.name !== 'string' || tool.name === '') return bad('`name` must be a non-empty string', `${at}.name`)
    if (tool.parameters !== undefined && tool.parameters !== null && !isObject(tool.parameters)) {
      return bad('`parameters` must be a JSON Schema object', `${at}.parameters`)
    }
    const definition: ToolDefinition = {
      name: tool.name,
      parameters: isObject(tool.parameters) ? tool.parameters : { type: 'object', properties: {} }
    }
    if (typeof tool.description === 'string') definition.description = tool.description
    out.push(definition)
  }
  return out
}

function decodeToolChoice (choice: unknown): ToolChoice | TranslationError {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return { type: choice }
  if (isObject(choice) && choice.type === 'function') {
    if (typeof choice.name !== 'string' || choice.name === '') return bad('`tool_choice.name` must be a non-empty string', 'tool_choice.name')
    return { type: 'tool', name: choice.name }
  }
  const type = isObject(choice) ? choice.type : choice
  return bad(`\`tool_choice\` ${JSON.stringify(type)} cannot be translated to another provider (auto, none, required or a function can)`, 'tool_choice')
}

function decodeTextFormat (format: unknown): ResponseFormat | TranslationError {
  if (!isObject(format)) return bad('`text.format` must be an object', 'text.format')
  if (format.type === 'text' || format.type === 'json_object') return { type: format.type }
  if (format.type === 'json_schema') {
    if (typeof format.name !== 'string' || format.name === '') return bad('`text.format.name` must be a non-empty string', 'text.format.name')
    if (!isObject(format.schema)) return bad('`text.format.schema` must be a JSON Schema object', 'text.format.schema')
    const out: ResponseFormat = { type: 'json_schema', name: format.name, schema: format.schema }
    if (typeof format.strict === 'boolean') out.strict = format.strict
    if (typeof format.description === 'string') out.description = format.description
    return out
  }
  return bad(`\`text.format.type\` ${JSON.stringify(format.type)} is not one of text, json_object, json_schema`, 'text.format.type')
}

// ---------------------------------------------------------------------------------------------
// Requests: neutral → provider

function imageUrl (source: { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string }): string {
  return source.kind === 'url' ? source.url : `data:${source.mediaType};base64,${source.data}`
}

function encodeRequest (request: ChatRequest, model: string): Json | TranslationError {
  if (request.topK !== undefined) return bad('the OpenAI Responses API has no top_k', 'top_k')
  if (request.stop !== undefined && request.stop.length > 0) return bad('the OpenAI Responses API has no stop sequences', 'stop')
  if (request.reasoning?.budgetTokens !== undefined && request.reasoning.effort === undefined) {
    return bad('the OpenAI Responses API takes a reasoning effort (minimal, low, medium, high), not a token budget', 'reasoning.budget_tokens')
  }
  const input: Json[] = []
  for (const message of request.messages) {
    if (message.role === 'user') {
      let pending: Json[] = []
      const flush = (): void => {
        if (pending.length > 0) input.push({ role: 'user', content: pending })
        pending = []
      }
      for (const part of message.content) {
        if (part.type === 'text') pending.push({ type: 'input_text', text: part.text })
        else if (part.type === 'image') pending.push({ type: 'input_image', image_url: imageUrl(part.source), detail: part.detail ?? 'auto' })
        else if (part.type === 'tool_result') {
          flush()
          const onlyText = part.content.every((c) => c.type === 'text')
          const output = onlyText
            ? part.content.map((c) => c.type === 'text' ? c.text : '').join('')
            : part.content.map((c) => c.type === 'text' ? { type: 'input_text', text: c.text } : { type: 'input_image', image_url: imageUrl(c.source), detail: 'auto' })
          input.push({ type: 'function_call_output', call_id: part.callId, output })
        } else {
          return bad(`a user turn cannot carry a ${part.type} part`, 'messages')
        }
      }
      flush()
    } else {
      let pending: Json[] = []
      const flush = (): void => {
        if (pending.length > 0) input.push({ type: 'message', role: 'assistant', content: pending })
        pending = []
      }
      for (const part of message.content) {
        if (part.type === 'text') pending.push({ type: 'output_text', text: part.text })
        else if (part.type === 'tool_call') {
          flush()
          input.push({ type: 'function_call', call_id: part.id, name: part.name, arguments: JSON.stringify(part.input) })
        } else if (part.type === 'reasoning') {
          // Not sendable: see the module comment (OpenAI takes back only its own reasoning items, by id).
        } else {
          return bad(`an assistant turn cannot carry a ${part.type} part in the OpenAI Responses API`, 'messages')
        }
      }
      flush()
    }
  }
  const body: Json = { model, input }
  if (request.system.length > 0) body.instructions = request.system.join('\n\n')
  if (request.tools !== undefined && request.tools.length > 0) {
    // strict: false — the Responses API defaults to strict, which rejects schemas other
    // providers accept (optional properties, no additionalProperties: false).
    body.tools = request.tools.map((tool) => {
      const out: Json = { type: 'function', name: tool.name }
      if (tool.description !== undefined) out.description = tool.description
      out.parameters = tool.parameters
      out.strict = false
      return out
    })
  }
  if (request.toolChoice !== undefined) {
    body.tool_choice = request.toolChoice.type === 'tool' ? { type: 'function', name: request.toolChoice.name } : request.toolChoice.type
  }
  if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls
  if (request.maxTokens !== undefined) body.max_output_tokens = request.maxTokens
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.responseFormat !== undefined) {
    const format = request.responseFormat
    const out: Json = { type: format.type }
    if (format.type === 'json_schema') {
      out.name = format.name
      if (format.description !== undefined) out.description = format.description
      out.schema = format.schema
      if (format.strict !== undefined) out.strict = format.strict
    }
    body.text = { format: out }
  }
  if (request.reasoning?.effort !== undefined) body.reasoning = { effort: request.reasoning.effort }
  // Nothing refers back to a translated response: do not leave it stored on OpenAI.
  body.store = false
  if (request.stream) body.stream = true
  return body
}

// ---------------------------------------------------------------------------------------------
// Whole answers

function decodeUsage (usage: unknown): Usage | null {
  if (!isObject(usage)) return null
  const input = usage.input_tokens
  const output = usage.output_tokens
  if (typeof input !== 'number' || typeof output !== 'number') return null
  const out: Usage = { inputTokens: input, outputTokens: output }
  const cached = isObject(usage.input_tokens_details) ? usage.input_tokens_details.cached_tokens : undefined
  if (typeof cached === 'number' && cached > 0) out.cachedInputTokens = cached
  const reasoning = isObject(usage.output_tokens_details) ? usage.output_tokens_details.reasoning_tokens : undefined
  if (typeof reasoning === 'number' && reasoning > 0) out.reasoningTokens = reasoning
  return out
}

function encodeUsage (usage: Usage): Json {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens
  }
}

/** `incomplete_details.reason` → stop reason. */
function incompleteReason (details: unknown): StopReason {
  const reason = isObject(details) ? details.reason : undefined
  return reason === 'content_filter' ? 'content_filter' : 'max_tokens'
}

/** An error a provider reported inside a response (`response.error`, a stream's `error` event). */
function responseError (error: unknown, fallback: string): TranslationError {
  const code = isObject(error) && typeof error.code === 'string' ? error.code : ''
  const message = isObject(error) && typeof error.message === 'string' ? error.message : fallback
  if (code === 'rate_limit_exceeded') return translationError(429, 'rate_limit', message)
  if (code === 'invalid_prompt' || code.startsWith('invalid_') || code.startsWith('image_') || code === 'empty_image_file' || code === 'unsupported_image_media_type') {
    return translationError(400, 'invalid_request', message)
  }
  return translationError(502, 'api_error', message)
}

function decodeResponse (body: Json): ChatResponse | TranslationError {
  if (body.object !== 'response' || typeof body.id !== 'string' || !Array.isArray(body.output)) {
    if (isObject(body.error)) return decodeError(502, body)
    return translationError(502, 'api_error', 'the provider answered something that is not a Responses API response')
  }
  if (body.status === 'failed') return responseError(body.error, 'the provider reported the response failed')
  if (body.status !== 'completed' && body.status !== 'incomplete') {
    return translationError(502, 'api_error', `the provider answered a response with status ${JSON.stringify(body.status)}`)
  }
  const content: ContentPart[] = []
  let refused = false
  for (const item of body.output as unknown[]) {
    if (!isObject(item)) return translationError(502, 'api_error', 'the provider answered an output item that is not an object')
    if (item.type === 'message') {
      for (const part of Array.isArray(item.content) ? item.content as unknown[] : []) {
        if (isObject(part) && part.type === 'output_text' && typeof part.text === 'string') content.push({ type: 'text', text: part.text })
        else if (isObject(part) && part.type === 'refusal' && typeof part.refusal === 'string') {
          refused = true
          content.push({ type: 'text', text: part.refusal })
        } else return translationError(502, 'api_error', 'the provider answered an unknown message content part')
      }
    } else if (item.type === 'function_call') {
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string') {
        return translationError(502, 'api_error', 'the provider answered a malformed function_call')
      }
      const args = parseArguments(item.arguments)
      if (args === null) return translationError(502, 'api_error', `the provider answered function_call ${item.name} with arguments that are not a JSON object`)
      content.push({ type: 'tool_call', id: item.call_id, name: item.name, input: args })
    } else if (item.type === 'reasoning') {
      const part = decodeReasoningItem(item, 'output')
      if (isTranslationError(part)) return translationError(502, 'api_error', 'the provider answered a malformed reasoning item')
      content.push(part)
    } else {
      return translationError(502, 'api_error', `the provider answered an output item of type ${JSON.stringify(item.type)}, which has no neutral form`)
    }
  }
  let stopReason: StopReason
  if (body.status === 'incomplete') stopReason = incompleteReason(body.incomplete_details)
  else if (content.some((p) => p.type === 'tool_call')) stopReason = 'tool_use'
  else stopReason = refused ? 'refusal' : 'end_turn'
  const response: ChatResponse = {
    id: body.id,
    model: typeof body.model === 'string' ? body.model : '',
    content,
    stopReason,
    usage: decodeUsage(body.usage)
  }
  if (typeof body.created_at === 'number') response.created = body.created_at
  return response
}

/** Ids of a response and its items: `resp_…`, `msg_…`, `fc_…`, `rs_…`, derived from the neutral id so they are stable. */
class ItemIds {
  readonly response: string
  private readonly base: string
  private next = 0
  constructor (id: string, fallback: string) {
    const clean = id.replace(/[^\w-]/g, '').slice(0, 128)
    this.base = clean.startsWith('resp_') ? clean.slice(5) : clean
    if (this.base === '') this.base = fallback
    this.response = `resp_${this.base}`
  }

  item (prefix: 'msg' | 'fc' | 'rs'): string {
    return `${prefix}_${this.base}_${this.next++}`
  }
}

/** The response object's fields every state shares. Request settings are not known here: the API defaults are echoed. */
function responseShell (ids: ItemIds, model: string, createdAt: number): Json {
  return {
    id: ids.response,
    object: 'response',
    created_at: createdAt,
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model,
    output: [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: null,
    store: false,
    temperature: null,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: null,
    truncation: 'disabled',
    usage: null,
    metadata: {}
  }
}

/** Fills a shell's status, incomplete_details and error for a stop reason. */
function finishShell (shell: Json, stopReason: StopReason, usage: Usage | null, error?: TranslationError): void {
  if (stopReason === 'error') {
    shell.status = 'failed'
    shell.error = { code: errorCode(error), message: error?.message ?? 'the provider failed' }
  } else if (stopReason === 'max_tokens' || stopReason === 'content_filter') {
    shell.status = 'incomplete'
    shell.incomplete_details = { reason: stopReason === 'max_tokens' ? 'max_output_tokens' : 'content_filter' }
  } else {
    shell.status = 'completed'
  }
  shell.usage = usage === null ? null : encodeUsage(usage)
}

/** ResponseError.code for a neutral error (the SDK's enum has only these that fit). */
function errorCode (error: TranslationError | undefined): string {
  if (error?.kind === 'rate_limit') return 'rate_limit_exceeded'
  if (error?.kind === 'invalid_request') return 'invalid_prompt'
  return 'server_error'
}

function encodeResponse (response: ChatResponse, options: EncodeOptions): Json {
  const ids = new ItemIds(response.id, `portico${options.now}`)
  const shell = responseShell(ids, response.model !== '' ? response.model : options.requestModel, response.created ?? options.now)
  finishShell(shell, response.stopReason, response.usage)
  const itemStatus = shell.status === 'incomplete' ? 'incomplete' : 'completed'
  const output: Json[] = []
  let message: Json | null = null
  for (const part of response.content) {
    if (part.type === 'text') {
      if (message === null) {
        message = { id: ids.item('msg'), type: 'message', status: itemStatus, role: 'assistant', content: [] }
        output.push(message)
      }
      (message.content as Json[]).push({ type: 'output_text', text: part.text, annotations: [], logprobs: [] })
      continue
    }
    message = null
    if (part.type === 'tool_call') {
      output.push({ id: ids.item('fc'), type: 'function_call', status: 'completed', arguments: JSON.stringify(part.input), call_id: part.id, name: part.name })
    } else if (part.type === 'reasoning') {
      output.push(reasoningItem(ids.item('rs'), part.text, part.signature))
    }
    // images and tool results are never part of an answer
  }
  shell.output = output
  return shell
}

function reasoningItem (id: string, text: string, signature: string | undefined): Json {
  const item: Json = { id, type: 'reasoning', summary: text === '' ? [] : [{ type: 'summary_text', text }] }
  if (signature !== undefined) item.encrypted_content = signature
  return item
}

// ---------------------------------------------------------------------------------------------
// Streams: provider SSE → neutral events

/** A provider stream that broke the Responses API's event grammar. */
function invalidStream (message: string): TranslationError {
  return translationError(502, 'api_error', message)
}

class ResponsesStreamDecoder extends SseStreamDecoder {
  private nextIndex = 0
  /** `output_index` (and `:content_index` for message parts) → neutral block index. */
  private readonly blocks = new Map<string, number>()
  /** Neutral text blocks that got at least one delta (servers that send only `output_text.done` still deliver their text). */
  private readonly textStreamed = new Set<number>()
  /** Neutral block indices of function calls, with whether any argument bytes were streamed. */
  private readonly calls = new Map<number, { index: number, streamed: boolean }>()
  private readonly reasoning = new Map<number, number>()
  private sawToolCall = false
  private refused = false
  private started = false

  protected invalidStream (message: string): TranslationError {
    return invalidStream(message)
  }

  protected ended (out: StreamEvent[]): void {
    this.fail(out, invalidStream('the provider stream ended before response.completed'))
  }

  protected event ({ data }: SseEvent, out: StreamEvent[]): void {
    let event: unknown
    try {
      event = JSON.parse(data)
    } catch {
      this.fail(out, invalidStream('the provider sent a stream event that is not JSON'))
      return
    }
    if (!isObject(event) || typeof event.type !== 'string') {
      this.fail(out, invalidStream('the provider sent a stream event without a type'))
      return
    }
    const type = event.type
    if (type === 'error') {
      this.fail(out, responseError(event, 'the provider reported an error'))
      return
    }
    if (type === 'response.created' || type === 'response.in_progress' || type === 'response.queued') {
      if (!this.started && isObject(event.response)) {
        this.started = true
        const r = event.response
        const start: StreamEvent = { type: 'start', id: typeof r.id === 'string' ? r.id : '', model: typeof r.model === 'string' ? r.model : '' }
        if (typeof r.created_at === 'number') start.created = r.created_at
        out.push(start)
      }
      return
    }
    if (!this.started) {
      this.fail(out, invalidStream(`the provider stream began with ${type}, not response.created`))
      return
    }
    const outputIndex = typeof event.output_index === 'number' ? event.output_index : -1
    switch (type) {
      case 'response.output_item.added': {
        const item = event.item
        if (!isObject(item)) return this.fail(out, invalidStream('response.output_item.added without an item'))
        if (item.type === 'function_call') {
          if (typeof item.call_id !== 'string' || typeof item.name !== 'string') return this.fail(out, invalidStream('a function_call item without call_id or name'))
          const index = this.nextIndex++
          this.calls.set(outputIndex, { index, streamed: false })
          this.sawToolCall = true
          out.push({ type: 'block_start', index, block: { type: 'tool_call', id: item.call_id, name: item.name } })
          if (typeof item.arguments === 'string' && item.arguments !== '') {
            this.calls.get(outputIndex)!.streamed = true
            out.push({ type: 'tool_args_delta', index, json: item.arguments })
          }
        } else if (item.type === 'reasoning') {
          const index = this.nextIndex++
          this.reasoning.set(outputIndex, index)
          out.push({ type: 'block_start', index, block: { type: 'reasoning' } })
        } else if (item.type !== 'message') {
          this.fail(out, invalidStream(`the provider streamed an output item of type ${JSON.stringify(item.type)}, which has no neutral form`))
        }
        return
      }
      case 'response.content_part.added': {
        const key = `${outputIndex}:${String(event.content_index)}`
        if (this.blocks.has(key)) return
        const index = this.nextIndex++
        this.blocks.set(key, index)
        out.push({ type: 'block_start', index, block: { type: 'text' } })
        return
      }
      case 'response.output_text.delta':
      case 'response.refusal.delta': {
        const index = this.blocks.get(`${outputIndex}:${String(event.content_index)}`)
        if (index === undefined || typeof event.delta !== 'string') return this.fail(out, invalidStream(`${type} for a part that was not added`))
        if (type === 'response.refusal.delta') this.refused = true
        if (event.delta !== '') {
          this.textStreamed.add(index)
          out.push({ type: 'text_delta', index, text: event.delta })
        }
        return
      }
      case 'response.output_text.done':
      case 'response.refusal.done': {
        const index = this.blocks.get(`${outputIndex}:${String(event.content_index)}`)
        const text = type === 'response.output_text.done' ? event.text : event.refusal
        if (index === undefined || this.textStreamed.has(index) || typeof text !== 'string' || text === '') return
        if (type === 'response.refusal.done') this.refused = true
        this.textStreamed.add(index)
        out.push({ type: 'text_delta', index, text })
        return
      }
      case 'response.content_part.done': {
        const key = `${outputIndex}:${String(event.content_index)}`
        const index = this.blocks.get(key)
        if (index === undefined) return
        this.blocks.delete(key)
        out.push({ type: 'block_stop', index })
        return
      }
      case 'response.function_call_arguments.delta': {
        const call = this.calls.get(outputIndex)
        if (call === undefined || typeof event.delta !== 'string') return this.fail(out, invalidStream(`${type} for a call that was not added`))
        if (event.delta === '') return
        call.streamed = true
        out.push({ type: 'tool_args_delta', index: call.index, json: event.delta })
        return
      }
      case 'response.function_call_arguments.done': {
        const call = this.calls.get(outputIndex)
        if (call === undefined) return this.fail(out, invalidStream(`${type} for a call that was not added`))
        // Servers that send only the final arguments: they become the one delta.
        if (!call.streamed && typeof event.arguments === 'string' && event.arguments !== '') {
          call.streamed = true
          out.push({ type: 'tool_args_delta', index: call.index, json: event.arguments })
        }
        return
      }
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta': {
        const index = this.reasoning.get(outputIndex)
        if (index === undefined || typeof event.delta !== 'string') return this.fail(out, invalidStream(`${type} for an item that was not added`))
        if (event.delta !== '') out.push({ type: 'reasoning_delta', index, text: event.delta })
        return
      }
      case 'response.output_item.done': {
        const item = isObject(event.item) ? event.item : {}
        const call = this.calls.get(outputIndex)
        if (call !== undefined) {
          if (!call.streamed && typeof item.arguments === 'string' && item.arguments !== '') out.push({ type: 'tool_args_delta', index: call.index, json: item.arguments })
          this.calls.delete(outputIndex)
          out.push({ type: 'block_stop', index: call.index })
          return
        }
        const reasoning = this.reasoning.get(outputIndex)
        if (reasoning !== undefined) {
          if (typeof item.encrypted_content === 'string') out.push({ type: 'reasoning_delta', index: reasoning, text: '', signature: item.encrypted_content })
          this.reasoning.delete(outputIndex)
          out.push({ type: 'block_stop', index: reasoning })
          return
        }
        // A message: close parts whose content_part.done never came.
        for (const [key, index] of this.blocks) {
          if (key.startsWith(`${outputIndex}:`)) {
            this.blocks.delete(key)
            out.push({ type: 'block_stop', index })
          }
        }
        return
      }
      case 'response.completed':
      case 'response.incomplete': {
        const r = isObject(event.response) ? event.response : {}
        this.closeAll(out)
        let stopReason: StopReason
        if (type === 'response.incomplete') stopReason = incompleteReason(r.incomplete_details)
        else if (this.sawToolCall) stopReason = 'tool_use'
        else stopReason = this.refused ? 'refusal' : 'end_turn'
        out.push({ type: 'finish', stopReason, usage: decodeUsage(r.usage) })
        this.done = true
        return
      }
      case 'response.failed': {
        const r = isObject(event.response) ? event.response : {}
        this.fail(out, responseError(r.error, 'the provider reported the response failed'))
        return
      }
      default:
        // content_part/summary_part bookkeeping, annotations: the neutral stream already has their content.
    }
  }

  /** Blocks left open when the response ends (a server that skips the .done events). */
  private closeAll (out: StreamEvent[]): void {
    const open = [...this.blocks.values(), ...[...this.calls.values()].map((c) => c.index), ...this.reasoning.values()].sort((a, b) => a - b)
    for (const index of open) out.push({ type: 'block_stop', index })
    this.blocks.clear()
    this.calls.clear()
    this.reasoning.clear()
  }
}

// ---------------------------------------------------------------------------------------------
// Streams: neutral events → client SSE

/** Text and arguments kept for the `.done` events and the final response; a stream past this is cut with an error. */
export const RESPONSES_STREAM_MAX_ACCUMULATED = 32 * 1024 * 1024

interface OpenItem {
  outputIndex: number
  item: Json
  /** Neutral block index → content_index, for a message. */
  parts: Map<number, number>
}

class ResponsesStreamEncoder implements StreamEncoder {
  private readonly options: EncodeOptions
  private sequence = 0
  private ids: ItemIds | null = null
  private shell: Json | null = null
  private readonly output: Json[] = []
  /** The message item text blocks go into, while text blocks follow each other. */
  private message: OpenItem | null = null
  /** Neutral block index → its open item (function call, reasoning) or message part. */
  private readonly blocks = new Map<number, { kind: 'text', message: OpenItem, contentIndex: number, text: string[] } | { kind: 'tool_call' | 'reasoning', open: OpenItem, chunks: string[], signature?: string }>()
  private accumulated = 0
  private finished = false

  constructor (options: EncodeOptions) {
    this.options = options
  }

  private emit (type: string, fields: Json): string {
    return sseEvent(JSON.stringify({ type, sequence_number: this.sequence++, ...fields }), type)
  }

  private begin (id: string, model: string, created: number | undefined): string {
    this.ids = new ItemIds(id, `portico${this.options.now}`)
    this.shell = responseShell(this.ids, model !== '' ? model : this.options.requestModel, created ?? this.options.now)
    return this.emit('response.created', { response: this.shell }) + this.emit('response.in_progress', { response: this.shell })
  }

  /** Starts the stream if a provider skipped its start event. */
  private ensureStarted (): string {
    return this.shell === null ? this.begin('', '', undefined) : ''
  }

  private addItem (item: Json): { text: string, open: OpenItem } {
    const open: OpenItem = { outputIndex: this.output.length, item, parts: new Map() }
    this.output.push(item)
    return { text: this.emit('response.output_item.added', { output_index: open.outputIndex, item }), open }
  }

  private closeMessage (status: 'completed' | 'incomplete'): string {
    const message = this.message
    if (message === null) return ''
    this.message = null
    let text = ''
    for (const [index, block] of this.blocks) {
      if (block.kind === 'text' && block.message === message) text += this.stopBlock(index)
    }
    message.item.status = status
    return text + this.emit('response.output_item.done', { output_index: message.outputIndex, item: message.item })
  }

  private stopBlock (index: number, status: 'completed' | 'incomplete' = 'completed'): string {
    const block = this.blocks.get(index)
    if (block === undefined) return ''
    this.blocks.delete(index)
    if (block.kind === 'text') {
      const full = block.text.join('')
      const part = { type: 'output_text', text: full, annotations: [], logprobs: [] }
      ;(block.message.item.content as Json[])[block.contentIndex] = part
      const common = { item_id: block.message.item.id, output_index: block.message.outputIndex, content_index: block.contentIndex }
      return this.emit('response.output_text.done', { ...common, text: full, logprobs: [] }) +
        this.emit('response.content_part.done', { ...common, part })
    }
    const { open } = block
    const common = { item_id: open.item.id, output_index: open.outputIndex }
    let text = ''
    if (block.kind === 'tool_call') {
      const args = block.chunks.join('')
      open.item.arguments = args
      open.item.status = status
      text += this.emit('response.function_call_arguments.done', { ...common, arguments: args })
    } else {
      const summary = block.chunks.join('')
      if (summary !== '') {
        const part = { type: 'summary_text', text: summary }
        open.item.summary = [part]
        text += this.emit('response.reasoning_summary_text.done', { ...common, summary_index: 0, text: summary }) +
          this.emit('response.reasoning_summary_part.done', { ...common, summary_index: 0, part })
      }
      if (block.signature !== undefined) open.item.encrypted_content = block.signature
    }
    return text + this.emit('response.output_item.done', { output_index: open.outputIndex, item: open.item })
  }

  private grow (size: number): boolean {
    this.accumulated += size
    return this.accumulated <= RESPONSES_STREAM_MAX_ACCUMULATED
  }

  encode (event: StreamEvent): string {
    if (this.finished) return ''
    if (event.type === 'start') return this.shell === null ? this.begin(event.id, event.model, event.created) : ''
    let text = this.ensureStarted()
    const ids = this.ids!
    switch (event.type) {
      case 'block_start': {
        if (this.blocks.has(event.index)) return text
        if (event.block.type === 'text') {
          if (this.message === null) {
            const added = this.addItem({ id: ids.item('msg'), type: 'message', status: 'in_progress', role: 'assistant', content: [] })
            this.message = added.open
            text += added.text
          }
          const message = this.message
          const contentIndex = (message.item.content as Json[]).length
          const part = { type: 'output_text', text: '', annotations: [], logprobs: [] }
          ;(message.item.content as Json[]).push(part)
          this.blocks.set(event.index, { kind: 'text', message, contentIndex, text: [] })
          return text + this.emit('response.content_part.added', { item_id: message.item.id, output_index: message.outputIndex, content_index: contentIndex, part })
        }
        text += this.closeMessage('completed')
        if (event.block.type === 'tool_call') {
          const added = this.addItem({ id: ids.item('fc'), type: 'function_call', status: 'in_progress', arguments: '', call_id: event.block.id, name: event.block.name })
          this.blocks.set(event.index, { kind: 'tool_call', open: added.open, chunks: [] })
          return text + added.text
        }
        const added = this.addItem({ id: ids.item('rs'), type: 'reasoning', summary: [] })
        this.blocks.set(event.index, { kind: 'reasoning', open: added.open, chunks: [] })
        return text + added.text
      }
      case 'text_delta': {
        const block = this.blocks.get(event.index)
        if (block?.kind !== 'text' || event.text === '') return text
        if (!this.grow(event.text.length)) return text + this.overflow()
        block.text.push(event.text)
        return text + this.emit('response.output_text.delta', { item_id: block.message.item.id, output_index: block.message.outputIndex, content_index: block.contentIndex, delta: event.text, logprobs: [] })
      }
      case 'tool_args_delta': {
        const block = this.blocks.get(event.index)
        if (block?.kind !== 'tool_call' || event.json === '') return text
        if (!this.grow(event.json.length)) return text + this.overflow()
        block.chunks.push(event.json)
        return text + this.emit('response.function_call_arguments.delta', { item_id: block.open.item.id, output_index: block.open.outputIndex, delta: event.json })
      }
      case 'reasoning_delta': {
        const block = this.blocks.get(event.index)
        if (block?.kind !== 'reasoning') return text
        if (!this.grow(event.text.length + (event.signature?.length ?? 0))) return text + this.overflow()
        if (event.signature !== undefined) block.signature = (block.signature ?? '') + event.signature
        if (event.text === '') return text
        const common = { item_id: block.open.item.id, output_index: block.open.outputIndex, summary_index: 0 }
        if (block.chunks.length === 0) text += this.emit('response.reasoning_summary_part.added', { ...common, part: { type: 'summary_text', text: '' } })
        block.chunks.push(event.text)
        return text + this.emit('response.reasoning_summary_text.delta', { ...common, delta: event.text })
      }
      case 'block_stop': {
        // A text part ends here; its message item stays open for the text parts that may follow,
        // until a non-text block or the end closes it.
        return text + this.stopBlock(event.index)
      }
      case 'finish': {
        const incomplete = event.stopReason === 'max_tokens' || event.stopReason === 'content_filter'
        const status = incomplete ? 'incomplete' : 'completed'
        for (const index of [...this.blocks.keys()]) {
          const block = this.blocks.get(index)
          if (block !== undefined && block.kind !== 'text') text += this.stopBlock(index, status)
        }
        text += this.closeMessage(status)
        const shell = this.shell!
        finishShell(shell, event.stopReason, event.usage)
        shell.output = this.output
        this.finished = true
        const type = shell.status === 'completed' ? 'response.completed' : shell.status === 'failed' ? 'response.failed' : 'response.incomplete'
        return text + this.emit(type, { response: shell })
      }
      case 'error': {
        this.finished = true
        return text + this.errorEvent(event.error)
      }
    }
    return text
  }

  /** The `error` event: the SDK raises it as an APIError (`code`, `message`, `param`). */
  private errorEvent (error: TranslationError): string {
    return this.emit('error', { code: openAIErrorCode(error) ?? (error.kind === 'invalid_request' ? 'invalid_request_error' : 'server_error'), message: error.message, param: error.field ?? null })
  }

  private overflow (): string {
    this.finished = true
    return this.errorEvent(translationError(502, 'api_error', `the answer is larger than ${RESPONSES_STREAM_MAX_ACCUMULATED} bytes`))
  }

  end (): string {
    return ''
  }
}

export const openaiResponsesFormat: WireFormat = {
  name: 'openai-responses',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  decodeError,
  encodeError,
  newStreamDecoder: () => new ResponsesStreamDecoder(),
  newStreamEncoder: (options) => new ResponsesStreamEncoder(options),
  streamContentType: 'text/event-stream'
}
