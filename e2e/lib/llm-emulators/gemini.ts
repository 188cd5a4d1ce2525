/**
 * The Gemini API and Vertex AI on loopback, speaking Google's published wire format, driven
 * by recorded transcripts (the golden fixtures of packages/engine/test/golden/llm/gemini/):
 *
 * - Gemini API: `POST /{v1beta|v1}/models/{model}:generateContent` and
 *   `:streamGenerateContent` — with `?alt=sse` server-sent events (`data: {...}\r\n\r\n`, one
 *   GenerateContentResponse each), without it one JSON array, as Google does. The key comes in
 *   `x-goog-api-key` (or `?key=`): none is 403 PERMISSION_DENIED, a wrong one 400 API_KEY_INVALID
 *   — Google's own answers.
 * - Vertex AI: `POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:…`
 *   (same bodies) and `.../publishers/anthropic/models/{model}:rawPredict | :streamRawPredict`
 *   (Anthropic Messages without `model`, with `anthropic_version: "vertex-2023-10-16"`), with
 *   `Authorization: Bearer <token>` checked (401 UNAUTHENTICATED otherwise) and the project
 *   checked (403 PERMISSION_DENIED).
 * - Embeddings and models: the Gemini API's OpenAI-compatible `GET /v1beta/openai/models` and
 *   `POST /v1beta/openai/embeddings`, and Vertex AI's `.../publishers/google/models/{model}:predict`
 *   for text-embedding models (see `openaiCompatible`, `vertexPredict`).
 * - Requests are checked as Google checks them: JSON, known field names only (protobuf JSON
 *   mapping: "Unknown name ... Cannot find field."), `contents` present, each part one kind of
 *   data, roles `user`/`model` on Vertex.
 *
 * Which transcript answers: the next queued with `answerWith(...)`, else `tool-calls` when the
 * request declares tools and its last turn is not a function response, else `text`. Queued
 * `hostile:<kind>` names answer like a misbehaving provider (see `hostile`).
 */

import { readFileSync, existsSync } from 'node:fs'
import type http from 'node:http'
import { type Backend, startBackend } from '@portico/testkit/backends'

const GOLDEN = new URL('../../../packages/engine/test/golden/llm/gemini/', import.meta.url)

export interface GeminiCall {
  api: 'gemini' | 'vertex' | 'vertex-anthropic'
  method: 'generateContent' | 'streamGenerateContent' | 'rawPredict' | 'streamRawPredict'
  model: string
  sse: boolean
  path: string
  headers: http.IncomingHttpHeaders
  body: Record<string, unknown>
}

export interface GeminiEmulator extends Backend {
  readonly apiKey: string
  readonly vertexToken: string
  readonly project: string
  /** Every well-formed call, in order. */
  calls: GeminiCall[]
  /** Calls of the OpenAI-compatible endpoints and of Vertex's `:predict` (embeddings), in order. */
  openaiCalls: Array<{ operation: 'embeddings' | 'models' | 'predict', headers: http.IncomingHttpHeaders, body: Record<string, unknown> | null }>
  /** Transcripts for the next calls, in order: `text`, `tool-calls`, `max-tokens`, ..., `error:<name>` (errors/<name>.json) or `hostile:<kind>`. */
  answerWith (...names: string[]): void
}

export interface GeminiEmulatorOptions {
  apiKey?: string
  vertexToken?: string
  project?: string
}

const REQUEST_FIELDS = new Set(['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'safetySettings', 'cachedContent', 'labels', 'model'])
const PART_FIELDS = new Set(['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'thought', 'thoughtSignature', 'executableCode', 'codeExecutionResult', 'videoMetadata', 'mediaResolution', 'partMetadata', 'toolCall', 'toolResponse'])
const DATA_FIELDS = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult', 'toolCall', 'toolResponse']
const GENERATION_FIELDS = new Set(['maxOutputTokens', 'temperature', 'topP', 'topK', 'stopSequences', 'candidateCount', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'thinkingConfig', 'seed', 'presencePenalty', 'frequencyPenalty', 'responseLogprobs', 'logprobs', 'responseModalities', 'mediaResolution', 'speechConfig'])

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

function golden (path: string): string {
  return readFileSync(new URL(path, GOLDEN), 'utf8')
}

/** The JSON objects of a recorded SSE stream, in order. */
function sseObjects (text: string): unknown[] {
  return text.split(/\r?\n\r?\n/).filter(e => e.startsWith('data:')).map(e => JSON.parse(e.slice(5).trim()))
}

function googleError (res: http.ServerResponse, code: number, status: string, message: string, details?: unknown[]): void {
  res.writeHead(code, { 'content-type': 'application/json; charset=UTF-8' })
  res.end(JSON.stringify({ error: { code, message, status, ...(details !== undefined ? { details } : {}) } }, null, 2))
}

export async function startGeminiEmulator (options: GeminiEmulatorOptions = {}): Promise<GeminiEmulator> {
  const apiKey = options.apiKey ?? 'AIza-test-portico-gemini'
  const vertexToken = options.vertexToken ?? 'ya29.test-portico-vertex'
  const project = options.project ?? 'portico-test'
  const calls: GeminiCall[] = []
  const openaiCalls: GeminiEmulator['openaiCalls'] = []
  const queue: string[] = []

  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => handle(req, res, Buffer.concat(chunks)))
  })

  function handle (req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://emulator')
    const openai = /^\/(v1beta|v1)\/openai\/(embeddings|models)$/.exec(url.pathname)
    if (openai !== null) return openaiCompatible(req, res, raw, openai[2] as 'embeddings' | 'models')
    const predict = /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/google\/models\/([^/:]+):predict$/.exec(url.pathname)
    if (predict !== null && req.method === 'POST') return vertexPredict(req, res, raw, predict[1]!, decodeURIComponent(predict[3]!))
    const gemini = /^\/(v1beta|v1|v1alpha)\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(url.pathname)
    const vertex = /^\/(v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):(generateContent|streamGenerateContent|rawPredict|streamRawPredict)$/.exec(url.pathname)
    if (req.method !== 'POST' || (gemini === null && vertex === null)) return googleError(res, 404, 'NOT_FOUND', `Method not found: ${req.method ?? ''} ${url.pathname}`)

    if (gemini !== null) {
      const key = req.headers['x-goog-api-key'] ?? url.searchParams.get('key') ?? undefined
      if (key === undefined) return googleError(res, 403, 'PERMISSION_DENIED', 'Method doesn\'t allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.')
      if (key !== apiKey) {
        const body = JSON.parse(golden('errors/auth.json')) as { error: { code: number, status: string, message: string, details: unknown[] } }
        return googleError(res, body.error.code, body.error.status, body.error.message, body.error.details)
      }
    } else {
      const auth = req.headers.authorization
      if (auth !== `Bearer ${vertexToken}`) {
        const body = JSON.parse(golden('errors/vertex-auth.json')) as { error: { code: number, status: string, message: string } }
        return googleError(res, body.error.code, body.error.status, body.error.message)
      }
      if (vertex?.[2] !== project) return googleError(res, 403, 'PERMISSION_DENIED', `Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/${vertex?.[2] ?? ''}/locations/${vertex?.[3] ?? ''}' (or it may not exist).`)
    }

    let body: unknown
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch {
      return googleError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received. Unexpected token.')
    }
    if (!isObject(body)) return googleError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received. Expected an object.')

    const method = (gemini?.[3] ?? vertex?.[6]) as GeminiCall['method']
    const model = decodeURIComponent((gemini?.[2] ?? vertex?.[5]) as string)
    if (vertex !== null && vertex[4] === 'anthropic') {
      if (method !== 'rawPredict' && method !== 'streamRawPredict') return googleError(res, 400, 'FAILED_PRECONDITION', `Anthropic models are served by rawPredict and streamRawPredict, not ${method}.`)
      const problem = anthropicProblem(body)
      if (problem !== null) return anthropicError(res, 400, 'invalid_request_error', problem)
      calls.push({ api: 'vertex-anthropic', method, model, sse: body.stream === true, path: req.url ?? '', headers: req.headers, body })
      return anthropicAnswer(res, model, body.stream === true)
    }
    if (method === 'rawPredict' || method === 'streamRawPredict') return googleError(res, 400, 'FAILED_PRECONDITION', 'Gemini models are served by generateContent and streamGenerateContent.')
    const problem = geminiProblem(body, vertex !== null)
    if (problem !== null) return googleError(res, 400, 'INVALID_ARGUMENT', problem)
    const sse = url.searchParams.get('alt') === 'sse'
    calls.push({ api: vertex !== null ? 'vertex' : 'gemini', method, model, sse, path: req.url ?? '', headers: req.headers, body })

    const name = queue.shift() ?? defaultTranscript(body)
    if (name.startsWith('hostile:')) return hostile(res, name.slice(8))
    if (name.startsWith('error:')) {
      const error = name.slice(6)
      const status = Number(golden(`errors/${error}.status`).trim())
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' })
      return void res.end(golden(`errors/${error}.json`))
    }
    if (method === 'generateContent') {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' })
      return void res.end(golden(`responses/${name}.json`))
    }
    const recorded = existsSync(new URL(`streams/${name}.sse`, GOLDEN)) ? golden(`streams/${name}.sse`) : `data: ${JSON.stringify(JSON.parse(golden(`responses/${name}.json`)))}\r\n\r\n`
    if (!sse) {
      // Without alt=sse Google streams one JSON array of responses.
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' })
      return void res.end(JSON.stringify(sseObjects(recorded), null, 2))
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    // Event by event, as the model produces them.
    const events = recorded.split(/(?<=\r\n\r\n)/)
    const next = (): void => {
      const event = events.shift()
      if (event === undefined) return void res.end()
      res.write(event)
      setImmediate(next)
    }
    next()
  }

  /**
   * The Gemini API's OpenAI-compatible endpoints (Google's "OpenAI compatibility" guide: base URL
   * `.../v1beta/openai/`, the key as `Authorization: Bearer`; Google's API keys are taken in
   * `x-goog-api-key` on every method too): `GET models` and `POST embeddings`, in OpenAI's shapes;
   * errors in Google's own shape.
   */
  function openaiCompatible (req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer, operation: 'embeddings' | 'models'): void {
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
    const key = bearer ?? req.headers['x-goog-api-key']
    const fail = (status: number, message: string, type: string): void => googleError(res, status, type, message)
    if (key !== apiKey) return fail(key === undefined ? 401 : 400, key === undefined ? 'Missing bearer or basic authentication in header' : 'API key not valid. Please pass a valid API key.', key === undefined ? 'UNAUTHENTICATED' : 'INVALID_ARGUMENT')
    const send = (value: unknown): void => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(value))
    }
    if (operation === 'models') {
      if (req.method !== 'GET') return fail(404, 'Method not found.', 'NOT_FOUND')
      openaiCalls.push({ operation, headers: req.headers, body: null })
      return send({ object: 'list', data: [{ id: 'models/gemini-2.5-flash', object: 'model', created: 0, owned_by: 'google' }, { id: 'models/gemini-embedding-001', object: 'model', created: 0, owned_by: 'google' }] })
    }
    let body: unknown
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch {
      return fail(400, 'Invalid JSON payload received.', 'INVALID_ARGUMENT')
    }
    if (!isObject(body) || typeof body.model !== 'string') return fail(400, 'model is required', 'INVALID_ARGUMENT')
    const input = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? body.input : null
    if (input === null) return fail(400, 'input is required', 'INVALID_ARGUMENT')
    openaiCalls.push({ operation, headers: req.headers, body })
    send({ object: 'list', data: input.map((_, index) => ({ object: 'embedding', index, embedding: [0.0125, -0.03, 0.5] })), model: body.model, usage: { prompt_tokens: 4 * input.length, total_tokens: 4 * input.length } })
  }

  /**
   * Vertex AI's `:predict` for Google's text-embedding models (the "Get text embeddings" REST
   * reference): `{instances: [{content, task_type?, title?}], parameters: {autoTruncate?,
   * outputDimensionality?}}` → `{predictions: [{embeddings: {values, statistics: {truncated,
   * token_count}}}], metadata: {billableCharacterCount}}`.
   */
  function vertexPredict (req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer, inProject: string, model: string): void {
    if (req.headers.authorization !== `Bearer ${vertexToken}`) {
      const body = JSON.parse(golden('errors/vertex-auth.json')) as { error: { code: number, status: string, message: string } }
      return googleError(res, body.error.code, body.error.status, body.error.message)
    }
    if (inProject !== project) return googleError(res, 403, 'PERMISSION_DENIED', `Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/${inProject}' (or it may not exist).`)
    let body: unknown
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch {
      return googleError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.')
    }
    if (!isObject(body) || !Array.isArray(body.instances) || body.instances.length === 0) return googleError(res, 400, 'INVALID_ARGUMENT', 'instances is required')
    for (const key of Object.keys(body)) if (key !== 'instances' && key !== 'parameters') return googleError(res, 400, 'INVALID_ARGUMENT', `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`)
    const instances = body.instances as unknown[]
    if (!instances.every(i => isObject(i) && typeof i.content === 'string')) return googleError(res, 400, 'INVALID_ARGUMENT', 'each instance needs content')
    const dims = isObject(body.parameters) && typeof body.parameters.outputDimensionality === 'number' ? body.parameters.outputDimensionality : 3
    openaiCalls.push({ operation: 'predict', headers: req.headers, body: { model, ...body } })
    res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' })
    res.end(JSON.stringify({
      predictions: (instances as Array<{ content: string }>).map(i => ({ embeddings: { statistics: { truncated: false, token_count: i.content.split(/\s+/).length }, values: Array.from({ length: dims }, (_, k) => (k + 1) / 10) } })),
      metadata: { billableCharacterCount: (instances as Array<{ content: string }>).reduce((n, i) => n + i.content.length, 0) }
    }))
  }

  return Object.assign(backend, {
    openaiCalls,
    apiKey,
    vertexToken,
    project,
    calls,
    answerWith: (...names: string[]) => { queue.push(...names) }
  })
}

/**
 * Misbehaving providers, for the gateway's hostile-input tests:
 * - `cut-mid-call`: a text chunk, then half of a functionCall event, then the connection ends;
 * - `error-mid-stream`: a text chunk, then Google's `{error}` event (a stream failing after its head);
 * - `error-200`: a 200 `application/json` answer whose body is an error;
 * - `split-utf8`: a stream whose multi-byte characters are split across network writes;
 * - `no-finish`: a stream that ends cleanly without a finishReason;
 * - `endless-line`: 8 MiB of one `data:` line without an end, then the connection ends.
 */
function hostile (res: http.ServerResponse, kind: string): void {
  const chunk = (text: string, extra: Record<string, unknown> = {}): string => `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text }] }, index: 0, ...extra }], modelVersion: 'gemini-2.0-flash', responseId: 'hostile-1' })}\r\n\r\n`
  if (kind === 'error-200') {
    res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' })
    return void res.end(golden('errors/rate-limit.json'))
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  const writes: Array<string | Buffer> = []
  if (kind === 'cut-mid-call') writes.push(chunk('Let me look that up.'), 'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_current_weather","args": {"locat')
  else if (kind === 'error-mid-stream') writes.push(chunk('Once upon'), `data: ${JSON.stringify({ error: { code: 503, message: 'The model is overloaded. Please try again later.', status: 'UNAVAILABLE' } })}\r\n\r\n`)
  else if (kind === 'no-finish') writes.push(chunk('Once upon'), chunk(' a time'))
  else if (kind === 'split-utf8') {
    const bytes = Buffer.from(chunk('h\u00e9llo \u2014 w\u00f6rld \u2713 \ud83d\ude00') + chunk('.', { finishReason: 'STOP' }))
    for (let i = 0; i < bytes.length; i += 3) writes.push(bytes.subarray(i, i + 3))
  } else if (kind === 'endless-line') {
    writes.push('data: {"candidates": [{"content": {"parts": [{"text": "')
    for (let i = 0; i < 128; i++) writes.push('x'.repeat(64 * 1024))
  } else throw new Error(`unknown hostile transcript ${kind}`)
  const next = (): void => {
    const piece = writes.shift()
    if (piece === undefined) return void res.end()
    if (res.write(piece)) setImmediate(next)
    else res.once('drain', next)
  }
  next()
}

function defaultTranscript (body: Record<string, unknown>): string {
  const contents = body.contents as Array<{ parts: Array<Record<string, unknown>> }>
  const last = contents[contents.length - 1]
  const answersCall = last?.parts.some(p => p.functionResponse !== undefined) === true
  return Array.isArray(body.tools) && body.tools.length > 0 && !answersCall ? 'tool-calls' : 'text'
}

/** What Google would refuse in a GenerateContentRequest, in its words; null when well-formed. */
function geminiProblem (body: Record<string, unknown>, vertex: boolean): string | null {
  for (const key of Object.keys(body)) {
    if (!REQUEST_FIELDS.has(key)) return `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`
  }
  if (!Array.isArray(body.contents) || body.contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified\n'
  for (const [i, content] of body.contents.entries()) {
    if (!isObject(content) || !Array.isArray(content.parts) || content.parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.\n`
    if (content.role !== undefined && content.role !== 'user' && content.role !== 'model') return `Please use a valid role: user, model.`
    if (vertex && content.role === undefined) return 'Please use a valid role: user, model.'
    for (const [j, part] of content.parts.entries()) {
      if (!isObject(part)) return `Invalid JSON payload received. Unknown name at 'contents[${i}].parts[${j}]'.`
      for (const key of Object.keys(part)) {
        if (!PART_FIELDS.has(key)) return `Invalid JSON payload received. Unknown name "${key}" at 'contents[${i}].parts[${j}]': Cannot find field.`
      }
      const kinds = DATA_FIELDS.filter(k => part[k] !== undefined)
      if (kinds.length !== 1) return `* GenerateContentRequest.contents[${i}].parts[${j}].data: required oneof field 'data' must have one initialized field\n`
      if (isObject(part.functionResponse) && typeof part.functionResponse.name !== 'string') return `* GenerateContentRequest.contents[${i}].parts[${j}].function_response.name: Name cannot be empty.\n`
    }
  }
  if (isObject(body.generationConfig)) {
    for (const key of Object.keys(body.generationConfig)) {
      if (!GENERATION_FIELDS.has(key)) return `Invalid JSON payload received. Unknown name "${key}" at 'generation_config': Cannot find field.`
    }
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return 'Invalid JSON payload received. Proto field is not repeating, cannot start list.'
    for (const tool of body.tools) {
      const fds = isObject(tool) ? tool.functionDeclarations : undefined
      for (const fd of Array.isArray(fds) ? fds : []) {
        if (isObject(fd) && fd.parameters !== undefined && fd.parametersJsonSchema !== undefined) return 'parameters and parametersJsonSchema are mutually exclusive'
      }
    }
  }
  return null
}

// --- Claude on Vertex AI (the Anthropic Messages API's answers) -------------------------------

function anthropicProblem (body: Record<string, unknown>): string | null {
  if (body.model !== undefined) return 'model: Extra inputs are not permitted'
  if (body.anthropic_version !== 'vertex-2023-10-16') return 'anthropic_version: Input should be \'vertex-2023-10-16\''
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: Field required'
  if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required'
  return null
}

function anthropicError (res: http.ServerResponse, status: number, type: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ type: 'error', error: { type, message } }))
}

const CLAUDE_REPLY = ['Hello', '! How can I help', ' you today?']

function anthropicAnswer (res: http.ServerResponse, model: string, stream: boolean): void {
  const id = 'msg_vrtx_01GhWpQ9x8Ukqe5KhHX9CQpV'
  const usage = { input_tokens: 12, output_tokens: 9 }
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' })
    return void res.end(JSON.stringify({ id, type: 'message', role: 'assistant', model, content: [{ type: 'text', text: CLAUDE_REPLY.join('') }], stop_reason: 'end_turn', stop_sequence: null, usage }))
  }
  const event = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.write(event('message_start', { type: 'message_start', message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } }))
  res.write(event('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }))
  res.write(event('ping', { type: 'ping' }))
  for (const text of CLAUDE_REPLY) res.write(event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }))
  res.write(event('content_block_stop', { type: 'content_block_stop', index: 0 }))
  res.write(event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } }))
  res.end(event('message_stop', { type: 'message_stop' }))
}
