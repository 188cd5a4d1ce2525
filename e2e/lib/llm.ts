/**
 * An OpenAI-compatible chat completions server on loopback, written to OpenAI's API
 * reference (the shapes vLLM, Ollama and llama.cpp's server also answer with): `POST
 * /v1/chat/completions` answers a `chat.completion` object, or with `stream: true` a
 * server-sent event stream of `chat.completion.chunk` objects ending in `data: [DONE]`,
 * whose last chunk carries `usage` when `stream_options.include_usage` is true. Token counts
 * are deterministic: one token per whitespace-separated word (prompt: every message's
 * content; completion: the reply). Errors use OpenAI's `{error: {message, type, code}}`.
 * Like real providers it compresses the answer when the client accepts gzip.
 */

import { gzipSync } from 'node:zlib'
import type http from 'node:http'
import { type Backend, startBackend } from '@portico/testkit/backends'

export interface LlmServer extends Backend {
  /** Parsed JSON bodies received, in order. */
  bodies: Array<Record<string, unknown>>
  /** Request headers received, in order. */
  headers: http.IncomingHttpHeaders[]
}

export interface LlmServerOptions {
  /** The assistant's reply (its word count is the completion tokens). */
  reply?: string
  /** The model named in answers; default: the request's model with a `-2024` version suffix. */
  responseModel?: (requestModel: string) => string
}

export function countTokens (text: string): number {
  return text.split(/\s+/).filter(w => w !== '').length
}

export function promptTokens (messages: Array<{ content: string }>): number {
  return messages.reduce((n, m) => n + countTokens(m.content), 0)
}

export async function startLlmServer (options: LlmServerOptions = {}): Promise<LlmServer> {
  const reply = options.reply ?? 'The quick brown fox jumps over the lazy dog again'
  const bodies: Array<Record<string, unknown>> = []
  const headers: http.IncomingHttpHeaders[] = []
  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c as Buffer))
    req.on('end', () => {
      headers.push(req.headers)
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return error(res, 404, `unknown path ${req.method ?? ''} ${req.url ?? ''}`, 'invalid_request_error', 'unknown_url')
      let body: Record<string, unknown>
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
      } catch {
        return error(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null)
      }
      bodies.push(body)
      const model = body.model
      if (typeof model !== 'string' || model === '') return error(res, 400, 'you must provide a model parameter', 'invalid_request_error', null)
      const messages = body.messages as Array<{ content: string }> | undefined
      if (!Array.isArray(messages) || messages.length === 0) return error(res, 400, "Missing required parameter: 'messages'.", 'invalid_request_error', 'missing_required_parameter')
      const usage = { prompt_tokens: promptTokens(messages), completion_tokens: countTokens(reply) }
      const answerModel = options.responseModel?.(model) ?? `${model}-2024`
      const common = { id: 'chatcmpl-portico-test', created: Math.floor(Date.now() / 1000), model: answerModel, system_fingerprint: 'fp_test' }
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
        const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true
        const send = (chunk: Record<string, unknown>): void => { res.write(`data: ${JSON.stringify({ ...common, object: 'chat.completion.chunk', ...chunk, ...(includeUsage ? { usage: chunk.usage ?? null } : {}) })}\n\n`) }
        send({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] })
        for (const word of reply.split(' ')) send({ choices: [{ index: 0, delta: { content: `${word} ` }, logprobs: null, finish_reason: null }] })
        send({ choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] })
        if (includeUsage) send({ choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })
        res.end('data: [DONE]\n\n')
        return
      }
      json(req, res, 200, {
        ...common,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: reply, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }
      })
    })
  })
  return Object.assign(backend, { bodies, headers })
}

function json (req: http.IncomingMessage, res: http.ServerResponse, status: number, value: unknown): void {
  const text = Buffer.from(JSON.stringify(value))
  if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
    res.writeHead(status, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(gzipSync(text))
    return
  }
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(text)
}

function error (res: http.ServerResponse, status: number, message: string, type: string, code: string | null): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ error: { message, type, param: null, code } }))
}
