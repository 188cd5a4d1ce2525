/**
 * The guards that ask a service: a webhook (Portico's JSON, documented in docs/llm.md
 * "Guardrails") and OpenAI's moderation endpoint. Each call has a timeout and a bounded
 * answer; anything not as documented is a failure, which the guard's failureMode turns into
 * a pass (open) or a refusal (closed).
 */

import type { PromptGuardIR } from '../../ir/types.ts'

export type WebhookGuardIR = Extract<PromptGuardIR, { kind: 'webhook' }>
export type ModerationGuardIR = Extract<PromptGuardIR, { kind: 'openAIModeration' }>

/** A text the guard sees, with the role of the turn it belongs to. */
export interface GuardMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string
}

export type ServiceVerdict =
  | { action: 'pass' }
  | { action: 'mask', messages: string[] }
  | { action: 'reject', reason?: string }

/** A guard service that could not be used: timeout, connection, status, an answer not as documented. */
export class GuardServiceError extends Error {}

/** POSTs JSON with a timeout; the answer's status and parsed JSON, read up to `maxBytes`. */
async function postJson (url: string, body: unknown, options: { timeoutMs: number, maxBytes: number, headers?: Record<string, string> }): Promise<{ status: number, json: unknown }> {
  const where = new URL(url).origin
  let res: Response
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...options.headers },
      body: JSON.stringify(body),
      redirect: 'error',
      signal: AbortSignal.timeout(options.timeoutMs)
    })
  } catch (err) {
    const e = err as Error
    throw new GuardServiceError(e.name === 'TimeoutError' ? `${where} did not answer within ${options.timeoutMs}ms` : `${where} could not be reached (${(e.cause as Error | undefined)?.message ?? e.message})`)
  }
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    if (res.body !== null) {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        size += chunk.length
        if (size > options.maxBytes) {
          await res.body.cancel().catch(() => {})
          throw new GuardServiceError(`${where} answered more than ${options.maxBytes} bytes`)
        }
        chunks.push(chunk)
      }
    }
  } catch (err) {
    if (err instanceof GuardServiceError) throw err
    throw new GuardServiceError(`${where}'s answer was cut (${(err as Error).message})`)
  }
  let json: unknown = null
  try {
    json = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {}
  return { status: res.status, json }
}

/**
 * The webhook: asked `{direction, model, messages: [{role, content}]}` (one entry per text:
 * a system prompt, a message's text part, a tool result's text), it answers
 * `{action: "pass"}`, `{action: "mask", messages: [{content}, ...]}` (as many entries, in
 * the same order: each text replaced) or `{action: "reject", reason?}`.
 */
export async function askWebhook (guard: WebhookGuardIR, direction: 'request' | 'response', model: string, messages: GuardMessage[]): Promise<ServiceVerdict> {
  const { status, json } = await postJson(guard.url, { direction, model, messages }, { timeoutMs: guard.timeoutMs, maxBytes: guard.maxResponseBytes })
  const where = new URL(guard.url).origin
  if (status !== 200) throw new GuardServiceError(`${where} answered ${status}`)
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new GuardServiceError(`${where} answered no JSON object`)
  const answer = json as Record<string, unknown>
  if (answer.action === 'pass') return { action: 'pass' }
  if (answer.action === 'reject') {
    const reason = typeof answer.reason === 'string' ? answer.reason.slice(0, 512) : undefined
    return reason !== undefined ? { action: 'reject', reason } : { action: 'reject' }
  }
  if (answer.action === 'mask') {
    const list = answer.messages
    if (!Array.isArray(list) || list.length !== messages.length) throw new GuardServiceError(`${where} answered mask without messages for each of the ${messages.length} sent`)
    const texts: string[] = []
    for (const m of list) {
      const content = m !== null && typeof m === 'object' ? (m as Record<string, unknown>).content : undefined
      if (typeof content !== 'string') throw new GuardServiceError(`${where} answered mask with a message without content text`)
      texts.push(content)
    }
    return { action: 'mask', messages: texts }
  }
  throw new GuardServiceError(`${where} answered no action pass, mask or reject`)
}

/** Largest moderation answer read: the API's answer is a few KB per input. */
const MODERATION_MAX_BYTES = 4 * 1024 * 1024

/**
 * OpenAI's moderation endpoint (POST /v1/moderations, `{model, input: [texts]}`): flagged
 * when any result is, with the categories it flagged as the reason.
 */
export async function askModeration (guard: ModerationGuardIR, messages: GuardMessage[]): Promise<ServiceVerdict> {
  const texts = messages.map(m => m.content).filter(t => t !== '')
  if (texts.length === 0) return { action: 'pass' }
  const headers: Record<string, string> = guard.auth !== undefined ? { authorization: `Bearer ${guard.auth.apiKey}` } : {}
  const { status, json } = await postJson(guard.url, { model: guard.model, input: texts }, { timeoutMs: guard.timeoutMs, maxBytes: MODERATION_MAX_BYTES, headers })
  const where = new URL(guard.url).origin
  if (status !== 200) {
    const message = (json as { error?: { message?: unknown } } | null)?.error?.message
    throw new GuardServiceError(`${where} answered ${status}${typeof message === 'string' ? ` (${message.slice(0, 200)})` : ''}`)
  }
  const results = (json as { results?: unknown } | null)?.results
  if (!Array.isArray(results) || results.length === 0) throw new GuardServiceError(`${where} answered no results`)
  const flagged = new Set<string>()
  let any = false
  for (const r of results) {
    if (r === null || typeof r !== 'object' || typeof (r as Record<string, unknown>).flagged !== 'boolean') throw new GuardServiceError(`${where} answered a result without flagged`)
    const result = r as { flagged: boolean, categories?: Record<string, unknown> }
    if (!result.flagged) continue
    any = true
    for (const [name, on] of Object.entries(result.categories ?? {})) if (on === true) flagged.add(name)
  }
  if (!any) return { action: 'pass' }
  return { action: 'reject', reason: flagged.size > 0 ? `flagged: ${[...flagged].join(', ')}` : 'flagged' }
}
