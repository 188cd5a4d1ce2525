/**
 * The request side of an `ai` backend. The client's path tells its format and operation
 * (llm/formats/index.ts); the backend's provider adapter (llm/providers/) tells the
 * provider's format, path and authorisation.
 *
 * - Same format on both sides (pass-through): the body is read whole, checked, `model`
 *   replaced when the backend names one and, for OpenAI streams,
 *   `stream_options.include_usage` turned on (so the last event carries the token usage).
 * - Different formats (translation): the body is decoded into the neutral shape
 *   (llm/canonical.ts) and encoded in the provider's format; what cannot be expressed is
 *   refused with a 400 in the client format's error shape, naming the field. The answer is
 *   translated back by llm/translate-handler.ts.
 *
 * Either way the path becomes the provider's, `Host` the provider's, and
 * `accept-encoding: identity` is asked for (a compressed answer could not be read). What it
 * learned goes into `ctx.llm`; the response side fills in the usage.
 */

import type { LlmLimitCall, LlmTokenRefusal, RequestContext } from '../request/context.ts'
import type { CompiledPolicy } from '../request/policy.ts'
import type { AiBackendSpecIR } from '../ir/types.ts'
import type { ChatRequest, WireFormat } from './canonical.ts'
import type { PromptGuardIR } from '../ir/types.ts'
import { guardRequest } from './guard/guard.ts'
import type { ProviderAdapter, ProviderRequest } from './provider.ts'
import { isTranslationError, translationError, type TranslationError } from './canonical.ts'
import { bodyReadFailure, readRequestBody } from '../http/request-body.ts'
import { authority } from '../util/host-port.ts'
import { clientEndpoint, formatByName } from './formats/index.ts'
import { passthroughHeader, providerAdapter } from './providers/index.ts'
import { estimateEmbeddingTokens, estimatePromptTokens } from './tokens.ts'
import { applyBodyEdit } from './body-edits.ts'
import { inputCost } from './cost.ts'
import type { LlmAnswerRewrite } from './rewrite-handler.ts'
import { decodeBedrockEmbeddings, decodeModelList, decodeVertexEmbeddings, encodeBedrockEmbeddings, encodeModelList, encodeVertexEmbeddings, type ModelListShape } from './operations.ts'
import { PorticoError } from '../util/errors.ts'

/** Largest chat completion request accepted (413 above): long conversations are big. */
export const LLM_REQUEST_LIMIT = 8 * 1024 * 1024

/** A request the proxy refuses before the provider sees it. */
export interface LlmRequestError {
  status: number
  body: string
  headers?: Record<string, string>
  /** The access log's reason: RateLimit for a `tokenize` refusal, BackendAuth for a passthrough without a validated token, Guardrail for a promptGuard refusal (anything else is logged InvalidRequest). */
  reason?: string
  /** The rate limit policy that refused the request (metrics count it `limited`). */
  policy?: CompiledPolicy
}

/** What the response side needs to translate the answer back (set only when formats differ). */
export interface LlmTranslation {
  client: WireFormat
  provider: WireFormat
  streaming: boolean
  requestModel: string
  /** The model the provider was asked for (the body may not say: Bedrock's is in the path). */
  model: string
  /** `promptGuard.response` of the backend, run on the neutral answer (llm/guard/guard.ts). */
  responseGuards?: PromptGuardIR[]
}

const TRANSLATIONS = new WeakMap<RequestContext, LlmTranslation>()
/** Pass-through calls whose usage the format's own decoder reads (llm/format-usage-handler.ts): Gemini to Gemini, Bedrock to Bedrock. */
const USAGE_FORMATS = new WeakMap<RequestContext, WireFormat>()
/** Model lists and embeddings whose answer is rewritten for the client (llm/rewrite-handler.ts). */
const REWRITES = new WeakMap<RequestContext, LlmAnswerRewrite>()
/** The client's own body, kept for a retry: `ctx.requestBody` then holds the provider's. */
const CLIENT_BODIES = new WeakMap<RequestContext, Buffer>()
const ADAPTERS = new WeakMap<AiBackendSpecIR, ProviderAdapter>()
/** The request as the guards left it, for a retry to the same backend (the guards ran once). */
const GUARDED = new WeakMap<RequestContext, { spec: AiBackendSpecIR, request: ChatRequest }>()

export function llmTranslation (ctx: RequestContext): LlmTranslation | undefined {
  return TRANSLATIONS.get(ctx)
}

export function llmUsageFormat (ctx: RequestContext): WireFormat | undefined {
  return USAGE_FORMATS.get(ctx)
}

export function llmAnswerRewrite (ctx: RequestContext): LlmAnswerRewrite | undefined {
  return REWRITES.get(ctx)
}

function adapterOf (spec: AiBackendSpecIR): ProviderAdapter {
  let adapter = ADAPTERS.get(spec)
  if (adapter === undefined) {
    const made = providerAdapter(spec)
    // The config refused such a backend at load; an IR built elsewhere reaches this.
    if (typeof made === 'string') throw new PorticoError('PORTICO_INVALID_IR', made)
    adapter = made
    ADAPTERS.set(spec, adapter)
  }
  return adapter
}

const JSON_TYPE = { 'content-type': 'application/json' }

function formatError (format: WireFormat, error: TranslationError): LlmRequestError {
  const extra = format.errorHeaders?.(error)
  return { status: error.status, body: JSON.stringify(format.encodeError(error)), headers: extra === undefined ? JSON_TYPE : { ...JSON_TYPE, ...extra } }
}

/**
 * The rate limits decided once the request is read (keyed token buckets and cost buckets,
 * policy/local-rate-limit.ts): each sees the call (its model) and admits it or says why not —
 * answered 429 in the client format's error shape. Run once per request: a retry or the next
 * provider of failover groups is the same request, already admitted and charged once.
 */
async function admitLlmLimits (ctx: RequestContext, clientFormat: string, call: LlmLimitCall): Promise<LlmRequestError | null> {
  const admissions = ctx.llmAdmissions
  if (admissions === null) return null
  ctx.llmAdmissions = null
  for (const admit of admissions) {
    let refusal = admit(call)
    if (refusal instanceof Promise) refusal = await refusal
    if (refusal !== null) return limitRefusal(formatByName(clientFormat as WireFormat['name']), refusal)
  }
  return null
}

/** A rate limit's refusal in the client format's error shape: a local bucket's with x-ratelimit-* and retry-after, a service's with its own headers. */
function limitRefusal (client: WireFormat | undefined, refusal: LlmTokenRefusal): LlmRequestError {
  let headers: Record<string, string>
  if (refusal.headers !== undefined) headers = refusal.headers
  else {
    headers = { 'x-ratelimit-limit': refusal.limit, 'x-ratelimit-remaining': refusal.remaining }
    if (refusal.retryAfterS !== null) {
      headers['x-ratelimit-reset'] = String(refusal.retryAfterS)
      headers['retry-after'] = String(refusal.retryAfterS)
    }
  }
  return { ...tokenizeRefusal(client, refusal.status ?? 429, refusal.message, headers), policy: refusal.policy }
}

/**
 * The pre-call check of `tokenize: true`: the prompt's tokens estimated with o200k_base
 * (llm/tokens.ts) — and, with pricing, what they cost at the model's input rate — against
 * every tokens and cost bucket of the local rate limits that admitted the request — nothing
 * taken there (the answer's real usage is, as without the estimate) — and then sent as hits
 * to the rate limit services whose token descriptors admitted it, which take them (the answer
 * then adds only the rest: policy/remote-rate-limit.ts). A request that does not fit gets a
 * 429 in the client format's error shape. A body the client format cannot decode is not
 * estimated (its own error comes later).
 */
async function checkTokenEstimate (ctx: RequestContext, clientFormat: string, operation: string, body: Record<string, unknown>, model: string): Promise<LlmRequestError | null> {
  const client = formatByName(clientFormat as WireFormat['name'])
  let estimate: number
  if (operation === 'embeddings') estimate = estimateEmbeddingTokens(body.input)
  else {
    if (client === undefined) return null
    const neutral = client.decodeRequest(body)
    if (isTranslationError(neutral)) return null
    estimate = estimatePromptTokens(neutral)
  }
  const pricing = ctx.backend?.ai?.pricing
  const cost = pricing === undefined ? null : inputCost(pricing, model, estimate)
  for (const check of ctx.llmTokenChecks ?? []) {
    const refusal = check({ tokens: estimate, cost })
    if (refusal === null) continue
    ctx.tracer?.emit({ type: 'policy', kind: 'localRateLimit', result: { type: 'deny', details: `tokenize: ${refusal.message}` } }, { severity: 'warn' })
    return limitRefusal(client, refusal)
  }
  for (const reserve of ctx.llmTokenReservations ?? []) {
    const taken = await reserve(estimate)
    if (taken.outcome === 'ok') continue
    // The service's headers (RateLimit-*), repeated names joined as HTTP allows.
    const headers: Record<string, string> = {}
    for (const [name, value] of taken.headers) {
      const key = name.toLowerCase()
      headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`
    }
    const refused = taken.outcome === 'overLimit'
      ? tokenizeRefusal(client, 429, `rate limit exceeded: the prompt is about ${estimate} tokens, over what the token budget has left`, headers)
      : tokenizeRefusal(client, 500, 'rate limit failed', headers)
    return { ...refused, policy: taken.policy }
  }
  return null
}

/** A `tokenize` refusal, in the client format's error shape when it has one. */
function tokenizeRefusal (client: WireFormat | undefined, status: 429 | 500, message: string, headers: Record<string, string>): LlmRequestError {
  if (client === undefined) return { status, body: message, headers, reason: 'RateLimit' }
  const error = status === 429 ? translationError(429, 'rate_limit', message) : translationError(500, 'api_error', message)
  return { status, body: JSON.stringify(client.encodeError(error)), headers: { ...headers, ...JSON_TYPE }, reason: 'RateLimit' }
}

/**
 * Prepares the request for `ctx.backend` (kind `ai`). Returns null when it may go on, or
 * the answer to give instead.
 */
export async function prepareLlmRequest (ctx: RequestContext): Promise<LlmRequestError | null> {
  const backend = ctx.backend!
  const spec = backend.ai!
  const adapter = adapterOf(spec)
  const endpoint = clientEndpoint(ctx.originalPath)
  TRANSLATIONS.delete(ctx)
  REWRITES.delete(ctx)
  USAGE_FORMATS.delete(ctx)
  ctx.upstreamQuery = null

  if (endpoint.operation === 'models') {
    // A listing: no body and no usage. An Anthropic SDK (`anthropic-version` sent) gets
    // Anthropic's list, any other client OpenAI's; passed through when the provider's is the
    // same shape, rewritten otherwise.
    const anthropicClient = ctx.headers['anthropic-version'] !== undefined
    const client = formatByName(anthropicClient ? 'anthropic-messages' : 'openai-chat')!
    if (ctx.method !== 'GET') return { ...formatError(client, translationError(405, 'invalid_request', `${ctx.method} on a models path (GET lists the models)`)), headers: { ...JSON_TYPE, allow: 'GET' } }
    ctx.llm = null
    const wanted: ModelListShape = anthropicClient ? 'anthropic' : 'openai'
    const given: ModelListShape = adapter.format === 'anthropic-messages' ? 'anthropic' : 'openai'
    if (wanted !== given) {
      REWRITES.set(ctx, {
        client,
        provider: formatByName(adapter.format)!,
        answer: json => {
          const models = decodeModelList(given, json)
          return isTranslationError(models) ? models : { body: encodeModelList(wanted, models, adapter.system), usage: null }
        }
      })
    }
    return await sendTo(ctx, spec, adapter, { operation: 'models', model: spec.model ?? '', streaming: false, body: Buffer.alloc(0), headers: ctx.headers as Record<string, string> }, client)
  }

  if (ctx.method !== 'POST') return { status: 405, body: `invalid LLM request: ${ctx.method} is not a chat completion (POST with a JSON body)`, headers: { allow: 'POST' } }
  const read = await readRequestBody(ctx, { maxBytes: LLM_REQUEST_LIMIT, whenTooLarge: 'drain' })
  if (read === 'too-large') return { status: 413, body: `LLM request larger than ${LLM_REQUEST_LIMIT} bytes` }
  if (read === 'none') return { status: 400, body: 'invalid LLM request: no body (a JSON chat completion request is expected)' }
  if (read instanceof Error) return bodyReadFailure(read)
  let clientBody = CLIENT_BODIES.get(ctx)
  if (clientBody === undefined) {
    clientBody = ctx.requestBody!
    CLIENT_BODIES.set(ctx, clientBody)
  }

  let request: unknown
  try {
    request = JSON.parse(clientBody.toString('utf8'))
  } catch (err) {
    return { status: 400, body: `invalid LLM request: body is not JSON (${(err as Error).message})` }
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) return { status: 400, body: 'invalid LLM request: body must be a JSON object' }
  let body = request as Record<string, unknown>
  // Gemini and Bedrock clients name the model and ask for a stream in the path, not the body.
  const inPath = endpoint.model !== undefined
  const requestModel = endpoint.model ?? (typeof body.model === 'string' ? body.model : '')
  let streaming = endpoint.streaming ?? body.stream === true
  const operation = endpoint.operation
  if (inPath) {
    // The client's query is its own API's (Gemini's `alt=sse`, `key=` — a credential): never
    // forwarded; a provider path that needs a query gives its own.
    ctx.upstreamQuery = ''
    if (endpoint.format === 'bedrock-converse') {
      // An AWS SDK's signature and session token are AWS's business: never sent to a provider
      // (Bedrock's adapter signs anew; others have their own keys).
      for (const name of Object.keys(ctx.headers)) if (name.startsWith('x-amz-')) delete ctx.headers[name]
      if (/^AWS4-HMAC-SHA256 /.test(String(ctx.headers.authorization ?? ''))) delete ctx.headers.authorization
    }
    if (endpoint.format === 'gemini' && streaming && !/(^|&)alt=sse(&|$)/.test(ctx.query)) {
      // Without alt=sse Google streams one JSON array; the Gemini stream encoder writes SSE.
      return formatError(formatByName('gemini')!, translationError(400, 'invalid_request', 'streamGenerateContent is served with alt=sse only (server-sent events)', 'alt'))
    }
  }
  // A model's transformations (docs/models.md): edits of the client's body before conversion.
  const edits = spec.transformations
  if (edits?.beforeConversion !== undefined) traceEdits(ctx, 'beforeConversion', applyBodyEdit(ctx, edits.beforeConversion, requestModel, body))
  // Rate limits decided now that the model is known (keyed token buckets, cost budgets, token
  // descriptors naming llm); only requests that have any pay for the step.
  if (ctx.llmAdmissions !== null) {
    const limited = await admitLlmLimits(ctx, endpoint.format, { requestModel, model: spec.model ?? requestModel, streaming, operation, provider: spec.provider })
    if (limited !== null) return limited
  }
  // `tokenize: true`: a request whose estimated prompt does not fit in a tokens bucket or a
  // rate limit service's token budget is refused before any byte reaches the provider (only
  // when such a limit admitted it).
  if (spec.tokenize === true && ((ctx.llmTokenChecks?.length ?? 0) > 0 || (ctx.llmTokenReservations?.length ?? 0) > 0)) {
    const refused = await checkTokenEstimate(ctx, endpoint.format, operation, body, spec.model ?? requestModel)
    if (refused !== null) return refused
  }
  // A `custom` provider always goes through the neutral shape, its format's own too: the
  // request is checked field by field and the answer rebuilt (use openAI + hostOverride for a
  // byte-exact pass-through).
  const native = endpoint.format === adapter.format || adapter.passThrough?.includes(endpoint.format) === true
  // With a promptGuard the request goes through the neutral shape even when the formats are
  // the same: the guards read and mask the neutral messages, whatever the client's format.
  const guards = spec.promptGuard
  if (operation === 'chat' && (!native || spec.provider === 'custom' || guards !== undefined)) {
    const client = formatByName(endpoint.format)
    if (client === undefined) return { status: 404, body: `invalid LLM request: the ${endpoint.format} client format is not available in this build` }
    const provider = formatByName(adapter.format)!
    let neutral = client.decodeRequest(body)
    if (isTranslationError(neutral)) return formatError(client, neutral)
    if (inPath) {
      neutral.model = requestModel
      neutral.stream = streaming
    }
    const model = spec.model ?? neutral.model
    if (model === '') return formatError(client, translationError(400, 'invalid_request', 'model is required', 'model'))
    if (guards !== undefined && guards.request.length > 0) {
      const done = GUARDED.get(ctx)
      if (done !== undefined && done.spec === spec) neutral = done.request
      else {
        const refused = await guardRequest(ctx, model, guards.request, neutral)
        if (refused !== null) return { ...formatError(client, refused), reason: 'Guardrail' }
        GUARDED.set(ctx, { spec, request: neutral })
      }
    }
    const encoded = provider.encodeRequest(neutral, model)
    if (isTranslationError(encoded)) return formatError(client, encoded)
    body = encoded
    streaming = neutral.stream
    TRANSLATIONS.set(ctx, { client, provider, streaming, requestModel, model, ...(guards !== undefined && guards.response.length > 0 ? { responseGuards: guards.response } : {}) })
  } else if (operation === 'embeddings' && adapter.embeddings !== undefined) {
    const model = spec.model ?? requestModel
    const client = formatByName('openai-chat')!
    if (model === '') return formatError(client, translationError(400, 'invalid_request', 'model is required', 'model'))
    const clientRequest = body
    const encoded = adapter.embeddings === 'bedrock-invoke' ? encodeBedrockEmbeddings(body, model) : encodeVertexEmbeddings(body)
    if (isTranslationError(encoded)) return formatError(client, encoded)
    body = encoded
    REWRITES.set(ctx, {
      client,
      provider: formatByName(adapter.format)!,
      answer: (json, headers) => {
        const header = headers['x-amzn-bedrock-input-token-count']
        const out = adapter.embeddings === 'bedrock-invoke' ? decodeBedrockEmbeddings(json, clientRequest, model, typeof header === 'string' ? header : undefined) : decodeVertexEmbeddings(json, clientRequest, model)
        if (isTranslationError(out)) return out
        return { body: out.body, usage: { inputTokens: out.promptTokens, outputTokens: 0, totalTokens: out.promptTokens, responseModel: model } }
      }
    })
  } else {
    if (spec.model === undefined && requestModel === '') return { status: 400, body: `invalid LLM request: model is required (or set provider.${spec.provider}.model on the backend)` }
    if (spec.model !== undefined && !inPath) body.model = spec.model
    // The generic usage reader knows OpenAI's and Anthropic's names; these formats' answers are read by their own decoder.
    if (inPath && operation === 'chat') USAGE_FORMATS.set(ctx, formatByName(endpoint.format)!)
    if (streaming && endpoint.format === 'openai-chat' && operation === 'chat') {
      const options = body.stream_options
      body.stream_options = { ...(options !== null && typeof options === 'object' ? options : {}), include_usage: true }
    }
  }

  // ... and of the provider's body after it.
  if (edits?.afterConversion !== undefined) traceEdits(ctx, 'afterConversion', applyBodyEdit(ctx, edits.afterConversion, requestModel, body))

  const model = inPath || REWRITES.has(ctx)
    ? (TRANSLATIONS.get(ctx)?.model ?? spec.model ?? requestModel)
    : typeof body.model === 'string' ? body.model : TRANSLATIONS.get(ctx)?.model ?? spec.model ?? requestModel
  // The provider's last say on its body, translated or passed through alike (Bedrock's
  // guardrail; Claude on Vertex: no `model`, `anthropic_version` in the body), before it is
  // serialised and signed.
  if (adapter.adaptBody !== undefined) body = adapter.adaptBody(body, { operation, model, streaming })
  const out = Buffer.from(JSON.stringify(body))
  ctx.requestBody = out
  ctx.headers['content-type'] = 'application/json'
  ctx.headers['content-length'] = String(out.length)
  delete ctx.headers['transfer-encoding']
  ctx.headers['accept-encoding'] = 'identity'
  // What the provider is sent: the client's own format when passed through, else the adapter's.
  const sentFormat = TRANSLATIONS.has(ctx) || REWRITES.has(ctx) ? adapter.format : endpoint.format
  ctx.llm = { system: adapter.system, operation, inputFormat: endpoint.format, providerFormat: sentFormat, requestModel, model, streaming, usage: null, firstChunkAt: 0 }
  return await sendTo(ctx, spec, adapter, { operation, format: sentFormat, model, streaming, body: out, headers: ctx.headers as Record<string, string> }, formatByName(endpoint.format))
}

/** The trace's word on a step of body edits: applied, and which fields' expressions failed (left as they were). */
function traceEdits (ctx: RequestContext, step: string, failed: Array<{ field: string, error: string }>): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'transformation', result: { type: 'apply', details: failed.length === 0 ? `model transformations ${step}` : `model transformations ${step}; left unchanged: ${failed.map(f => `${f.field} (${f.error})`).join(', ')}` } }, failed.length > 0 ? { severity: 'warn' } : undefined)
}

/** Sets the provider's path, Host and authorisation (the adapter writes into `ctx.headers`, the headers sent); traces the request. */
async function sendTo (ctx: RequestContext, spec: AiBackendSpecIR, adapter: ProviderAdapter, request: ProviderRequest, client?: WireFormat): Promise<LlmRequestError | null> {
  const backend = ctx.backend!
  const { host, port } = backend.endpoints[0]!
  ctx.headers.host = authority(host, port, backend.protocol)
  let target: string
  try {
    target = adapter.path(request)
  } catch (err) {
    // An operation the provider has no API for (Anthropic's embeddings, Bedrock's model list).
    const e = isTranslationError(err) ? err : translationError(404, 'not_found', (err as Error).message)
    return client !== undefined ? formatError(client, e) : { status: e.status, body: e.message }
  }
  const q = target.indexOf('?')
  ctx.path = q === -1 ? target : target.slice(0, q)
  // A provider's own query (Azure's api-version) replaces the client's; a signed request
  // (Bedrock) has none but its own.
  if (q !== -1) ctx.upstreamQuery = target.slice(q + 1)
  else if (adapter.ownQuery === true) ctx.upstreamQuery = ''
  if (spec.passthrough === true) {
    // backendAuth.passthrough: the token a jwtAuth / apiKey policy validated, in the provider's
    // key header (the client's credential headers were removed by the backend's header policy).
    const credential = ctx.auth.credential
    const header = passthroughHeader(spec, credential?.kind ?? 'jwt')
    if (credential == null || header === null) {
      const e = translationError(401, 'authentication', 'the request carries no token that the gateway validated (backendAuth passthrough)')
      return { ...(client !== undefined ? formatError(client, e) : { status: e.status, body: e.message }), reason: 'BackendAuth' }
    }
    request.headers[header.header] = header.bearer ? `Bearer ${credential.token}` : credential.token
  }
  try {
    await adapter.authorize(request, { host, port, protocol: backend.protocol })
  } catch (err) {
    // The gateway's own credentials failed (never the client's fault): said in the client's format.
    const e = isTranslationError(err) ? err : translationError(500, 'api_error', `the gateway could not authorise the request to provider ${spec.provider}: ${(err as Error).message}`)
    return client !== undefined ? formatError(client, e) : { status: e.status, body: e.message }
  }
  const call = ctx.llm
  if (call !== null) {
    // Shown once formats matter: translated, or not OpenAI chat on both sides (the event of a
    // plain OpenAI pass-through stays as it was before formats were told apart).
    const formats = TRANSLATIONS.has(ctx) || call.inputFormat !== 'openai-chat' || call.providerFormat !== 'openai-chat' ? { inputFormat: call.inputFormat, providerFormat: call.providerFormat } : {}
    ctx.tracer?.emit({ type: 'llmRequest', provider: spec.provider, ...formats, requestModel: call.requestModel, model: call.model, streaming: call.streaming, path: ctx.path })
  }
  return null
}
