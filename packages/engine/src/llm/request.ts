/**
 * The request side of an `ai` backend: the client's chat completion request (OpenAI's
 * format) is read whole, checked, and prepared for the provider — `model` replaced when the
 * backend names one, `stream_options.include_usage` turned on for streams (so the last event
 * carries the token usage), the path set to the provider's, `Host` set to the provider's and
 * `accept-encoding: identity` asked for (a compressed answer's usage could not be read).
 *
 * What it learned goes into `ctx.llm`; the response side (llm/usage.ts) fills in the usage.
 */

import type { RequestContext } from '../request/context.ts'
import type { LlmCall } from '../request/calls.ts'
import type { AiBackendSpecIR } from '../ir/types.ts'
import { bodyReadFailure, readRequestBody } from '../http/request-body.ts'
import { authority } from '../util/host-port.ts'

/** Largest chat completion request accepted (413 above): long conversations are big. */
export const LLM_REQUEST_LIMIT = 8 * 1024 * 1024

/** A request the proxy refuses before the provider sees it. */
export interface LlmRequestError {
  status: number
  body: string
  headers?: Record<string, string>
}

/**
 * Prepares the request for `ctx.backend` (kind `ai`). Returns null when it may go on, or
 * the answer to give instead.
 */
export async function prepareLlmRequest (ctx: RequestContext): Promise<LlmRequestError | null> {
  const backend = ctx.backend!
  const spec = backend.ai!
  if (ctx.method !== 'POST') return { status: 405, body: `invalid LLM request: ${ctx.method} is not a chat completion (POST with a JSON body)`, headers: { allow: 'POST' } }
  const read = await readRequestBody(ctx, { maxBytes: LLM_REQUEST_LIMIT, whenTooLarge: 'drain' })
  if (read === 'too-large') return { status: 413, body: `LLM request larger than ${LLM_REQUEST_LIMIT} bytes` }
  if (read === 'none') return { status: 400, body: 'invalid LLM request: no body (a JSON chat completion request is expected)' }
  if (read instanceof Error) return bodyReadFailure(read)

  let request: unknown
  try {
    request = JSON.parse(ctx.requestBody!.toString('utf8'))
  } catch (err) {
    return { status: 400, body: `invalid LLM request: body is not JSON (${(err as Error).message})` }
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) return { status: 400, body: 'invalid LLM request: body must be a JSON object' }
  const body = request as Record<string, unknown>
  const requestModel = typeof body.model === 'string' ? body.model : ''
  if (spec.model === undefined && requestModel === '') return { status: 400, body: 'invalid LLM request: model is required (or set provider.openAI.model on the backend)' }
  if (spec.model !== undefined) body.model = spec.model
  const streaming = body.stream === true
  if (streaming) {
    const options = body.stream_options
    body.stream_options = { ...(options !== null && typeof options === 'object' ? options : {}), include_usage: true }
  }

  const out = Buffer.from(JSON.stringify(body))
  ctx.requestBody = out
  ctx.headers['content-type'] = 'application/json'
  ctx.headers['content-length'] = String(out.length)
  delete ctx.headers['transfer-encoding']
  ctx.headers['accept-encoding'] = 'identity'
  const { host, port } = backend.endpoints[0]!
  ctx.headers.host = authority(host, port, backend.protocol)
  ctx.path = spec.path
  ctx.llm = { system: systemOf(spec), requestModel, model: body.model as string, streaming, usage: null, firstChunkAt: 0 }
  ctx.tracer?.emit({ type: 'llmRequest', provider: spec.provider, requestModel, model: ctx.llm.model, streaming, path: spec.path })
  return null
}

function systemOf (spec: AiBackendSpecIR): LlmCall['system'] {
  switch (spec.provider) {
    case 'openAI': return 'openai'
  }
}

