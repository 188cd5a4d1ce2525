/**
 * Google's Gemini API (`generateContent` / `streamGenerateContent?alt=sse`), also spoken by
 * Vertex AI's `publishers/google` models, in both directions (see canonical.ts for the rules).
 * Written to the REST reference (ai.google.dev/api/generate-content) and the official
 * `@google/genai` SDK's types.
 *
 * Mapping choices that are not one-to-one, each as Google documents them:
 * - The model and streaming live in the URL, not the body: `decodeRequest` takes an optional
 *   `model` field (the caller puts the path's model there; a `models/` prefix is dropped) and
 *   reports `stream: false` (the caller sets it from the method it was called on).
 * - Tool results: Gemini names a `functionResponse` by the function's name (and an optional
 *   `id`); the neutral shape by the call's id. The encoder finds the name from the earlier
 *   assistant `tool_call` with that id (a result for no known call is refused) and sends the
 *   id too. The result goes as `response: {output: text}`, or `{error: text}` when it is an
 *   error — the keys the reference asks for. Calls Gemini returns without an `id` get a stable
 *   one: `call_<responseId>_<n>` (a hash of the answer when it has no responseId either).
 * - Thought signatures (Gemini 2.5/3's opaque `thoughtSignature` on a part) become a neutral
 *   `reasoning` part with empty text and the signature, placed just before the part that
 *   carried it; encoding attaches such a signature to the next part again. A model turn whose
 *   first `functionCall` has no signature (history from another provider, or a client format
 *   that cannot carry reasoning) gets `skip_thought_signature_validator`, the dummy value
 *   Google's thought-signature guide gives for exactly that case (Gemini 3 refuses function
 *   calls in history without one).
 * - Tool parameters and response schemas are JSON Schema in the neutral shape, so they are sent
 *   as `parametersJsonSchema` / `responseJsonSchema`. Gemini's older OpenAPI-subset `parameters`
 *   / `responseSchema` are decoded into JSON Schema (types lower-cased, `nullable` into a type
 *   union, `example` into `examples`; `propertyOrdering`, a generation-order hint, is dropped).
 * - Images: base64 → `inlineData`; `data:` URLs → `inlineData`; `http(s)://` and `gs://` URLs →
 *   `fileData {fileUri, mimeType}` (the type guessed from the file extension, omitted when
 *   unknown). Vertex AI fetches `gs://` and public https URLs; the Gemini API takes its own
 *   Files API URIs and (Gemini 2.5+/3) public URLs — others are refused by Google with a 400.
 *   `detail: low|high` → the part's `mediaResolution.level`.
 * - `stop_sequence`: Gemini reports a stop sequence as `STOP` without saying which, so answers
 *   decode as `end_turn`; a `STOP` answer with function calls decodes as `tool_use`.
 * - Usage: `outputTokens` = `candidatesTokenCount` + `thoughtsTokenCount` (Gemini counts thoughts
 *   apart), `inputTokens` = `promptTokenCount` + `toolUsePromptTokenCount`.
 * - `parallelToolCalls: false` cannot be expressed (Gemini has no such switch): refused.
 * - Reasoning: `budgetTokens` → `thinkingConfig.thinkingBudget` (2.5), else `effort` →
 *   `thinkingLevel` (3); with `includeThoughts: true`, since the neutral shape carries thoughts.
 */

import { createHash } from 'node:crypto'
import {
  translationError,
  type ChatMessage, type ChatRequest, type ChatResponse, type ContentPart, type EncodeOptions,
  type StopReason, type StreamEncoder, type StreamEvent, type ToolChoice,
  type ToolDefinition, type TranslationError, type Usage, type WireFormat
} from '../canonical.ts'
import { SseStreamDecoder, sseEvent, SSE_MAX_EVENT_BYTES, type SseEvent } from '../sse.ts'

type Json = Record<string, unknown>

/** Google's documented dummy signature for function calls the model did not produce itself. */
export const GEMINI_DUMMY_THOUGHT_SIGNATURE = 'skip_thought_signature_validator'

/**
 * Request fields Gemini has that the neutral shape does not carry, dropped on purpose: they
 * configure Gemini alone and mean nothing to another provider.
 */
export const IGNORED: Readonly<Record<string, string>> = {
  safetySettings: 'Gemini\'s own content-filter thresholds; no other provider has them',
  labels: 'Vertex AI billing labels'
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)
const bad = (message: string, field?: string): TranslationError => translationError(400, 'invalid_request', message, field)
/** An answer from Google that does not follow its own API (not the client's fault). */
const badAnswer = (message: string): TranslationError => translationError(502, 'api_error', `malformed Gemini answer: ${message}`)
const isError = (v: unknown): v is TranslationError => isObject(v) && 'kind' in v && 'status' in v && 'message' in v

// ---------------------------------------------------------------------------------------------
// Requests: Gemini → neutral

const REQUEST_FIELDS = new Set(['model', 'contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', ...Object.keys(IGNORED)])
const GENERATION_FIELDS = new Set(['maxOutputTokens', 'temperature', 'topP', 'topK', 'stopSequences', 'candidateCount', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'thinkingConfig'])

function decodeRequest (body: Json): ChatRequest | TranslationError {
  for (const key of Object.keys(body)) {
    if (!REQUEST_FIELDS.has(key)) return bad(`Gemini request field "${key}" cannot be translated to another provider`, key)
  }
  let model = ''
  if (body.model !== undefined) {
    if (typeof body.model !== 'string') return bad('model must be a string', 'model')
    model = body.model.startsWith('models/') ? body.model.slice(7) : body.model
  }
  const request: ChatRequest = { model, system: [], messages: [], stream: false }

  if (body.systemInstruction !== undefined) {
    const si = body.systemInstruction
    if (!isObject(si) || !Array.isArray(si.parts)) return bad('systemInstruction must be a Content with parts', 'systemInstruction')
    for (const [i, part] of si.parts.entries()) {
      if (!isObject(part) || typeof part.text !== 'string' || Object.keys(part).some(k => k !== 'text')) return bad('systemInstruction parts must be text', `systemInstruction.parts[${i}]`)
      request.system.push(part.text)
    }
  }

  if (!Array.isArray(body.contents)) return bad('contents must be an array', 'contents')
  // Calls of the conversation so far, for functionResponses that name a function but no id.
  const open: Array<{ id: string, name: string }> = []
  for (const [ci, content] of body.contents.entries()) {
    const at = `contents[${ci}]`
    if (!isObject(content) || !Array.isArray(content.parts)) return bad('each content needs parts', `${at}.parts`)
    const role = content.role ?? 'user'
    // 'function' is the role older Gemini docs gave function responses; it is the user side.
    if (role !== 'user' && role !== 'model' && role !== 'function') return bad(`unknown role ${JSON.stringify(role)}`, `${at}.role`)
    const message: ChatMessage = { role: role === 'model' ? 'assistant' : 'user', content: [] }
    for (const [pi, part] of content.parts.entries()) {
      const decoded = decodeRequestPart(part, `${at}.parts[${pi}]`, message.role, ci, pi, open)
      if (isError(decoded)) return decoded
      message.content.push(...decoded)
    }
    request.messages.push(message)
  }

  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return bad('tools must be an array', 'tools')
    const tools: ToolDefinition[] = []
    for (const [ti, tool] of body.tools.entries()) {
      if (!isObject(tool)) return bad('each tool must be an object', `tools[${ti}]`)
      for (const key of Object.keys(tool)) {
        if (key !== 'functionDeclarations') return bad(`Gemini tool "${key}" has no counterpart in other providers`, `tools[${ti}].${key}`)
      }
      if (!Array.isArray(tool.functionDeclarations)) return bad('functionDeclarations must be an array', `tools[${ti}].functionDeclarations`)
      for (const [fi, fd] of tool.functionDeclarations.entries()) {
        const at = `tools[${ti}].functionDeclarations[${fi}]`
        if (!isObject(fd) || typeof fd.name !== 'string') return bad('a function declaration needs a name', at)
        for (const key of Object.keys(fd)) {
          if (!['name', 'description', 'parameters', 'parametersJsonSchema'].includes(key)) return bad(`function declaration field "${key}" cannot be translated`, `${at}.${key}`)
        }
        let parameters: Json = { type: 'object', properties: {} }
        if (fd.parametersJsonSchema !== undefined) {
          if (!isObject(fd.parametersJsonSchema)) return bad('parametersJsonSchema must be an object', `${at}.parametersJsonSchema`)
          parameters = fd.parametersJsonSchema
        } else if (fd.parameters !== undefined) {
          if (!isObject(fd.parameters)) return bad('parameters must be a Schema object', `${at}.parameters`)
          parameters = openApiToJsonSchema(fd.parameters)
        }
        const def: ToolDefinition = { name: fd.name, parameters }
        if (typeof fd.description === 'string') def.description = fd.description
        tools.push(def)
      }
    }
    request.tools = tools
  }

  if (body.toolConfig !== undefined) {
    const tc = body.toolConfig
    if (!isObject(tc)) return bad('toolConfig must be an object', 'toolConfig')
    for (const key of Object.keys(tc)) {
      if (key !== 'functionCallingConfig') return bad(`toolConfig.${key} cannot be translated`, `toolConfig.${key}`)
    }
    const fcc = tc.functionCallingConfig
    if (fcc !== undefined) {
      if (!isObject(fcc)) return bad('functionCallingConfig must be an object', 'toolConfig.functionCallingConfig')
      const choice = decodeToolChoice(fcc)
      if (isError(choice)) return choice
      if (choice !== undefined) request.toolChoice = choice
    }
  }

  if (body.generationConfig !== undefined) {
    const gc = body.generationConfig
    if (!isObject(gc)) return bad('generationConfig must be an object', 'generationConfig')
    for (const key of Object.keys(gc)) {
      if (!GENERATION_FIELDS.has(key)) return bad(`generationConfig.${key} cannot be translated to another provider`, `generationConfig.${key}`)
    }
    const num = (key: string): number | undefined | TranslationError => {
      const v = gc[key]
      if (v === undefined) return undefined
      return typeof v === 'number' && Number.isFinite(v) ? v : bad(`${key} must be a number`, `generationConfig.${key}`)
    }
    for (const [key, target] of [['maxOutputTokens', 'maxTokens'], ['temperature', 'temperature'], ['topP', 'topP'], ['topK', 'topK']] as const) {
      const v = num(key)
      if (isError(v)) return v
      if (v !== undefined) request[target] = v
    }
    const candidates = num('candidateCount')
    if (isError(candidates)) return candidates
    if (candidates !== undefined && candidates !== 1) return bad('only one candidate can be asked for (candidateCount: 1)', 'generationConfig.candidateCount')
    if (gc.stopSequences !== undefined) {
      if (!Array.isArray(gc.stopSequences) || gc.stopSequences.some(s => typeof s !== 'string')) return bad('stopSequences must be strings', 'generationConfig.stopSequences')
      request.stop = gc.stopSequences as string[]
    }
    const format = decodeResponseFormat(gc)
    if (isError(format)) return format
    if (format !== undefined) request.responseFormat = format
    if (gc.thinkingConfig !== undefined) {
      const tc = gc.thinkingConfig
      if (!isObject(tc)) return bad('thinkingConfig must be an object', 'generationConfig.thinkingConfig')
      const reasoning: NonNullable<ChatRequest['reasoning']> = {}
      for (const key of Object.keys(tc)) {
        if (key === 'thinkingBudget') {
          if (typeof tc.thinkingBudget !== 'number') return bad('thinkingBudget must be a number', 'generationConfig.thinkingConfig.thinkingBudget')
          reasoning.budgetTokens = tc.thinkingBudget
        } else if (key === 'thinkingLevel') {
          const level = EFFORT_OF_LEVEL[String(tc.thinkingLevel)]
          if (level === undefined) return bad(`thinkingLevel ${JSON.stringify(tc.thinkingLevel)} cannot be translated`, 'generationConfig.thinkingConfig.thinkingLevel')
          reasoning.effort = level
        } else if (key !== 'includeThoughts') {
          // includeThoughts only says whether thought summaries are shown; the neutral shape always carries them.
          return bad(`thinkingConfig.${key} cannot be translated`, `generationConfig.thinkingConfig.${key}`)
        }
      }
      request.reasoning = reasoning
    }
  }
  return request
}

const EFFORT_OF_LEVEL: Record<string, 'minimal' | 'low' | 'medium' | 'high'> = { MINIMAL: 'minimal', LOW: 'low', MEDIUM: 'medium', HIGH: 'high' }
const LEVEL_OF_EFFORT = { minimal: 'MINIMAL', low: 'LOW', medium: 'MEDIUM', high: 'HIGH' } as const

function decodeToolChoice (fcc: Json): ToolChoice | undefined | TranslationError {
  const at = 'toolConfig.functionCallingConfig'
  for (const key of Object.keys(fcc)) {
    if (key !== 'mode' && key !== 'allowedFunctionNames') return bad(`${key} cannot be translated`, `${at}.${key}`)
  }
  const names = fcc.allowedFunctionNames
  if (names !== undefined && (!Array.isArray(names) || names.some(n => typeof n !== 'string'))) return bad('allowedFunctionNames must be strings', `${at}.allowedFunctionNames`)
  const mode = fcc.mode ?? 'AUTO'
  if (mode === 'ANY') {
    if (names === undefined || names.length === 0) return { type: 'required' }
    if (names.length === 1) return { type: 'tool', name: names[0] as string }
    return bad('more than one allowedFunctionNames cannot be translated (other providers force one tool or any)', `${at}.allowedFunctionNames`)
  }
  if (names !== undefined && names.length > 0) return bad('allowedFunctionNames is only meaningful with mode ANY', `${at}.allowedFunctionNames`)
  if (mode === 'AUTO' || mode === 'MODE_UNSPECIFIED') return { type: 'auto' }
  if (mode === 'NONE') return { type: 'none' }
  return bad(`function calling mode ${JSON.stringify(mode)} cannot be translated`, `${at}.mode`)
}

function decodeResponseFormat (gc: Json): ChatRequest['responseFormat'] | TranslationError {
  const mime = gc.responseMimeType
  const hasSchema = gc.responseJsonSchema !== undefined || gc.responseSchema !== undefined
  if (mime === undefined && !hasSchema) return undefined
  if (mime === 'text/plain' && !hasSchema) return { type: 'text' }
  if (mime !== 'application/json') return bad(`responseMimeType ${JSON.stringify(mime)} cannot be translated (only application/json and text/plain)`, 'generationConfig.responseMimeType')
  if (!hasSchema) return { type: 'json_object' }
  if (gc.responseJsonSchema !== undefined) {
    if (!isObject(gc.responseJsonSchema)) return bad('responseJsonSchema must be an object', 'generationConfig.responseJsonSchema')
    // Gemini's schemas have no name; other providers need one, and this one is never seen by the model as an instruction.
    return { type: 'json_schema', name: 'response', schema: gc.responseJsonSchema }
  }
  if (!isObject(gc.responseSchema)) return bad('responseSchema must be an object', 'generationConfig.responseSchema')
  return { type: 'json_schema', name: 'response', schema: openApiToJsonSchema(gc.responseSchema) }
}

/** Gemini's OpenAPI 3.0 Schema subset → JSON Schema (see the header). */
export function openApiToJsonSchema (schema: Json): Json {
  const out: Json = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'type' && typeof value === 'string') out.type = value.toLowerCase()
    else if (key === 'nullable' || key === 'propertyOrdering') continue
    else if (key === 'example') out.examples = [value]
    else if (key === 'properties' && isObject(value)) out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? openApiToJsonSchema(v) : v]))
    else if (key === 'items' && isObject(value)) out.items = openApiToJsonSchema(value)
    else if (key === 'anyOf' && Array.isArray(value)) out.anyOf = value.map(v => isObject(v) ? openApiToJsonSchema(v) : v)
    else out[key] = value
  }
  if (schema.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null']
    else if (Array.isArray(out.anyOf)) out.anyOf = [...out.anyOf, { type: 'null' }]
  }
  return out
}

function decodeRequestPart (part: unknown, at: string, role: 'user' | 'assistant', ci: number, pi: number, open: Array<{ id: string, name: string }>): ContentPart[] | TranslationError {
  if (!isObject(part)) return bad('a part must be an object', at)
  const out: ContentPart[] = []
  const { thoughtSignature, thought, ...rest } = part
  if (thoughtSignature !== undefined && typeof thoughtSignature !== 'string') return bad('thoughtSignature must be a string', `${at}.thoughtSignature`)
  const keys = Object.keys(rest)
  if (keys.length !== 1) return bad(keys.length === 0 ? 'an empty part' : `a part must hold one kind of data, not ${keys.join(' and ')}`, at)
  const kind = keys[0] as string
  if (thought === true) {
    if (kind !== 'text' || typeof rest.text !== 'string') return bad('a thought part must be text', at)
    return [thoughtSignature === undefined ? { type: 'reasoning', text: rest.text } : { type: 'reasoning', text: rest.text, signature: thoughtSignature }]
  }
  if (thought !== undefined && thought !== false) return bad('thought must be a boolean', `${at}.thought`)
  // The documented dummy carries no reasoning (the encoder adds it again where Gemini needs it).
  if (thoughtSignature !== undefined && thoughtSignature !== GEMINI_DUMMY_THOUGHT_SIGNATURE) out.push({ type: 'reasoning', text: '', signature: thoughtSignature })
  switch (kind) {
    case 'text':
      if (typeof rest.text !== 'string') return bad('text must be a string', `${at}.text`)
      out.push({ type: 'text', text: rest.text })
      return out
    case 'inlineData': case 'fileData': {
      if (role !== 'user') return bad('images can only be sent in user turns', at)
      const image = decodeMedia(rest[kind], kind, `${at}.${kind}`)
      if (isError(image)) return image
      out.push({ type: 'image', source: image })
      return out
    }
    case 'functionCall': {
      const fc = rest.functionCall
      if (role !== 'assistant') return bad('functionCall parts belong in model turns', at)
      if (!isObject(fc) || typeof fc.name !== 'string') return bad('functionCall needs a name', `${at}.functionCall`)
      if (fc.args !== undefined && !isObject(fc.args)) return bad('functionCall.args must be an object', `${at}.functionCall.args`)
      if (fc.id !== undefined && typeof fc.id !== 'string') return bad('functionCall.id must be a string', `${at}.functionCall.id`)
      const id = fc.id ?? `call_${ci}_${pi}`
      open.push({ id, name: fc.name })
      out.push({ type: 'tool_call', id, name: fc.name, input: fc.args ?? {} })
      return out
    }
    case 'functionResponse': {
      const fr = rest.functionResponse
      if (role !== 'user') return bad('functionResponse parts belong in user turns', at)
      if (!isObject(fr) || typeof fr.name !== 'string') return bad('functionResponse needs a name', `${at}.functionResponse`)
      for (const key of Object.keys(fr)) {
        if (!['id', 'name', 'response', 'parts'].includes(key)) return bad(`functionResponse.${key} cannot be translated`, `${at}.functionResponse.${key}`)
      }
      // The call it answers: by id when given, else the oldest open call of that name.
      const index = fr.id !== undefined ? open.findIndex(c => c.id === fr.id) : open.findIndex(c => c.name === fr.name)
      if (index === -1) return bad(`functionResponse for ${JSON.stringify(fr.id ?? fr.name)} answers no earlier functionCall`, `${at}.functionResponse`)
      const call = open.splice(index, 1)[0] as { id: string, name: string }
      const response = fr.response ?? {}
      if (!isObject(response)) return bad('functionResponse.response must be an object', `${at}.functionResponse.response`)
      const content: Extract<ContentPart, { type: 'tool_result' }>['content'] = []
      let isErrorResult = false
      const keysOf = Object.keys(response)
      if (keysOf.length === 1 && typeof response.output === 'string') content.push({ type: 'text', text: response.output })
      else if (keysOf.length === 1 && typeof response.error === 'string') { content.push({ type: 'text', text: response.error }); isErrorResult = true } else content.push({ type: 'text', text: JSON.stringify(response) })
      if (fr.parts !== undefined) {
        if (!Array.isArray(fr.parts)) return bad('functionResponse.parts must be an array', `${at}.functionResponse.parts`)
        for (const [i, p] of fr.parts.entries()) {
          const pat = `${at}.functionResponse.parts[${i}]`
          if (!isObject(p)) return bad('a part must be an object', pat)
          const k = Object.keys(p)
          if (k.length !== 1 || (k[0] !== 'inlineData' && k[0] !== 'fileData')) return bad('functionResponse parts must be inlineData or fileData', pat)
          const image = decodeMedia(p[k[0]], k[0], `${pat}.${k[0]}`)
          if (isError(image)) return image
          content.push({ type: 'image', source: image })
        }
      }
      out.push(isErrorResult ? { type: 'tool_result', callId: call.id, content, isError: true } : { type: 'tool_result', callId: call.id, content })
      return out
    }
    default:
      return bad(`Gemini part "${kind}" cannot be translated to another provider`, `${at}.${kind}`)
  }
}

type ImageSource = Extract<ContentPart, { type: 'image' }>['source']

function decodeMedia (value: unknown, kind: 'inlineData' | 'fileData', at: string): ImageSource | TranslationError {
  if (!isObject(value)) return bad(`${kind} must be an object`, at)
  if (kind === 'inlineData') {
    if (typeof value.mimeType !== 'string' || typeof value.data !== 'string') return bad('inlineData needs mimeType and data', at)
    if (!value.mimeType.startsWith('image/')) return bad(`inline ${value.mimeType} data cannot be translated (images only)`, `${at}.mimeType`)
    return { kind: 'base64', mediaType: value.mimeType, data: value.data }
  }
  if (typeof value.fileUri !== 'string') return bad('fileData needs a fileUri', at)
  if (value.mimeType !== undefined && (typeof value.mimeType !== 'string' || !value.mimeType.startsWith('image/'))) return bad(`${String(value.mimeType)} files cannot be translated (images only)`, `${at}.mimeType`)
  return { kind: 'url', url: value.fileUri }
}

// ---------------------------------------------------------------------------------------------
// Requests: neutral → Gemini

const MIME_OF_EXTENSION: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif', heic: 'image/heic', heif: 'image/heif'
}

function imagePart (source: ImageSource, field: string): Json | TranslationError {
  if (source.kind === 'base64') return { inlineData: { mimeType: source.mediaType, data: source.data } }
  const url = source.url
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  if (data !== null) return { inlineData: { mimeType: data[1], data: data[2] } }
  if (!/^(https?|gs):\/\//i.test(url)) return bad('image URLs must be http(s)://, gs:// or data: URLs', field)
  const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url.replace(/^[a-z]+:\/\/[^/]*/i, ''))?.[1]?.toLowerCase()
  const mimeType = ext === undefined ? undefined : MIME_OF_EXTENSION[ext]
  return { fileData: mimeType === undefined ? { fileUri: url } : { mimeType, fileUri: url } }
}

function encodeRequest (request: ChatRequest, _model: string): Json | TranslationError {
  const body: Json = {}
  if (request.parallelToolCalls === false) return bad('Gemini cannot be told to call one tool at a time (parallel_tool_calls: false / disable_parallel_tool_use)', 'parallelToolCalls')
  const contents: Json[] = []
  const names = new Map<string, string>()
  for (const [mi, message] of request.messages.entries()) {
    const parts = encodeParts(message.content, `messages[${mi}]`, names, message.role === 'assistant')
    if (isError(parts)) return parts
    if (parts.length === 0) continue
    const role = message.role === 'assistant' ? 'model' : 'user'
    const last = contents[contents.length - 1]
    // Consecutive turns of one role (an OpenAI tool message after a user message, ...) go as one Content.
    if (last !== undefined && last.role === role) (last.parts as Json[]).push(...parts)
    else contents.push({ role, parts })
  }
  if (request.system.length > 0) body.systemInstruction = { parts: request.system.map(text => ({ text })) }
  body.contents = contents
  if (request.tools !== undefined && request.tools.length > 0) {
    body.tools = [{
      functionDeclarations: request.tools.map(t => {
        const fd: Json = { name: t.name }
        if (t.description !== undefined) fd.description = t.description
        fd.parametersJsonSchema = t.parameters
        return fd
      })
    }]
  }
  if (request.toolChoice !== undefined) {
    const c = request.toolChoice
    const fcc: Json = c.type === 'auto' ? { mode: 'AUTO' } : c.type === 'none' ? { mode: 'NONE' } : c.type === 'required' ? { mode: 'ANY' } : { mode: 'ANY', allowedFunctionNames: [c.name] }
    body.toolConfig = { functionCallingConfig: fcc }
  }
  const gc: Json = {}
  if (request.maxTokens !== undefined) gc.maxOutputTokens = request.maxTokens
  if (request.temperature !== undefined) gc.temperature = request.temperature
  if (request.topP !== undefined) gc.topP = request.topP
  if (request.topK !== undefined) gc.topK = request.topK
  if (request.stop !== undefined && request.stop.length > 0) gc.stopSequences = request.stop
  const rf = request.responseFormat
  if (rf !== undefined && rf.type !== 'text') {
    gc.responseMimeType = 'application/json'
    if (rf.type === 'json_schema') {
      // Gemini's schema has no name (it is a label); a description goes into the schema, where Gemini reads it.
      gc.responseJsonSchema = rf.description !== undefined && rf.schema.description === undefined ? { ...rf.schema, description: rf.description } : rf.schema
    }
  } else if (rf !== undefined) {
    gc.responseMimeType = 'text/plain'
  }
  if (request.reasoning !== undefined) {
    const r = request.reasoning
    const tc: Json = {}
    if (r.budgetTokens !== undefined) tc.thinkingBudget = r.budgetTokens
    else if (r.effort !== undefined) tc.thinkingLevel = LEVEL_OF_EFFORT[r.effort]
    // A budget of 0 turns thinking off: there are no thoughts to include then.
    if (r.budgetTokens !== 0) tc.includeThoughts = true
    gc.thinkingConfig = tc
  }
  if (Object.keys(gc).length > 0) body.generationConfig = gc
  return body
}

/** Neutral parts → Gemini parts; `names` maps call ids seen so far to function names. */
function encodeParts (content: ContentPart[], at: string, names: Map<string, string>, fromModel: boolean): Json[] | TranslationError {
  const parts: Json[] = []
  let pending: string | undefined
  let firstCall = true
  const push = (part: Json): void => {
    if (pending !== undefined) { part.thoughtSignature = pending; pending = undefined }
    parts.push(part)
  }
  for (const [i, part] of content.entries()) {
    const field = `${at}.content[${i}]`
    switch (part.type) {
      case 'text':
        push({ text: part.text })
        break
      case 'reasoning':
        if (part.text === '') {
          if (part.signature !== undefined) pending = part.signature
        } else {
          push(part.signature === undefined ? { text: part.text, thought: true } : { text: part.text, thought: true, thoughtSignature: part.signature })
        }
        break
      case 'image': {
        const p = imagePart(part.source, field)
        if (isError(p)) return p
        if (part.detail === 'low' || part.detail === 'high') p.mediaResolution = { level: part.detail === 'low' ? 'MEDIA_RESOLUTION_LOW' : 'MEDIA_RESOLUTION_HIGH' }
        push(p)
        break
      }
      case 'tool_call': {
        names.set(part.id, part.name)
        const p: Json = { functionCall: { id: part.id, name: part.name, args: part.input } }
        push(p)
        if (firstCall && fromModel && p.thoughtSignature === undefined) p.thoughtSignature = GEMINI_DUMMY_THOUGHT_SIGNATURE
        firstCall = false
        break
      }
      case 'tool_result': {
        const name = names.get(part.callId)
        if (name === undefined) return bad(`tool result ${JSON.stringify(part.callId)} answers no earlier tool call (Gemini needs the function's name)`, `${field}.callId`)
        const texts: string[] = []
        const media: Json[] = []
        for (const [j, c] of part.content.entries()) {
          if (c.type === 'text') texts.push(c.text)
          else {
            const p = imagePart(c.source, `${field}.content[${j}]`)
            if (isError(p)) return p
            media.push(p)
          }
        }
        const text = texts.join('\n')
        const fr: Json = { id: part.callId, name, response: part.isError === true ? { error: text } : { output: text } }
        if (media.length > 0) fr.parts = media
        push({ functionResponse: fr })
        break
      }
    }
  }
  // A signature with nothing after it belongs to the part before it.
  if (pending !== undefined) {
    const last = parts[parts.length - 1]
    if (last !== undefined && (last.thoughtSignature === undefined || last.thoughtSignature === GEMINI_DUMMY_THOUGHT_SIGNATURE)) last.thoughtSignature = pending
    else parts.push({ text: '', thought: true, thoughtSignature: pending })
  }
  return parts
}

// ---------------------------------------------------------------------------------------------
// Answers

const STOP_OF_FINISH: Record<string, StopReason> = {
  STOP: 'end_turn',
  MAX_TOKENS: 'max_tokens',
  // Generation stopped at the token limit of one hop; the client sees a truncated answer.
  CONTINUATION: 'max_tokens',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
  IMAGE_PROHIBITED_CONTENT: 'content_filter',
  IMAGE_RECITATION: 'content_filter',
  MODEL_ARMOR: 'content_filter',
  ESCALATION: 'content_filter',
  PUP_LIMITED_DISABLED: 'refusal',
  LANGUAGE: 'refusal'
  // Everything else (OTHER, MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
  // MALFORMED_RESPONSE, MISSING_THOUGHT_SIGNATURE, NO_IMAGE, IMAGE_OTHER, unknown): 'error'.
}

function stopOf (finishReason: unknown, calledTools: boolean): StopReason {
  const stop = STOP_OF_FINISH[String(finishReason)] ?? 'error'
  return stop === 'end_turn' && calledTools ? 'tool_use' : stop
}

const FINISH_OF_STOP: Record<StopReason, string> = {
  end_turn: 'STOP', stop_sequence: 'STOP', tool_use: 'STOP', max_tokens: 'MAX_TOKENS', content_filter: 'SAFETY', refusal: 'SAFETY', pause: 'OTHER', error: 'OTHER'
}

function decodeUsage (meta: unknown): Usage | null {
  if (!isObject(meta)) return null
  const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) ? v : 0
  const thoughts = n(meta.thoughtsTokenCount)
  const usage: Usage = { inputTokens: n(meta.promptTokenCount) + n(meta.toolUsePromptTokenCount), outputTokens: n(meta.candidatesTokenCount) + thoughts }
  if (typeof meta.cachedContentTokenCount === 'number') usage.cachedInputTokens = meta.cachedContentTokenCount
  if (typeof meta.thoughtsTokenCount === 'number') usage.reasoningTokens = thoughts
  return usage
}

function encodeUsage (usage: Usage): Json {
  const reasoning = usage.reasoningTokens ?? 0
  const meta: Json = { promptTokenCount: usage.inputTokens, candidatesTokenCount: usage.outputTokens - reasoning, totalTokenCount: usage.inputTokens + usage.outputTokens }
  if (usage.cachedInputTokens !== undefined) meta.cachedContentTokenCount = usage.cachedInputTokens
  if (usage.reasoningTokens !== undefined) meta.thoughtsTokenCount = usage.reasoningTokens
  return meta
}

/** A stable id for a call Gemini sent without one (see the header). */
function callId (responseId: string, source: () => string, n: number): string {
  const base = responseId !== '' ? responseId.replace(/[^A-Za-z0-9_-]/g, '') : createHash('sha256').update(source()).digest('base64url').slice(0, 16)
  return `call_${base}_${n}`
}

/** One candidate's parts → neutral parts. `nextCall` numbers calls without an id. */
function decodeAnswerParts (parts: unknown, responseId: string, source: () => string, nextCall: { n: number }): ContentPart[] | TranslationError {
  if (parts === undefined) return []
  if (!Array.isArray(parts)) return badAnswer('content.parts is not an array')
  const out: ContentPart[] = []
  for (const part of parts) {
    if (!isObject(part)) return badAnswer('a part is not an object')
    const sig = typeof part.thoughtSignature === 'string' ? part.thoughtSignature : undefined
    if (part.thought === true) {
      out.push(sig === undefined ? { type: 'reasoning', text: String(part.text ?? '') } : { type: 'reasoning', text: String(part.text ?? ''), signature: sig })
      continue
    }
    if (sig !== undefined) out.push({ type: 'reasoning', text: '', signature: sig })
    if (typeof part.text === 'string') {
      out.push({ type: 'text', text: part.text })
    } else if (isObject(part.functionCall)) {
      const fc = part.functionCall
      if (typeof fc.name !== 'string') return badAnswer('functionCall without a name')
      if (fc.args !== undefined && !isObject(fc.args)) return badAnswer('functionCall.args is not an object')
      const id = typeof fc.id === 'string' && fc.id !== '' ? fc.id : callId(responseId, source, nextCall.n)
      nextCall.n++
      out.push({ type: 'tool_call', id, name: fc.name, input: (fc.args as Json | undefined) ?? {} })
    } else if (isObject(part.inlineData) && typeof part.inlineData.mimeType === 'string' && typeof part.inlineData.data === 'string' && part.inlineData.mimeType.startsWith('image/')) {
      out.push({ type: 'image', source: { kind: 'base64', mediaType: part.inlineData.mimeType, data: part.inlineData.data } })
    } else if (sig === undefined || Object.keys(part).some(k => k !== 'thoughtSignature')) {
      return badAnswer(`a part of kind ${Object.keys(part).filter(k => k !== 'thoughtSignature').join(', ') || '(empty)'} cannot be translated`)
    }
  }
  return out
}

function decodeResponse (body: Json): ChatResponse | TranslationError {
  if (isObject(body.error)) return decodeError(typeof body.error.code === 'number' ? body.error.code : 500, body)
  const responseId = typeof body.responseId === 'string' ? body.responseId : ''
  const model = typeof body.modelVersion === 'string' ? body.modelVersion : ''
  const usage = decodeUsage(body.usageMetadata)
  const candidates = body.candidates
  if (candidates === undefined || (Array.isArray(candidates) && candidates.length === 0)) {
    // The prompt itself was blocked: Gemini answers 200 with promptFeedback and no candidates.
    if (isObject(body.promptFeedback) && body.promptFeedback.blockReason !== undefined) return { id: responseId, model, content: [], stopReason: 'content_filter', usage }
    return badAnswer('no candidates')
  }
  if (!Array.isArray(candidates)) return badAnswer('candidates is not an array')
  if (candidates.length > 1) return badAnswer('more than one candidate (only one is asked for)')
  const candidate = candidates[0]
  if (!isObject(candidate)) return badAnswer('a candidate is not an object')
  const content = isObject(candidate.content) ? candidate.content.parts : undefined
  const parts = decodeAnswerParts(content, responseId, () => JSON.stringify(body), { n: 0 })
  if (isError(parts)) return parts
  return { id: responseId, model, content: parts, stopReason: stopOf(candidate.finishReason, parts.some(p => p.type === 'tool_call')), usage }
}

/** Neutral parts of an answer → Gemini parts (a signature-only reasoning part attaches to the next part). */
function answerParts (content: ContentPart[]): Json[] {
  const parts: Json[] = []
  let pending: string | undefined
  for (const part of content) {
    let p: Json | undefined
    if (part.type === 'text') p = { text: part.text }
    else if (part.type === 'reasoning') {
      if (part.text === '') { pending = part.signature; continue }
      p = part.signature === undefined ? { text: part.text, thought: true } : { text: part.text, thought: true, thoughtSignature: part.signature }
    } else if (part.type === 'tool_call') p = { functionCall: { id: part.id, name: part.name, args: part.input } }
    else if (part.type === 'image') {
      const img = imagePart(part.source, '')
      if (!isError(img)) p = img
    }
    // tool_result parts are never in an answer.
    if (p === undefined) continue
    if (pending !== undefined && p.thoughtSignature === undefined) p.thoughtSignature = pending
    pending = undefined
    parts.push(p)
  }
  if (pending !== undefined) {
    const last = parts[parts.length - 1]
    if (last !== undefined && last.thoughtSignature === undefined) last.thoughtSignature = pending
    else parts.push({ text: '', thoughtSignature: pending })
  }
  return parts
}

function encodeResponse (response: ChatResponse, options: EncodeOptions): Json {
  const out: Json = {
    candidates: [{ content: { role: 'model', parts: answerParts(response.content) }, finishReason: FINISH_OF_STOP[response.stopReason], index: 0 }]
  }
  if (response.usage !== null) out.usageMetadata = encodeUsage(response.usage)
  out.modelVersion = response.model !== '' ? response.model : options.requestModel
  if (response.id !== '') out.responseId = response.id
  return out
}

// ---------------------------------------------------------------------------------------------
// Errors: {error: {code, message, status}} (google.rpc.Status)

const KIND_OF_STATUS: Record<string, TranslationError['kind']> = {
  INVALID_ARGUMENT: 'invalid_request',
  FAILED_PRECONDITION: 'invalid_request',
  OUT_OF_RANGE: 'invalid_request',
  UNAUTHENTICATED: 'authentication',
  PERMISSION_DENIED: 'permission',
  NOT_FOUND: 'not_found',
  RESOURCE_EXHAUSTED: 'rate_limit',
  UNAVAILABLE: 'overloaded',
  DEADLINE_EXCEEDED: 'timeout',
  INTERNAL: 'api_error',
  UNKNOWN: 'api_error',
  CANCELLED: 'api_error'
}

const STATUS_OF_KIND: Record<TranslationError['kind'], [string, number]> = {
  invalid_request: ['INVALID_ARGUMENT', 400],
  authentication: ['UNAUTHENTICATED', 401],
  permission: ['PERMISSION_DENIED', 403],
  not_found: ['NOT_FOUND', 404],
  rate_limit: ['RESOURCE_EXHAUSTED', 429],
  api_error: ['INTERNAL', 500],
  overloaded: ['UNAVAILABLE', 503],
  timeout: ['DEADLINE_EXCEEDED', 504]
}

function kindOfHttp (status: number): TranslationError['kind'] {
  if (status === 401) return 'authentication'
  if (status === 403) return 'permission'
  if (status === 404) return 'not_found'
  if (status === 429) return 'rate_limit'
  if (status === 503 || status === 529) return 'overloaded'
  if (status === 504 || status === 408) return 'timeout'
  if (status >= 400 && status < 500) return 'invalid_request'
  return 'api_error'
}

function decodeError (status: number, body: unknown): TranslationError {
  const error = isObject(body) && isObject(body.error) ? body.error : undefined
  const message = error !== undefined && typeof error.message === 'string' ? error.message : `Gemini answered with status ${status}`
  let kind = error !== undefined && typeof error.status === 'string' ? KIND_OF_STATUS[error.status] ?? kindOfHttp(status) : kindOfHttp(status)
  // A bad API key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID: it is the gateway's credential, not the request.
  const details = error !== undefined && Array.isArray(error.details) ? error.details : []
  if (details.some(d => isObject(d) && (d.reason === 'API_KEY_INVALID' || d.reason === 'API_KEY_EXPIRED'))) kind = 'authentication'
  const httpStatus = kind === 'authentication' ? 401 : status >= 400 && status < 600 ? status : STATUS_OF_KIND[kind][1]
  return translationError(httpStatus, kind, message)
}

function encodeError (error: TranslationError): Json {
  const [status] = STATUS_OF_KIND[error.kind]
  return { error: { code: error.status, message: error.message, status } }
}

// ---------------------------------------------------------------------------------------------
// Streams: each SSE event is a whole GenerateContentResponse (text in pieces, calls whole).

class GeminiStreamDecoder extends SseStreamDecoder {
  private started = false
  private open: { index: number, kind: 'text' | 'reasoning' } | null = null
  private nextIndex = 0
  private readonly calls = { n: 0 }
  private calledTools = false
  private finishReason: unknown
  private blocked = false
  private usage: Usage | null = null
  private responseId = ''

  protected invalidStream (message: string): TranslationError {
    return badAnswer(message)
  }

  protected ended (out: StreamEvent[]): void {
    if (this.finishReason === undefined && !this.blocked) {
      this.fail(out, translationError(502, 'api_error', 'the Gemini stream ended before its finishReason (cut short)'))
      return
    }
    this.closeBlock(out)
    out.push({ type: 'finish', stopReason: this.blocked ? 'content_filter' : stopOf(this.finishReason, this.calledTools), usage: this.usage })
    this.done = true // nothing after the end
  }

  private closeBlock (out: StreamEvent[]): void {
    if (this.open !== null) out.push({ type: 'block_stop', index: this.open.index })
    this.open = null
  }

  private openBlock (kind: 'text' | 'reasoning', out: StreamEvent[]): number {
    if (this.open?.kind === kind) return this.open.index
    this.closeBlock(out)
    const index = this.nextIndex++
    this.open = { index, kind }
    out.push({ type: 'block_start', index, block: { type: kind } })
    return index
  }

  protected event ({ data }: SseEvent, out: StreamEvent[]): void {
    let body: unknown
    try {
      body = JSON.parse(data)
    } catch {
      return this.fail(out, badAnswer('a stream event is not JSON'))
    }
    if (!isObject(body)) return this.fail(out, badAnswer('a stream event is not an object'))
    if (isObject(body.error)) return this.fail(out, decodeError(typeof body.error.code === 'number' ? body.error.code : 500, body))
    if (!this.started) {
      this.started = true
      this.responseId = typeof body.responseId === 'string' ? body.responseId : ''
      out.push({ type: 'start', id: this.responseId, model: typeof body.modelVersion === 'string' ? body.modelVersion : '' })
    }
    // Every chunk carries the usage so far; the last one's is the total.
    if (body.usageMetadata !== undefined) this.usage = decodeUsage(body.usageMetadata)
    const candidates = body.candidates
    if (candidates === undefined) {
      if (isObject(body.promptFeedback) && body.promptFeedback.blockReason !== undefined) this.blocked = true
      return
    }
    if (!Array.isArray(candidates)) return this.fail(out, badAnswer('candidates is not an array'))
    if (candidates.length > 1) return this.fail(out, badAnswer('more than one candidate (only one is asked for)'))
    const candidate = candidates[0]
    if (candidate === undefined) return
    if (!isObject(candidate)) return this.fail(out, badAnswer('a candidate is not an object'))
    const parts = decodeAnswerParts(isObject(candidate.content) ? candidate.content.parts : undefined, this.responseId, () => data, this.calls)
    if (isError(parts)) return this.fail(out, parts)
    for (const part of parts) {
      if (part.type === 'text') {
        // An empty text part (Google sends one to carry the last signature) opens no block.
        if (part.text === '') continue
        const index = this.openBlock('text', out)
        out.push({ type: 'text_delta', index, text: part.text })
      } else if (part.type === 'reasoning') {
        const index = this.openBlock('reasoning', out)
        out.push(part.signature === undefined ? { type: 'reasoning_delta', index, text: part.text } : { type: 'reasoning_delta', index, text: part.text, signature: part.signature })
        // A signature ends its reasoning: what follows (even more reasoning) is a new block.
        if (part.signature !== undefined) this.closeBlock(out)
      } else if (part.type === 'tool_call') {
        this.closeBlock(out)
        const index = this.nextIndex++
        this.calledTools = true
        out.push({ type: 'block_start', index, block: { type: 'tool_call', id: part.id, name: part.name } })
        out.push({ type: 'tool_args_delta', index, json: JSON.stringify(part.input) })
        out.push({ type: 'block_stop', index })
      } else {
        return this.fail(out, badAnswer('a streamed image cannot be translated'))
      }
    }
    if (candidate.finishReason !== undefined) this.finishReason = candidate.finishReason
  }
}

/**
 * Neutral events → Gemini's SSE chunks, for clients that speak Gemini. Text and reasoning
 * deltas go out as they come; a tool call is sent whole at its block_stop, as Gemini does.
 */
class GeminiStreamEncoder implements StreamEncoder {
  private id = ''
  private model: string
  private readonly calls = new Map<number, { id: string, name: string, json: string }>()
  private pendingSignature: string | undefined
  private done = false

  constructor (options: EncodeOptions) {
    this.model = options.requestModel
  }

  private chunk (candidate: Json | null, usage?: Usage | null): string {
    const body: Json = {}
    if (candidate !== null) body.candidates = [{ ...candidate, index: 0 }]
    if (usage !== undefined && usage !== null) body.usageMetadata = encodeUsage(usage)
    body.modelVersion = this.model
    if (this.id !== '') body.responseId = this.id
    return sseEvent(JSON.stringify(body))
  }

  private parts (parts: Json[]): string {
    if (this.pendingSignature !== undefined && parts[0] !== undefined && parts[0].thoughtSignature === undefined) {
      parts[0].thoughtSignature = this.pendingSignature
      this.pendingSignature = undefined
    }
    return this.chunk({ content: { role: 'model', parts } })
  }

  private error (error: TranslationError): string {
    this.done = true
    return sseEvent(JSON.stringify(encodeError(error)))
  }

  encode (event: StreamEvent): string {
    if (this.done) return ''
    switch (event.type) {
      case 'start':
        this.id = event.id
        if (event.model !== '') this.model = event.model
        return ''
      case 'block_start':
        if (event.block.type === 'tool_call') this.calls.set(event.index, { id: event.block.id, name: event.block.name, json: '' })
        return ''
      case 'text_delta':
        return event.text === '' ? '' : this.parts([{ text: event.text }])
      case 'reasoning_delta':
        if (event.text === '') {
          if (event.signature !== undefined) this.pendingSignature = event.signature
          return ''
        }
        return this.parts([event.signature === undefined ? { text: event.text, thought: true } : { text: event.text, thought: true, thoughtSignature: event.signature }])
      case 'tool_args_delta': {
        const call = this.calls.get(event.index)
        if (call === undefined) return ''
        if (call.json.length + event.json.length > SSE_MAX_EVENT_BYTES) return this.error(translationError(502, 'api_error', `tool call arguments larger than ${SSE_MAX_EVENT_BYTES} bytes`))
        call.json += event.json
        return ''
      }
      case 'block_stop': {
        const call = this.calls.get(event.index)
        if (call === undefined) return ''
        this.calls.delete(event.index)
        let args: unknown
        try {
          args = call.json.trim() === '' ? {} : JSON.parse(call.json)
        } catch {
          return this.error(translationError(502, 'api_error', `the provider sent invalid JSON arguments for tool call ${call.name}`))
        }
        if (!isObject(args)) return this.error(translationError(502, 'api_error', `the arguments of tool call ${call.name} are not a JSON object`))
        return this.parts([{ functionCall: { id: call.id, name: call.name, args } }])
      }
      case 'finish': {
        this.done = true
        const parts: Json[] = this.pendingSignature !== undefined ? [{ text: '', thoughtSignature: this.pendingSignature }] : []
        return this.chunk({ content: { role: 'model', parts }, finishReason: FINISH_OF_STOP[event.stopReason] }, event.usage)
      }
      case 'error':
        return this.error(event.error)
    }
  }

  end (): string {
    return ''
  }
}

export const geminiFormat: WireFormat = {
  name: 'gemini',
  decodeRequest,
  encodeRequest,
  decodeResponse,
  encodeResponse,
  decodeError,
  encodeError,
  newStreamDecoder: () => new GeminiStreamDecoder(),
  newStreamEncoder: (options: EncodeOptions) => new GeminiStreamEncoder(options),
  streamContentType: 'text/event-stream'
}
