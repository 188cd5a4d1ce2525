/**
 * OpenAI chat completions (`POST /v1/chat/completions`), both directions, streaming included
 * (`chat.completion.chunk` events, then `data: [DONE]`). Shapes follow OpenAI's API reference
 * and the `openai` SDK's resources/chat/completions types.
 *
 * Request fields the neutral shape cannot carry are refused (400 naming the field) unless
 * they are in `IGNORED` (harmless to omit: they steer OpenAI's own bookkeeping, not the
 * generation) or are the neutral default (`n: 1`, `logprobs: false`, penalties of 0, ...).
 *
 * Documented mappings (the decisions a reviewer should know):
 * - `system` and `developer` messages, wherever they stand, become the neutral system list
 *   in order (Anthropic and Gemini take system prompts only apart from the turns).
 * - Consecutive `tool` messages become one user turn of tool results (parallel results).
 * - Neutral → OpenAI: the output limit goes as `max_completion_tokens` for OpenAI's
 *   reasoning models (o-series, gpt-5: they refuse `max_tokens`), else as `max_tokens`,
 *   which every OpenAI-compatible server (vLLM, llama.cpp, Ollama) reads.
 * - A reasoning budget in tokens (Anthropic's `thinking.budget_tokens`) becomes
 *   `reasoning_effort`: below 4096 low, below 16384 medium, else high.
 * - A tool result marked as an error (Anthropic `is_error`) goes as the tool message's
 *   content: OpenAI has no error flag, the result text carries it.
 * - Reasoning text of earlier assistant turns is not sent (chat completions has no field for
 *   it); reasoning returned by a provider is given to the client as `reasoning_content` (the
 *   name DeepSeek, vLLM and llama.cpp use).
 */

import type { ChatMessage, ChatRequest, ChatResponse, ContentPart, EncodeOptions, StopReason, StreamEncoder, StreamEvent, ToolChoice, TranslationError, Usage, WireFormat } from '../canonical.ts'
import { translationError } from '../canonical.ts'
import { SseStreamDecoder, sseEvent, type SseEvent } from '../sse.ts'
import { decodeOpenAIError as decodeError, encodeOpenAIError as encodeError } from './openai-errors.ts'

/** Request fields dropped on purpose, with why (see canonical.ts: a documented choice). */
export const IGNORED: Readonly<Record<string, string>> = {
  user: 'an end-user id for OpenAI abuse monitoring; no generation effect',
  safety_identifier: 'an end-user id for OpenAI abuse monitoring; no generation effect',
  metadata: 'tags for OpenAI stored completions',
  store: 'OpenAI stored completions (dashboard)',
  service_tier: 'OpenAI billing tier',
  prompt_cache_key: 'an OpenAI prompt-cache routing hint',
  prompt_cache_retention: 'how long OpenAI keeps its prompt cache',
  prompt_cache_options: 'OpenAI prompt-cache breakpoints and lifetime',
  stream_options: 'the gateway always asks the provider for usage; the client gets a usage chunk at the end'
}

/** Fields accepted when they hold their neutral (default) value, refused otherwise. */
const DEFAULT_ONLY: Readonly<Record<string, unknown>> = {
  n: 1,
  logprobs: false,
  frequency_penalty: 0,
  presence_penalty: 0
}

const KNOWN = new Set(['model', 'messages', 'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'stream', 'reasoning_effort', 'modalities'])

type Json = Record<string, unknown>

function isObject (v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function bad (message: string, field: string): TranslationError {
  return translationError(400, 'invalid_request', message, field)
}

function refused (field: string, why = 'cannot be translated to the provider\'s API'): TranslationError {
  return bad(`${field} ${why}`, field)
}

class Refusal extends Error {
  readonly error: TranslationError
  constructor (error: TranslationError) {
    super(error.message)
    this.error = error
  }
}

function fail (error: TranslationError): never {
  throw new Refusal(error)
}

function guard<T> (fn: () => T): T | TranslationError {
  try {
    return fn()
  } catch (err) {
    if (err instanceof Refusal) return err.error
    throw err
  }
}

// ---------------------------------------------------------------- requests: decode

function decodeRequest (body: Json): ChatRequest | TranslationError {
  return guard(() => {
    for (const key of Object.keys(body)) {
      if (KNOWN.has(key) || key in IGNORED) continue
      if (key in DEFAULT_ONLY) {
        const v = body[key]
        if (v === null || v === undefined || v === DEFAULT_ONLY[key]) continue
        fail(refused(key, `= ${JSON.stringify(v)} cannot be translated to the provider's API`))
      }
      if (key === 'top_logprobs' || key === 'seed' || key === 'logit_bias' || key === 'prediction' || key === 'audio' || key === 'web_search_options' || key === 'functions' || key === 'function_call' || key === 'verbosity' || key === 'moderation') {
        if (body[key] === null || body[key] === undefined) continue
      }
      fail(refused(key))
    }
    const model = body.model
    if (typeof model !== 'string' || model === '') fail(bad('model is required', 'model'))
    if (!Array.isArray(body.messages)) fail(bad('messages must be an array', 'messages'))
    const out: ChatRequest = { model, system: [], messages: [], stream: body.stream === true }
    decodeMessages(body.messages, out)
    if (body.tools !== undefined && body.tools !== null) out.tools = decodeTools(body.tools)
    if (body.tool_choice !== undefined && body.tool_choice !== null) out.toolChoice = decodeToolChoice(body.tool_choice)
    if (typeof body.parallel_tool_calls === 'boolean') out.parallelToolCalls = body.parallel_tool_calls
    if (body.response_format !== undefined && body.response_format !== null) out.responseFormat = decodeResponseFormat(body.response_format)
    const maxTokens = body.max_completion_tokens ?? body.max_tokens
    if (body.max_completion_tokens != null && body.max_tokens != null && body.max_completion_tokens !== body.max_tokens) fail(bad('max_tokens and max_completion_tokens differ: send one', 'max_tokens'))
    if (maxTokens != null) out.maxTokens = positiveInt(maxTokens, body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens')
    if (body.temperature != null) out.temperature = num(body.temperature, 'temperature')
    if (body.top_p != null) out.topP = num(body.top_p, 'top_p')
    if (body.top_k != null) out.topK = positiveInt(body.top_k, 'top_k')
    if (body.stop != null) {
      if (typeof body.stop === 'string') out.stop = [body.stop]
      else if (Array.isArray(body.stop) && body.stop.every(s => typeof s === 'string')) out.stop = body.stop as string[]
      else fail(bad('stop must be a string or an array of strings', 'stop'))
    }
    // `none` asks for no reasoning: the neutral default.
    if (body.reasoning_effort != null && body.reasoning_effort !== 'none') {
      const e = body.reasoning_effort
      if (e !== 'minimal' && e !== 'low' && e !== 'medium' && e !== 'high') fail(refused('reasoning_effort', `= ${JSON.stringify(e)} cannot be translated to the provider's API`))
      out.reasoning = { effort: e }
    }
    if (body.modalities != null && !(Array.isArray(body.modalities) && body.modalities.every(m => m === 'text'))) fail(refused('modalities', '(other than ["text"]) cannot be translated to the provider\'s API'))
    return out
  })
}

function num (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) fail(bad(`${field} must be a number`, field))
  return v
}

function positiveInt (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) fail(bad(`${field} must be a positive integer`, field))
  return v
}

function decodeMessages (messages: unknown[], out: ChatRequest): void {
  let toolTurn: ChatMessage | null = null
  messages.forEach((m, i) => {
    const at = `messages[${i}]`
    if (!isObject(m)) fail(bad(`${at} must be an object`, at))
    for (const key of Object.keys(m)) {
      if (key === 'role' || key === 'content' || key === 'name' || key === 'tool_calls' || key === 'tool_call_id' || key === 'refusal') continue
      if ((key === 'audio' || key === 'function_call') && m[key] == null) continue
      fail(refused(`${at}.${key}`))
    }
    if (m.role !== 'tool') toolTurn = null
    switch (m.role) {
      case 'system':
      case 'developer':
        out.system.push(textOnly(m.content, `${at}.content`))
        return
      case 'user':
        out.messages.push({ role: 'user', content: userContent(m.content, `${at}.content`) })
        return
      case 'assistant': {
        const content: ContentPart[] = []
        if (m.content != null) {
          const text = textOnly(m.content, `${at}.content`, true)
          if (text !== '') content.push({ type: 'text', text })
        }
        if (m.refusal != null) fail(refused(`${at}.refusal`))
        if (m.tool_calls != null) {
          if (!Array.isArray(m.tool_calls)) fail(bad(`${at}.tool_calls must be an array`, `${at}.tool_calls`))
          m.tool_calls.forEach((c, j) => content.push(decodeToolCall(c, `${at}.tool_calls[${j}]`)))
        }
        out.messages.push({ role: 'assistant', content })
        return
      }
      case 'tool': {
        if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') fail(bad(`${at}.tool_call_id is required`, `${at}.tool_call_id`))
        const part: ContentPart = { type: 'tool_result', callId: m.tool_call_id, content: [{ type: 'text', text: textOnly(m.content, `${at}.content`) }] }
        if (toolTurn === null) {
          toolTurn = { role: 'user', content: [] }
          out.messages.push(toolTurn)
        }
        toolTurn.content.push(part)
        return
      }
      default:
        fail(refused(`${at}.role`, `= ${JSON.stringify(m.role)} cannot be translated to the provider's API`))
    }
  })
}

/** String content, or an array of text parts joined (system, developer, tool and assistant messages). */
function textOnly (content: unknown, at: string, allowRefusalParts = false): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) fail(bad(`${at} must be a string or an array of text parts`, at))
  return content.map((p, i) => {
    if (!isObject(p) || p.type !== 'text' || typeof p.text !== 'string') {
      const type = isObject(p) ? p.type : undefined
      fail(allowRefusalParts && type === 'refusal' ? refused(`${at}[${i}]`) : refused(`${at}[${i}].type`, `= ${JSON.stringify(type)} cannot be translated (text parts only here)`))
    }
    return p.text
  }).join('')
}

function userContent (content: unknown, at: string): ContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  if (!Array.isArray(content)) fail(bad(`${at} must be a string or an array of content parts`, at))
  return content.map((p, i): ContentPart => {
    const field = `${at}[${i}]`
    if (!isObject(p)) fail(bad(`${field} must be an object`, field))
    if (p.type === 'text' && typeof p.text === 'string') return { type: 'text', text: p.text }
    if (p.type === 'image_url' && isObject(p.image_url) && typeof p.image_url.url === 'string') {
      const part = imagePart(p.image_url.url, `${field}.image_url.url`)
      const detail = p.image_url.detail
      if (detail === 'auto' || detail === 'low' || detail === 'high') part.detail = detail
      else if (detail != null) fail(bad(`${field}.image_url.detail must be auto, low or high`, `${field}.image_url.detail`))
      return part
    }
    fail(refused(`${field}.type`, `= ${JSON.stringify(p.type)} cannot be translated to the provider's API`))
  })
}

const DATA_URL = /^data:([a-z]+\/[a-z0-9.+-]+);base64,/i

function imagePart (url: string, field: string): Extract<ContentPart, { type: 'image' }> {
  if (url.startsWith('data:')) {
    const m = DATA_URL.exec(url)
    if (m === null) fail(bad('an image data: URL must be data:<media type>;base64,<data>', field))
    return { type: 'image', source: { kind: 'base64', mediaType: m[1]!.toLowerCase(), data: url.slice(m[0].length) } }
  }
  if (!/^https?:\/\//i.test(url)) fail(bad('an image URL must be http(s) or a base64 data: URL', field))
  return { type: 'image', source: { kind: 'url', url } }
}

function decodeToolCall (c: unknown, at: string): ContentPart {
  if (!isObject(c) || c.type !== 'function' || !isObject(c.function)) fail(refused(`${at}.type`, '(other than function) cannot be translated to the provider\'s API'))
  if (typeof c.id !== 'string' || typeof c.function.name !== 'string') fail(bad(`${at} needs an id and function.name`, at))
  return { type: 'tool_call', id: c.id, name: c.function.name, input: parseArguments(c.function.arguments, `${at}.function.arguments`) }
}

function parseArguments (args: unknown, field: string): Record<string, unknown> {
  if (args === undefined || args === '') return {}
  if (typeof args !== 'string') fail(bad(`${field} must be a JSON string`, field))
  let v: unknown
  try {
    v = JSON.parse(args)
  } catch {
    fail(bad(`${field} is not valid JSON`, field))
  }
  if (!isObject(v)) fail(bad(`${field} must be a JSON object`, field))
  return v
}

function decodeTools (tools: unknown): NonNullable<ChatRequest['tools']> {
  if (!Array.isArray(tools)) fail(bad('tools must be an array', 'tools'))
  return tools.map((t, i) => {
    const at = `tools[${i}]`
    if (!isObject(t) || t.type !== 'function' || !isObject(t.function)) fail(refused(`${at}.type`, '(other than function) cannot be translated to the provider\'s API'))
    const f = t.function
    if (typeof f.name !== 'string' || f.name === '') fail(bad(`${at}.function.name is required`, `${at}.function.name`))
    if (f.parameters != null && !isObject(f.parameters)) fail(bad(`${at}.function.parameters must be a JSON Schema object`, `${at}.function.parameters`))
    // `strict` asks OpenAI for schema-exact arguments; other providers validate the schema as they do.
    const out: NonNullable<ChatRequest['tools']>[number] = { name: f.name, parameters: (f.parameters as Json | undefined) ?? { type: 'object', properties: {} } }
    if (typeof f.description === 'string') out.description = f.description
    return out
  })
}

function decodeToolChoice (c: unknown): ToolChoice {
  if (c === 'auto' || c === 'none' || c === 'required') return { type: c }
  if (isObject(c) && c.type === 'function' && isObject(c.function) && typeof c.function.name === 'string') return { type: 'tool', name: c.function.name }
  fail(refused('tool_choice', `= ${JSON.stringify(c)} cannot be translated to the provider's API`))
}

function decodeResponseFormat (f: unknown): NonNullable<ChatRequest['responseFormat']> {
  if (!isObject(f)) fail(bad('response_format must be an object', 'response_format'))
  if (f.type === 'text' || f.type === 'json_object') return { type: f.type }
  if (f.type === 'json_schema' && isObject(f.json_schema) && typeof f.json_schema.name === 'string') {
    const s = f.json_schema
    const out: NonNullable<ChatRequest['responseFormat']> = { type: 'json_schema', name: s.name as string, schema: isObject(s.schema) ? s.schema : {} }
    if (typeof s.strict === 'boolean') out.strict = s.strict
    if (typeof s.description === 'string') out.description = s.description
    return out
  }
  fail(refused('response_format.type', `= ${JSON.stringify(f.type)} cannot be translated to the provider's API`))
}

// ---------------------------------------------------------------- requests: encode

/** OpenAI's reasoning models take only `max_completion_tokens`. */
const REASONING_MODEL = /^(o\d|gpt-5)/

function encodeRequest (request: ChatRequest, model: string): Json | TranslationError {
  return guard(() => {
    const messages: Json[] = request.system.map(text => ({ role: 'system', content: text }))
    request.messages.forEach((m, i) => encodeMessage(m, `messages[${i}]`, messages))
    const out: Json = { model, messages }
    if (request.tools !== undefined) {
      out.tools = request.tools.map(t => ({ type: 'function', function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters } }))
    }
    if (request.toolChoice !== undefined) out.tool_choice = request.toolChoice.type === 'tool' ? { type: 'function', function: { name: request.toolChoice.name } } : request.toolChoice.type
    if (request.parallelToolCalls !== undefined) out.parallel_tool_calls = request.parallelToolCalls
    const rf = request.responseFormat
    if (rf !== undefined) {
      out.response_format = rf.type !== 'json_schema'
        ? { type: rf.type }
        : { type: 'json_schema', json_schema: { name: rf.name, schema: rf.schema, ...(rf.strict !== undefined ? { strict: rf.strict } : {}), ...(rf.description !== undefined ? { description: rf.description } : {}) } }
    }
    if (request.maxTokens !== undefined) out[REASONING_MODEL.test(model) ? 'max_completion_tokens' : 'max_tokens'] = request.maxTokens
    if (request.temperature !== undefined) out.temperature = request.temperature
    if (request.topP !== undefined) out.top_p = request.topP
    if (request.topK !== undefined) fail(refused('top_k', 'cannot be sent to an OpenAI chat completions provider (it has no top_k)'))
    if (request.stop !== undefined) out.stop = request.stop
    if (request.reasoning !== undefined) {
      const { effort, budgetTokens } = request.reasoning
      out.reasoning_effort = effort ?? (budgetTokens === undefined ? 'medium' : budgetTokens < 4096 ? 'low' : budgetTokens < 16384 ? 'medium' : 'high')
    }
    if (request.stream) {
      out.stream = true
      out.stream_options = { include_usage: true }
    }
    return out
  })
}

function encodeMessage (m: ChatMessage, at: string, out: Json[]): void {
  if (m.role === 'assistant') {
    let text = ''
    const calls: Json[] = []
    m.content.forEach((p, j) => {
      if (p.type === 'text') text += p.text
      else if (p.type === 'tool_call') calls.push({ id: p.id, type: 'function', function: { name: p.name, arguments: JSON.stringify(p.input) } })
      else if (p.type === 'reasoning') { /* not sendable back: see the header */ } else fail(refused(`${at}.content[${j}].type`, `= ${p.type} cannot be sent in an assistant message of OpenAI chat completions`))
    })
    const msg: Json = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text }
    if (calls.length > 0) msg.tool_calls = calls
    out.push(msg)
    return
  }
  const parts: Json[] = []
  for (let j = 0; j < m.content.length; j++) {
    const p = m.content[j]!
    if (p.type === 'tool_result') {
      const text = p.content.map((c, k) => {
        if (c.type !== 'text') fail(refused(`${at}.content[${j}].content[${k}]`, '(an image in a tool result) cannot be sent to OpenAI chat completions (tool messages carry text)'))
        return c.text
      }).join('')
      out.push({ role: 'tool', tool_call_id: p.callId, content: text })
    } else if (p.type === 'text') {
      parts.push({ type: 'text', text: p.text })
    } else if (p.type === 'image') {
      const url = p.source.kind === 'url' ? p.source.url : `data:${p.source.mediaType};base64,${p.source.data}`
      parts.push({ type: 'image_url', image_url: p.detail !== undefined ? { url, detail: p.detail } : { url } })
    } else {
      fail(refused(`${at}.content[${j}].type`, `= ${p.type} cannot be sent in a user message of OpenAI chat completions`))
    }
  }
  if (parts.length === 0) return
  out.push({ role: 'user', content: parts.length === 1 && parts[0]!.type === 'text' ? parts[0]!.text : parts })
}

// ---------------------------------------------------------------- answers

const FINISH_IN: Readonly<Record<string, StopReason>> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'content_filter'
}

const FINISH_OUT: Readonly<Record<StopReason, string>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause: 'stop',
  max_tokens: 'length',
  tool_use: 'tool_calls',
  content_filter: 'content_filter',
  refusal: 'content_filter',
  error: 'stop'
}

function upstreamError (message: string): TranslationError {
  return translationError(502, 'api_error', `invalid answer from the provider: ${message}`)
}

function decodeUsage (u: unknown): Usage | null {
  if (!isObject(u)) return null
  const usage: Usage = { inputTokens: count(u.prompt_tokens), outputTokens: count(u.completion_tokens) }
  const cached = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details.cached_tokens : undefined
  const reasoning = isObject(u.completion_tokens_details) ? u.completion_tokens_details.reasoning_tokens : undefined
  if (typeof cached === 'number' && cached > 0) usage.cachedInputTokens = count(cached)
  if (typeof reasoning === 'number' && reasoning > 0) usage.reasoningTokens = count(reasoning)
  return usage
}

function count (v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0
}

function encodeUsage (u: Usage): Json {
  const out: Json = { prompt_tokens: u.inputTokens, completion_tokens: u.outputTokens, total_tokens: u.inputTokens + u.outputTokens }
  if (u.cachedInputTokens !== undefined) out.prompt_tokens_details = { cached_tokens: u.cachedInputTokens }
  if (u.reasoningTokens !== undefined) out.completion_tokens_details = { reasoning_tokens: u.reasoningTokens }
  return out
}

function decodeResponse (body: Json): ChatResponse | TranslationError {
  if (isObject(body.error)) return decodeError(502, body)
  const choice = Array.isArray(body.choices) ? body.choices[0] : undefined
  if (!isObject(choice) || !isObject(choice.message)) return upstreamError('no choices[0].message')
  const msg = choice.message
  const content: ContentPart[] = []
  if (typeof msg.reasoning_content === 'string' && msg.reasoning_content !== '') content.push({ type: 'reasoning', text: msg.reasoning_content })
  if (typeof msg.content === 'string' && msg.content !== '') content.push({ type: 'text', text: msg.content })
  let stopReason = FINISH_IN[String(choice.finish_reason)] ?? 'end_turn'
  if (typeof msg.refusal === 'string' && msg.refusal !== '') {
    content.push({ type: 'text', text: msg.refusal })
    stopReason = 'refusal'
  }
  if (Array.isArray(msg.tool_calls)) {
    for (const c of msg.tool_calls) {
      if (!isObject(c) || !isObject(c.function) || typeof c.function.name !== 'string') return upstreamError('a tool call without function.name')
      let input: unknown
      try {
        input = typeof c.function.arguments === 'string' && c.function.arguments !== '' ? JSON.parse(c.function.arguments) : {}
      } catch {
        return upstreamError(`tool call ${c.function.name}: arguments are not valid JSON`)
      }
      if (!isObject(input)) return upstreamError(`tool call ${c.function.name}: arguments are not a JSON object`)
      content.push({ type: 'tool_call', id: typeof c.id === 'string' ? c.id : '', name: c.function.name, input })
    }
  }
  const out: ChatResponse = { id: typeof body.id === 'string' ? body.id : '', model: typeof body.model === 'string' ? body.model : '', content, stopReason, usage: decodeUsage(body.usage) }
  if (typeof body.created === 'number') out.created = body.created
  return out
}

function encodeResponse (response: ChatResponse, options: EncodeOptions): Json {
  let text: string | null = null
  let reasoning: string | null = null
  const calls: Json[] = []
  for (const p of response.content) {
    if (p.type === 'text') text = (text ?? '') + p.text
    else if (p.type === 'reasoning') reasoning = (reasoning ?? '') + p.text
    else if (p.type === 'tool_call') calls.push({ id: p.id, type: 'function', function: { name: p.name, arguments: JSON.stringify(p.input) } })
  }
  const message: Json = { role: 'assistant', content: text, refusal: null }
  if (response.stopReason === 'refusal') {
    message.refusal = text ?? ''
    message.content = null
  }
  if (reasoning !== null) message.reasoning_content = reasoning
  if (calls.length > 0) message.tool_calls = calls
  const out: Json = {
    id: chatId(response.id),
    object: 'chat.completion',
    created: response.created ?? options.now,
    model: response.model !== '' ? response.model : options.requestModel,
    choices: [{ index: 0, message, logprobs: null, finish_reason: FINISH_OUT[response.stopReason] }]
  }
  if (response.usage !== null) out.usage = encodeUsage(response.usage)
  return out
}

function chatId (id: string): string {
  return id === '' ? 'chatcmpl-portico' : id
}

// ---------------------------------------------------------------- errors

// ---------------------------------------------------------------- streams

/**
 * OpenAI chunks → neutral events. Blocks open one at a time (the neutral model's, which
 * Anthropic's stream needs): a text delta after a tool call closes the tool block, and so on.
 * Parallel tool calls arrive one after another, each at its own `index`.
 */
class ChatStreamDecoder extends SseStreamDecoder {
  private started = false
  private next = 0
  /** The open block: its neutral index and what it is (a tool call's OpenAI index). */
  private open: { index: number, kind: 'text' | 'reasoning' | 'tool', toolIndex?: number } | null = null
  private readonly closedTools = new Set<number>()
  private stop: StopReason | null = null

  protected invalidStream (message: string): TranslationError {
    return upstreamError(message)
  }

  protected ended (out: StreamEvent[]): void {
    if (this.stop !== null) this.finish(out, null)
    else this.fail(out, upstreamError('the stream ended before the answer was complete'))
  }

  protected event ({ data }: SseEvent, out: StreamEvent[]): void {
    if (data === '[DONE]') {
      if (this.stop !== null) this.finish(out, null)
      else this.fail(out, upstreamError('[DONE] before a finish_reason'))
      return
    }
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      this.fail(out, upstreamError('a stream event is not JSON'))
      return
    }
    if (!isObject(chunk)) return this.fail(out, upstreamError('a stream event is not a JSON object'))
    if (isObject(chunk.error)) return this.fail(out, decodeError(502, chunk))
    if (!this.started) {
      this.started = true
      const start: StreamEvent = { type: 'start', id: typeof chunk.id === 'string' ? chunk.id : '', model: typeof chunk.model === 'string' ? chunk.model : '' }
      if (typeof chunk.created === 'number') start.created = chunk.created
      out.push(start)
    }
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
    if (isObject(choice)) {
      const delta = isObject(choice.delta) ? choice.delta : {}
      if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
        out.push({ type: 'reasoning_delta', index: this.block(out, 'reasoning'), text: delta.reasoning_content })
      }
      if (typeof delta.content === 'string' && delta.content !== '') out.push({ type: 'text_delta', index: this.block(out, 'text'), text: delta.content })
      if (typeof delta.refusal === 'string' && delta.refusal !== '') {
        out.push({ type: 'text_delta', index: this.block(out, 'text'), text: delta.refusal })
        this.stop = 'refusal'
      }
      if (Array.isArray(delta.tool_calls)) {
        for (const c of delta.tool_calls) {
          if (!isObject(c)) return this.fail(out, upstreamError('a tool call delta is not an object'))
          const toolIndex = typeof c.index === 'number' ? c.index : 0
          const f = isObject(c.function) ? c.function : {}
          if (this.open?.kind !== 'tool' || this.open.toolIndex !== toolIndex) {
            if (this.closedTools.has(toolIndex)) return this.fail(out, upstreamError(`tool call ${toolIndex} continued after another began`))
            if (typeof f.name !== 'string' || f.name === '') return this.fail(out, upstreamError(`tool call ${toolIndex} began without a name`))
            this.close(out)
            this.open = { index: this.next++, kind: 'tool', toolIndex }
            out.push({ type: 'block_start', index: this.open.index, block: { type: 'tool_call', id: typeof c.id === 'string' ? c.id : '', name: f.name } })
          }
          if (typeof f.arguments === 'string' && f.arguments !== '') out.push({ type: 'tool_args_delta', index: this.open.index, json: f.arguments })
        }
      }
      if (typeof choice.finish_reason === 'string') {
        this.close(out)
        if (this.stop !== 'refusal') this.stop = FINISH_IN[choice.finish_reason] ?? 'end_turn'
      }
    }
    // The usage chunk (stream_options.include_usage) comes after the finish_reason one.
    if (isObject(chunk.usage) && this.stop !== null) this.finish(out, decodeUsage(chunk.usage))
  }

  private block (out: StreamEvent[], kind: 'text' | 'reasoning'): number {
    if (this.open?.kind === kind) return this.open.index
    this.close(out)
    this.open = { index: this.next++, kind }
    out.push({ type: 'block_start', index: this.open.index, block: { type: kind } })
    return this.open.index
  }

  private close (out: StreamEvent[]): void {
    if (this.open === null) return
    if (this.open.toolIndex !== undefined) this.closedTools.add(this.open.toolIndex)
    out.push({ type: 'block_stop', index: this.open.index })
    this.open = null
  }

  private finish (out: StreamEvent[], usage: Usage | null): void {
    this.close(out)
    this.done = true
    out.push({ type: 'finish', stopReason: this.stop ?? 'end_turn', usage })
  }
}

/** Neutral events → OpenAI chunks. Tool calls are numbered 0, 1, ... in the order they start. */
class ChatStreamEncoder implements StreamEncoder {
  private readonly options: EncodeOptions
  private id = 'chatcmpl-portico'
  private model: string
  private created: number
  private tools = 0
  /** Neutral block index → OpenAI tool call index. */
  private readonly toolIndex = new Map<number, number>()
  private startUsage: Usage | undefined

  constructor (options: EncodeOptions) {
    this.options = options
    this.model = options.requestModel
    this.created = options.now
  }

  private chunk (delta: Json, finish: string | null = null): string {
    return sseEvent(JSON.stringify({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }))
  }

  encode (event: StreamEvent): string {
    switch (event.type) {
      case 'start':
        if (event.id !== '') this.id = event.id
        if (event.model !== '') this.model = event.model
        if (event.created !== undefined) this.created = event.created
        this.startUsage = event.usage
        return this.chunk({ role: 'assistant', content: '' })
      case 'block_start':
        if (event.block.type !== 'tool_call') return ''
        this.toolIndex.set(event.index, this.tools)
        return this.chunk({ tool_calls: [{ index: this.tools++, id: event.block.id, type: 'function', function: { name: event.block.name, arguments: '' } }] })
      case 'text_delta':
        return this.chunk({ content: event.text })
      case 'reasoning_delta':
        return event.text === '' ? '' : this.chunk({ reasoning_content: event.text })
      case 'tool_args_delta':
        return this.chunk({ tool_calls: [{ index: this.toolIndex.get(event.index) ?? 0, function: { arguments: event.json } }] })
      case 'block_stop':
        return ''
      case 'finish': {
        let out = this.chunk({}, FINISH_OUT[event.stopReason])
        const usage = event.usage ?? this.startUsage ?? null
        if (usage !== null) out += sseEvent(JSON.stringify({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: encodeUsage(usage) }))
        return out
      }
      case 'error':
        return sseEvent(JSON.stringify(encodeError(event.error)))
    }
  }

  end (): string {
    return 'data: [DONE]\n\n'
  }
}

export const openaiChatFormat: WireFormat = {
  name: 'openai-chat',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  decodeError,
  encodeError,
  newStreamDecoder: () => new ChatStreamDecoder(),
  newStreamEncoder: (options: EncodeOptions) => new ChatStreamEncoder(options),
  streamContentType: 'text/event-stream'
}
