/**
 * Anthropic's API on loopback, for the providers that cannot run here: `POST /v1/messages`
 * and `GET /v1/models`, with the checks the real API makes first and its error shape
 * `{type: "error", error: {type, message}, request_id}`: the key in `x-api-key` or as
 * `authorization: Bearer` (the SDK since 1.0 sends the latter; curl examples the former), an
 * `anthropic-version` of `2023-06-01` or `2026-10-21` (which refuses `temperature`, `top_p` and
 * `top_k` with a 400, as the migration guide says), a JSON body with `model`, `max_tokens` and
 * `messages`.
 *
 * Answers are recorded transcripts — the golden fixtures of the Messages format
 * (packages/engine/test/golden/llm/anthropic-messages/): `responses/<name>.json` for a request
 * without `stream`, `streams/<name>.sse` (sent verbatim, in small writes) for one with
 * `stream: true`, `errors/<name>.<status>.json` for either. A request picks its transcript by
 * the `x-emulator-transcript` header, else by its last user message's text when that is a
 * transcript's name, else `text`. The emulator itself is checked by the official
 * `@anthropic-ai/sdk` (e2e/test/llm-emulator-anthropic.test.ts).
 */

import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type http from 'node:http'
import { type Backend, startBackend } from '@portico/testkit/backends'

export const ANTHROPIC_FIXTURES = join(import.meta.dirname, '../../../packages/engine/test/golden/llm/anthropic-messages')
export const ANTHROPIC_TEST_KEY = 'sk-ant-test-portico'

export interface Transcript {
  /** The whole answer for a request without `stream`. */
  message?: Record<string, unknown>
  /** The raw SSE bytes for a request with `stream: true`. */
  stream?: string
  /** An error answer for either. */
  error?: { status: number, body: Record<string, unknown> }
  /** A stream that never ends: `message_start`, then a `ping` every 20 ms until the client goes. */
  endless?: boolean
}

/** Transcripts no fixture file holds, added to every emulator's set. */
export const BUILT_IN_TRANSCRIPTS: ReadonlyMap<string, Transcript> = new Map([['hostile-endless', { endless: true }]])

/** Every transcript under the fixture directory, by case name. */
export function loadAnthropicTranscripts (dir: string = ANTHROPIC_FIXTURES): Map<string, Transcript> {
  const out = new Map<string, Transcript>()
  const at = (name: string): Transcript => {
    let t = out.get(name)
    if (t === undefined) out.set(name, t = {})
    return t
  }
  const list = (sub: string, ext: string): string[] => readdirSync(join(dir, sub)).filter(f => f.endsWith(ext) && !f.endsWith('.neutral.json'))
  for (const f of list('responses', '.json')) at(f.slice(0, -'.json'.length)).message = JSON.parse(readFileSync(join(dir, 'responses', f), 'utf8'))
  for (const f of list('streams', '.sse')) at(f.slice(0, -'.sse'.length)).stream = readFileSync(join(dir, 'streams', f), 'utf8')
  for (const f of list('errors', '.json')) {
    const [name, status] = f.slice(0, -'.json'.length).split('.') as [string, string]
    at(name).error = { status: Number(status), body: JSON.parse(readFileSync(join(dir, 'errors', f), 'utf8')) }
  }
  return out
}

export interface AnthropicEmulator extends Backend {
  /** Parsed bodies of the `/v1/messages` requests received, in order. */
  bodies: Array<Record<string, unknown>>
  /** Headers of every request received, in order. */
  headers: http.IncomingHttpHeaders[]
}

export interface AnthropicEmulatorOptions {
  /** The key `x-api-key` must carry (default `ANTHROPIC_TEST_KEY`). */
  apiKey?: string
  transcripts?: Map<string, Transcript>
  /** Bytes per write of a stream (default 17: events and UTF-8 characters arrive split). */
  streamChunkBytes?: number
}

export const EMULATED_MODELS = [
  { type: 'model', id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2026-02-17T00:00:00Z' },
  { type: 'model', id: 'claude-haiku-4-5', display_name: 'Claude Haiku 4.5', created_at: '2025-10-15T00:00:00Z' }
]

const API_VERSIONS = new Set(['2023-06-01', '2026-10-21'])

let requestCounter = 0

export async function startAnthropicEmulator (options: AnthropicEmulatorOptions = {}): Promise<AnthropicEmulator> {
  const apiKey = options.apiKey ?? ANTHROPIC_TEST_KEY
  const transcripts = new Map([...BUILT_IN_TRANSCRIPTS, ...(options.transcripts ?? loadAnthropicTranscripts())])
  const chunkBytes = options.streamChunkBytes ?? 17
  const bodies: Array<Record<string, unknown>> = []
  const headers: http.IncomingHttpHeaders[] = []

  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c as Buffer))
    req.on('end', () => {
      headers.push(req.headers)
      const requestId = `req_emulator${String(++requestCounter).padStart(6, '0')}`
      const fail = (status: number, type: string, message: string): void => sendJson(res, status, requestId, { type: 'error', error: { type, message }, request_id: requestId })
      const path = (req.url ?? '').split('?')[0]
      // Authentication and version come before anything else, as at the real API.
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
      const key = req.headers['x-api-key'] ?? bearer
      if (key === undefined) return fail(401, 'authentication_error', 'x-api-key header is required')
      if (key !== apiKey) return fail(401, 'authentication_error', 'invalid x-api-key')
      const version = req.headers['anthropic-version']
      if (version === undefined) return fail(400, 'invalid_request_error', 'anthropic-version: header is required')
      if (!API_VERSIONS.has(String(version))) return fail(400, 'invalid_request_error', `anthropic-version: unknown version ${String(version)}`)
      if (req.method === 'GET' && path === '/v1/models') {
        return sendJson(res, 200, requestId, { data: EMULATED_MODELS, has_more: false, first_id: EMULATED_MODELS[0]!.id, last_id: EMULATED_MODELS.at(-1)!.id })
      }
      if (path !== '/v1/messages') return fail(404, 'not_found_error', `Not found: ${req.method ?? ''} ${path ?? ''}`)
      if (req.method !== 'POST') return fail(405, 'invalid_request_error', `Method Not Allowed: ${req.method ?? ''}`)
      let body: Record<string, unknown>
      try {
        const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object')
        body = parsed as Record<string, unknown>
      } catch {
        return fail(400, 'invalid_request_error', 'There was an issue with the request body: it is not a JSON object')
      }
      bodies.push(body)
      if (typeof body.model !== 'string') return fail(400, 'invalid_request_error', 'model: Field required')
      if (typeof body.max_tokens !== 'number') return fail(400, 'invalid_request_error', 'max_tokens: Field required')
      if (!Array.isArray(body.messages) || body.messages.length === 0) return fail(400, 'invalid_request_error', 'messages: at least one message is required')
      if (version === '2026-10-21') {
        for (const removed of ['temperature', 'top_p', 'top_k']) {
          if (removed in body) return fail(400, 'invalid_request_error', `${removed}: Extra inputs are not permitted in API version 2026-10-21`)
        }
      }

      const name = pickTranscript(req.headers, body, transcripts)
      const transcript = transcripts.get(name)
      if (transcript === undefined) return fail(400, 'invalid_request_error', `emulator: no transcript "${name}"`)
      if (transcript.error !== undefined) return sendJson(res, transcript.error.status, requestId, { ...transcript.error.body, request_id: requestId })
      if (body.stream === true && transcript.endless === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': requestId })
        res.write(`event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_endless', type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } })}\n\n`)
        const timer = setInterval(() => res.write('event: ping\ndata: {"type": "ping"}\n\n'), 20)
        res.on('close', () => clearInterval(timer))
        return
      }
      if (body.stream === true) {
        if (transcript.stream === undefined) return fail(400, 'invalid_request_error', `emulator: transcript "${name}" has no recorded stream`)
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': requestId })
        writeInPieces(res, Buffer.from(transcript.stream), chunkBytes)
        return
      }
      if (transcript.message === undefined) return fail(400, 'invalid_request_error', `emulator: transcript "${name}" has no recorded message`)
      sendJson(res, 200, requestId, transcript.message)
    })
  })
  return { ...backend, bodies, headers }
}

function pickTranscript (headers: http.IncomingHttpHeaders, body: Record<string, unknown>, transcripts: Map<string, Transcript>): string {
  const header = headers['x-emulator-transcript']
  if (typeof header === 'string') return header
  const messages = body.messages as Array<{ role?: unknown, content?: unknown }>
  const lastUser = [...messages].reverse().find(m => m.role === 'user')
  const text = typeof lastUser?.content === 'string'
    ? lastUser.content
    : Array.isArray(lastUser?.content) ? lastUser.content.map(b => typeof b?.text === 'string' ? b.text : '').join('') : ''
  return transcripts.has(text.trim()) ? text.trim() : 'text'
}

function sendJson (res: http.ServerResponse, status: number, requestId: string, body: Record<string, unknown>): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'request-id': requestId, ...(status === 429 || status === 529 ? { 'retry-after': '1' } : {}) })
  res.end(text)
}

/** Writes `bytes` in pieces, each on its own tick, so the client reads them as separate chunks. */
function writeInPieces (res: http.ServerResponse, bytes: Buffer, size: number): void {
  let at = 0
  const next = (): void => {
    if (res.destroyed) return
    if (at >= bytes.length) {
      res.end()
      return
    }
    res.write(bytes.subarray(at, at + size))
    at += size
    setImmediate(next)
  }
  next()
}
