/**
 * An OpenAI API emulator on loopback, speaking the published wire format exactly and
 * answering from recorded transcripts (packages/engine/test/golden/llm/openai-chat/): chat
 * completions whole or streamed (`chat.completion.chunk` events, usage chunk, `data:
 * [DONE]`), tool calls, structured output, errors with OpenAI's shape and status; models
 * and embeddings. Both URL families:
 *
 * - OpenAI: `/v1/chat/completions`, `/v1/responses`, `/v1/models`, `/v1/embeddings`,
 *   `Authorization: Bearer`;
 * - Azure OpenAI: `/openai/deployments/{deployment}/chat/completions?api-version=...` and
 *   `/openai/responses?api-version=...` (404 without api-version, as Azure) and the v1 API
 *   `/openai/v1/...`, with the key in `api-key`.
 *
 * Which recorded answer: model `error-<case>` answers errors/<case>.<status>.json; a request
 * with tools (and no tool result last) the tool-calls transcript (parallel-tool-calls when
 * streamed with several tools); `response_format: json_schema` the json-schema answer;
 * model `max-tokens` the max-tokens one; else the text one. Hostile ones: model
 * `error-in-200` answers 200 with an error body, `cut-mid-tool-call` drops the connection in
 * the middle of a streamed tool call's arguments, `ignores-stream` answers whole JSON to a
 * stream request (as some servers do). Streams are written one event
 * per write; `gate` (when set) is awaited after the first content event, so a test can prove
 * the first token reached the client before the rest was sent.
 *
 * `script` (when set) replaces the recorded text answer of chat completions: a stream sends
 * each piece as its own `chat.completion.chunk` event, in its own write (so a test can put a
 * boundary where it wants, e.g. in the middle of an email address); a whole answer joins them.
 *
 * Moderations (`POST /v1/moderations`, as the API reference defines it): `input` a string, an
 * array of strings (one result each) or an array of multi-modal inputs (one result); a text
 * containing `[flag:<category>]` (e.g. `[flag:violence]`) is flagged in that category,
 * anything else is not. The answer has every category of omni-moderation, with scores and
 * applied input types.
 */

import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type http from 'node:http'
import { type Backend, startBackend } from '@portico/testkit/backends'

const DIR = fileURLToPath(new URL('../../../packages/engine/test/golden/llm/openai-chat/', import.meta.url))
/** Recorded Responses API answers (e2e/lib/llm-emulators/openai-responses/). */
const RESPONSES_DIR = fileURLToPath(new URL('./openai-responses/', import.meta.url))

export interface EmulatorRequest {
  method: string
  url: string
  headers: http.IncomingHttpHeaders
  body: Record<string, unknown> | null
}

export interface OpenAIEmulator extends Backend {
  received: EmulatorRequest[]
  /** Awaited after the first content event of the next streams (null: no hold). */
  gate: (() => Promise<void>) | null
  /** The text of the next chat completions, in these pieces (null: the recorded answer). */
  script: string[] | null
}

export interface OpenAIEmulatorOptions {
  /** The key OpenAI-style paths require as `Authorization: Bearer`; absent = any. */
  apiKey?: string
  /** The key Azure paths require in `api-key`; absent = any. */
  azureKey?: string
  /**
   * Azure paths also take a Microsoft Entra ID token as `Authorization: Bearer` (as Azure
   * OpenAI does): this says which tokens are valid (the Entra emulator's `valid`).
   */
  azureBearer?: (token: string) => boolean
}

function fixture (sub: string, name: string): string {
  return readFileSync(`${DIR}${sub}/${name}`, 'utf8')
}

function errorFixture (name: string): { status: number, body: string } | null {
  const file = readdirSync(`${DIR}errors`).find(f => f.startsWith(`${name}.`) && /^[a-z-]+\.\d{3}\.json$/.test(f))
  return file === undefined ? null : { status: Number(file.split('.')[1]), body: fixture('errors', file) }
}

/** The SSE events of a recorded stream, each with its blank line. */
function events (name: string): string[] {
  return fixture('streams', `${name}.sse`).split(/(?<=\n\n)/).filter(e => e.trim() !== '')
}

export async function startOpenAIEmulator (options: OpenAIEmulatorOptions = {}): Promise<OpenAIEmulator> {
  const received: EmulatorRequest[] = []
  // Set once started; handlers read its `gate` as the test left it.
  let emulator: OpenAIEmulator | null = null
  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      void handle(req, res, Buffer.concat(chunks)).catch(err => {
        if (!res.headersSent) send(res, 500, { error: { message: String(err), type: 'server_error', param: null, code: null } })
        else res.destroy()
      })
    })
  })

  async function handle (req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://emulator')
    let body: Record<string, unknown> | null = null
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>
      } catch {
        return send(res, 400, { error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error', param: null, code: null } })
      }
    }
    received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })

    let operation: string | null = null
    const azure = url.pathname.startsWith('/openai/')
    const deployment = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(url.pathname)
    if (deployment !== null || url.pathname === '/openai/responses') {
      if (!url.searchParams.has('api-version')) return send(res, 404, { error: { code: '404', message: 'Resource not found' } })
      operation = deployment?.[2] ?? 'responses'
    } else {
      const m = /^\/(?:openai\/)?v1\/(chat\/completions|embeddings|models|responses|moderations)$/.exec(url.pathname)
      if (m !== null) operation = m[1]!
    }
    if (operation === null) return send(res, 404, { error: { message: `Invalid URL (${req.method ?? ''} ${url.pathname})`, type: 'invalid_request_error', param: null, code: null } })

    const key = azure ? options.azureKey : options.apiKey
    const presented = azure ? req.headers['api-key'] : req.headers.authorization
    const bearer = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ''))?.[1]
    const entraOk = azure && options.azureBearer !== undefined && bearer !== undefined && req.headers['api-key'] === undefined && options.azureBearer(bearer)
    if (!entraOk && (key !== undefined || (azure && options.azureBearer !== undefined)) && (key === undefined || presented !== (azure ? key : `Bearer ${key}`))) {
      const auth = errorFixture('auth')!
      return sendRaw(res, auth.status, auth.body)
    }

    if (operation === 'models') {
      if (req.method !== 'GET') return send(res, 405, { error: { message: 'Method not allowed', type: 'invalid_request_error', param: null, code: null } })
      return send(res, 200, { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1721172741, owned_by: 'system' }, { id: 'text-embedding-3-small', object: 'model', created: 1705948997, owned_by: 'system' }] })
    }
    if (req.method !== 'POST' || body === null) return send(res, 400, { error: { message: 'A JSON body is required', type: 'invalid_request_error', param: null, code: null } })
    if (operation === 'moderations') {
      const input = body.input
      let texts: string[]
      if (typeof input === 'string') texts = [input]
      else if (Array.isArray(input) && input.every(i => typeof i === 'string')) texts = input as string[]
      else if (Array.isArray(input) && input.length > 0 && input.every(i => i !== null && typeof i === 'object' && ((i as { type?: unknown }).type === 'text' || (i as { type?: unknown }).type === 'image_url'))) {
        // Multi-modal inputs are classified together: one result.
        texts = [(input as Array<{ type: string, text?: string }>).map(i => i.type === 'text' ? i.text ?? '' : '').join('\n')]
      } else return send(res, 400, { error: { message: "Invalid value for 'input'.", type: 'invalid_request_error', param: 'input', code: null } })
      const requested = typeof body.model === 'string' ? body.model : 'omni-moderation-latest'
      return send(res, 200, { id: `modr-${received.length}`, model: requested === 'omni-moderation-latest' ? 'omni-moderation-2024-09-26' : requested, results: texts.map(moderate) })
    }

    const model = typeof body.model === 'string' ? body.model : (deployment?.[1] ?? '')
    if (model === '' && !azure) return send(res, 400, { error: { message: 'you must provide a model parameter', type: 'invalid_request_error', param: null, code: null } })

    if (operation === 'embeddings') {
      const input = Array.isArray(body.input) ? body.input : [body.input]
      return send(res, 200, { object: 'list', data: input.map((_, index) => ({ object: 'embedding', index, embedding: [0.0023064255, -0.009327292, 0.015797347] })), model: 'text-embedding-3-small', usage: { prompt_tokens: 8 * input.length, total_tokens: 8 * input.length } })
    }

    if (model === 'error-in-200') return send(res, 200, { error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } })
    if (model === 'cut-mid-tool-call') {
      // The tool-calls stream up to the middle of the arguments, then the connection drops.
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' })
      for (const event of events('tool-calls').slice(0, 3)) res.write(event)
      await new Promise(resolve => setTimeout(resolve, 20))
      res.destroy()
      return
    }
    if (operation === 'responses') {
      // The Responses API: a recorded answer, whole or streamed (typed events).
      if (body.input === undefined) return send(res, 400, { error: { message: "Missing required parameter: 'input'.", type: 'invalid_request_error', param: 'input', code: 'missing_required_parameter' } })
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
        for (const event of readFileSync(`${RESPONSES_DIR}text.sse`, 'utf8').split(/(?<=\n\n)/).filter(e => e.trim() !== '')) {
          res.write(event)
          await new Promise(resolve => setImmediate(resolve))
        }
        res.end()
        return
      }
      return sendRaw(res, 200, readFileSync(`${RESPONSES_DIR}text.json`, 'utf8'))
    }
    if (model.startsWith('error-')) {
      const e = errorFixture(model.slice(6))
      if (e !== null) return sendRaw(res, e.status, e.body)
    }
    const messages = Array.isArray(body.messages) ? body.messages as Array<{ role?: string }> : []
    if (messages.length === 0) return send(res, 400, { error: { message: "Missing required parameter: 'messages'.", type: 'invalid_request_error', param: 'messages', code: 'missing_required_parameter' } })
    const tools = Array.isArray(body.tools) ? body.tools.length : 0
    const wantsTools = tools > 0 && messages.at(-1)?.role !== 'tool' && body.tool_choice !== 'none'
    const schema = (body.response_format as { type?: string } | undefined)?.type === 'json_schema'

    const script = emulator?.script ?? null
    if (script !== null) return scripted(res, script, model, body.stream === true, (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true)

    if (body.stream === true && model !== 'ignores-stream') {
      const name = model === 'max-tokens' ? 'max-tokens' : wantsTools ? (tools > 1 ? 'parallel-tool-calls' : 'tool-calls') : 'text'
      const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
      let first = true
      for (const event of events(name)) {
        // Without include_usage OpenAI sends no usage chunk and no usage fields.
        if (!includeUsage && event.includes('"choices":[]')) continue
        res.write(includeUsage ? event : event.replace(/,"usage":null/, ''))
        if (first && /"delta":\{"(content|tool_calls)"/.test(event) && !event.includes('"content":""')) {
          first = false
          const gate = emulator?.gate ?? null
          if (gate !== null) await gate()
        }
        await new Promise(resolve => setImmediate(resolve))
      }
      res.end()
      return
    }
    const name = model === 'max-tokens' ? 'max-tokens' : wantsTools ? 'tool-calls' : schema ? 'json-schema' : 'text'
    sendRaw(res, 200, fixture('responses', `${name}.json`))
  }

  emulator = Object.assign(backend, { received, gate: null as OpenAIEmulator['gate'], script: null as OpenAIEmulator['script'] })
  return emulator
}

function send (res: http.ServerResponse, status: number, value: unknown): void {
  sendRaw(res, status, JSON.stringify(value))
}

function sendRaw (res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_emulator' })
  res.end(text)
}

/** A chat completion of the scripted text: a stream of one content chunk per piece (one write each), or a whole answer. */
async function scripted (res: http.ServerResponse, pieces: string[], model: string, stream: boolean, includeUsage: boolean): Promise<void> {
  const base = { id: 'chatcmpl-scripted', object: 'chat.completion.chunk', created: 1741571000, model, service_tier: 'default', system_fingerprint: 'fp_06737a9306' }
  const usage = { prompt_tokens: 9, completion_tokens: pieces.length, total_tokens: 9 + pieces.length }
  if (!stream) {
    return sendRaw(res, 200, JSON.stringify({ id: 'chatcmpl-scripted', object: 'chat.completion', created: 1741571000, model, choices: [{ index: 0, message: { role: 'assistant', content: pieces.join(''), refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }], usage, service_tier: 'default', system_fingerprint: 'fp_06737a9306' }))
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): string => `data: ${JSON.stringify({ ...base, choices, ...(includeUsage ? { usage: null } : {}), ...extra })}\n\n`
  const writes = [
    chunk([{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]),
    ...pieces.map(p => chunk([{ index: 0, delta: { content: p }, logprobs: null, finish_reason: null }])),
    chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]),
    ...(includeUsage ? [chunk([], { usage })] : []),
    'data: [DONE]\n\n'
  ]
  for (const w of writes) {
    res.write(w)
    await new Promise(resolve => setTimeout(resolve, 2))
  }
  res.end()
}

/** omni-moderation's categories, and the input types each applies to. */
const MODERATION_CATEGORIES: Record<string, string[]> = {
  harassment: ['text'],
  'harassment/threatening': ['text'],
  hate: ['text'],
  'hate/threatening': ['text'],
  illicit: ['text'],
  'illicit/violent': ['text'],
  'self-harm': ['text'],
  'self-harm/intent': ['text'],
  'self-harm/instructions': ['text'],
  sexual: ['text'],
  'sexual/minors': ['text'],
  violence: ['text'],
  'violence/graphic': ['text']
}

/** One moderation result: flagged in the categories the text names with `[flag:<category>]`. */
function moderate (text: string): Record<string, unknown> {
  const flagged = new Set([...text.matchAll(/\[flag:([a-z/-]+)\]/g)].map(m => m[1]!).filter(c => c in MODERATION_CATEGORIES))
  const names = Object.keys(MODERATION_CATEGORIES)
  return {
    flagged: flagged.size > 0,
    categories: Object.fromEntries(names.map(c => [c, flagged.has(c)])),
    category_scores: Object.fromEntries(names.map(c => [c, flagged.has(c) ? 0.91 : 0.000012])),
    category_applied_input_types: Object.fromEntries(names.map(c => [c, MODERATION_CATEGORIES[c]]))
  }
}
