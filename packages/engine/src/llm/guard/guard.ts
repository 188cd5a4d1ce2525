/**
 * promptGuard: the guards of an ai backend run on the neutral shape (llm/canonical.ts), so
 * one implementation serves every client and provider format.
 *
 * - Requests: the texts of the neutral request — system prompts, message text parts and
 *   tool results' text — go through `promptGuard.request` in order before the request is
 *   encoded for the provider. A mask rewrites them in place; a reject (or a failing service
 *   with failureMode closed) answers the client in its own format's error shape.
 * - Whole answers: the answer's text parts go through `promptGuard.response` the same way.
 * - Streamed answers: each text block's deltas go through the regex guards as they come
 *   (llm/guard/regex.ts StreamScanner: a bounded tail held back, masks never split); a
 *   reject ends the stream with the client format's error event before any of the match
 *   was sent. Webhook and moderation guards need the whole text, so they are not run on
 *   streamed answers (a `guardrail` trace event with action pass says so).
 *
 * Tool-call arguments and reasoning text are not guarded (masking inside JSON arguments
 * could break them; reasoning carries a provider signature over its text).
 *
 * Every decision is a `guardrail` trace event and a count in
 * `portico_guardrail_decisions_total{model,guard,action}` (ctx.guardDecisions).
 */

import type { RequestContext } from '../../request/context.ts'
import type { PromptGuardIR } from '../../ir/types.ts'
import type { ChatRequest, ChatResponse, StreamEvent, TranslationError } from '../canonical.ts'
import type { GuardrailEvent } from '../../trace/events.ts'
import { translationError } from '../canonical.ts'
import { applyMasks, compileRegexGuard, StreamScanner, type CompiledRegexGuard } from './regex.ts'
import { askModeration, askWebhook, GuardServiceError, type GuardMessage, type ServiceVerdict } from './services.ts'

type Direction = 'request' | 'response'

/** One text of a request or answer: its role, and how to read and replace it. */
interface TextSlot {
  role: GuardMessage['role']
  get (): string
  set (text: string): void
}

function requestSlots (request: ChatRequest): TextSlot[] {
  const slots: TextSlot[] = request.system.map((_, i) => ({ role: 'system', get: () => request.system[i]!, set: t => { request.system[i] = t } }))
  for (const m of request.messages) {
    for (const part of m.content) {
      if (part.type === 'text') slots.push({ role: m.role, get: () => part.text, set: t => { part.text = t } })
      else if (part.type === 'tool_result') {
        for (const c of part.content) if (c.type === 'text') slots.push({ role: 'tool', get: () => c.text, set: t => { c.text = t } })
      }
    }
  }
  return slots
}

function responseSlots (response: ChatResponse): TextSlot[] {
  const slots: TextSlot[] = []
  for (const part of response.content) if (part.type === 'text') slots.push({ role: 'assistant', get: () => part.text, set: t => { part.text = t } })
  return slots
}

/** Records a decision: trace event and metric. */
function decide (ctx: RequestContext, model: string, event: Omit<GuardrailEvent, 'type'>): void {
  ctx.tracer?.emit({ type: 'guardrail', ...event }, { severity: event.action === 'reject' || event.action === 'error' ? 'warn' : 'info' })
  ;(ctx.guardDecisions ??= []).push({ model, guard: event.guard, action: event.action })
}

/** The refusal of a guard, in neutral terms (the client format's encoder gives its shape). */
export function guardRefusal (guard: PromptGuardIR, direction: Direction, details: string | undefined): TranslationError {
  const status = guard.rejection.status
  const kind: TranslationError['kind'] = status === 400 ? 'invalid_request' : status === 401 ? 'authentication' : status === 404 ? 'not_found' : status === 429 ? 'rate_limit' : status >= 500 ? 'api_error' : 'permission'
  const message = guard.rejection.message ?? `the ${direction} was rejected by a guardrail (${guard.kind}${details !== undefined ? `: ${details}` : ''})`
  return translationError(status, kind, message)
}

/** A guard service that failed with failureMode closed: the client gets a 503 (the text was not checked). */
function failedClosed (guard: PromptGuardIR, direction: Direction): TranslationError {
  return translationError(503, 'api_error', `the ${direction} could not be checked: the ${guard.kind} guardrail is unavailable`)
}

/** Runs `guards` in order over `slots`; null when the text may go on (masked where a guard said so). */
async function runGuards (ctx: RequestContext, model: string, guards: PromptGuardIR[], direction: Direction, slots: TextSlot[]): Promise<TranslationError | null> {
  for (let index = 0; index < guards.length; index++) {
    const guard = guards[index]!
    if (guard.kind === 'regex') {
      const compiled = compileRegexGuard(guard)
      const labels = new Set<string>()
      const found = slots.map(slot => {
        const text = slot.get()
        const hits = compiled.scan(text)
        for (const h of hits) labels.add(h.label)
        return { slot, text, hits }
      })
      const details = labels.size > 0 ? [...labels].join(', ') : undefined
      if (labels.size === 0) {
        decide(ctx, model, { direction, guard: 'regex', action: 'pass', index })
        continue
      }
      if (guard.action === 'reject') {
        decide(ctx, model, { direction, guard: 'regex', action: 'reject', details: details!, index })
        return guardRefusal(guard, direction, details)
      }
      for (const f of found) if (f.hits.length > 0) f.slot.set(applyMasks(f.text, f.hits))
      decide(ctx, model, { direction, guard: 'regex', action: 'mask', details: details!, index })
      continue
    }
    const messages: GuardMessage[] = slots.map(s => ({ role: s.role, content: s.get() }))
    if (messages.length === 0) {
      // Nothing to check (an answer of tool calls only): the service is not asked.
      decide(ctx, model, { direction, guard: guard.kind, action: 'pass', details: 'no text', index })
      continue
    }
    let verdict: ServiceVerdict
    try {
      verdict = guard.kind === 'webhook' ? await askWebhook(guard, direction, model, messages) : await askModeration(guard, messages)
    } catch (err) {
      const why = err instanceof GuardServiceError ? err.message : `guard failed: ${(err as Error).message}`
      decide(ctx, model, { direction, guard: guard.kind, action: 'error', details: why, failureMode: guard.failureMode, index })
      if (guard.failureMode === 'closed') return failedClosed(guard, direction)
      continue
    }
    if (verdict.action === 'pass') {
      decide(ctx, model, { direction, guard: guard.kind, action: 'pass', index })
    } else if (verdict.action === 'reject') {
      decide(ctx, model, { direction, guard: guard.kind, action: 'reject', ...(verdict.reason !== undefined ? { details: verdict.reason } : {}), index })
      return guardRefusal(guard, direction, verdict.reason)
    } else {
      verdict.messages.forEach((text, i) => slots[i]!.set(text))
      decide(ctx, model, { direction, guard: guard.kind, action: 'mask', index })
    }
  }
  return null
}

/** The request's guards over the neutral request (masked in place); null when it may be sent. */
export function guardRequest (ctx: RequestContext, model: string, guards: PromptGuardIR[], request: ChatRequest): Promise<TranslationError | null> {
  return runGuards(ctx, model, guards, 'request', requestSlots(request))
}

/** The answer's guards over a whole neutral answer (masked in place); null when it may go to the client. */
export function guardResponse (ctx: RequestContext, model: string, guards: PromptGuardIR[], response: ChatResponse): Promise<TranslationError | null> {
  return runGuards(ctx, model, guards, 'response', responseSlots(response))
}

/** Whether a whole answer's guards need a service (then the answer waits for it). */
export function needsService (guards: PromptGuardIR[]): boolean {
  return guards.some(g => g.kind !== 'regex')
}

/**
 * The regex guards of `promptGuard.response` over a stream of neutral events: text deltas
 * are held back and masked per block; a reject replaces the rest of the stream with one
 * error event.
 */
export class StreamGuard {
  private readonly ctx: RequestContext
  private readonly model: string
  private readonly guards: Array<{ compiled: CompiledRegexGuard, ir: PromptGuardIR, index: number, labels: Set<string> }>
  /** Per text block: one scanner per guard, chained. */
  private readonly blocks = new Map<number, StreamScanner[]>()
  private refused = false
  private decided = false

  constructor (ctx: RequestContext, model: string, guards: PromptGuardIR[]) {
    this.ctx = ctx
    this.model = model
    this.guards = []
    guards.forEach((g, index) => {
      if (g.kind === 'regex') this.guards.push({ compiled: compileRegexGuard(g), ir: g, index, labels: new Set() })
      else decide(ctx, model, { direction: 'response', guard: g.kind, action: 'pass', details: 'not run on a streamed answer (it needs the whole text)', index })
    })
  }

  /** True once a reject ended the stream: later provider events are dropped. */
  get ended (): boolean {
    return this.refused
  }

  process (events: StreamEvent[]): StreamEvent[] {
    if (this.guards.length === 0) return events
    const out: StreamEvent[] = []
    for (const e of events) {
      if (this.refused) break
      if (e.type === 'text_delta') {
        const text = this.through(e.index, e.text, false)
        if (text === null) return this.reject(out)
        if (text !== '') out.push({ ...e, text })
      } else if (e.type === 'block_stop' && this.blocks.has(e.index)) {
        const text = this.through(e.index, '', true)
        if (text === null) return this.reject(out)
        if (text !== '') out.push({ type: 'text_delta', index: e.index, text })
        this.blocks.delete(e.index)
        out.push(e)
      } else if (e.type === 'finish' || e.type === 'error') {
        // Text still held (a block the provider never stopped) goes before the end.
        for (const index of [...this.blocks.keys()]) {
          const text = this.through(index, '', true)
          if (text === null) return this.reject(out)
          if (text !== '') out.push({ type: 'text_delta', index, text })
          this.blocks.delete(index)
        }
        if (e.type === 'finish') this.decideEnd()
        out.push(e)
      } else {
        out.push(e)
      }
    }
    return out
  }

  /** The text of block `index` after every guard, or null when a reject guard matched. */
  private through (index: number, delta: string, end: boolean): string | null {
    let scanners = this.blocks.get(index)
    if (scanners === undefined) {
      scanners = this.guards.map(g => new StreamScanner(g.compiled))
      this.blocks.set(index, scanners)
    }
    let text = delta
    for (let i = 0; i < scanners.length; i++) {
      const g = this.guards[i]!
      const s = scanners[i]!
      const step = s.push(text)
      let got = step.text
      let hits = step.hits
      if (end) {
        const rest = s.end()
        got += rest.text
        hits = [...hits, ...rest.hits]
      }
      for (const h of hits) g.labels.add(h.label)
      if (hits.length > 0 && g.compiled.action === 'reject') {
        this.refusedBy = g
        return null
      }
      text = got
    }
    return text
  }

  private refusedBy: StreamGuard['guards'][number] | null = null

  private reject (out: StreamEvent[]): StreamEvent[] {
    this.refused = true
    const g = this.refusedBy!
    const details = [...g.labels].join(', ')
    decide(this.ctx, this.model, { direction: 'response', guard: 'regex', action: 'reject', details, index: g.index })
    this.decided = true
    out.push({ type: 'error', error: guardRefusal(g.ir, 'response', details) })
    return out
  }

  /**
   * The end of the provider's stream (with or without a finish event): text still held is
   * sent (masked), and the decisions are recorded.
   */
  flush (): StreamEvent[] {
    if (this.guards.length === 0 || this.refused) return []
    const out = this.process([{ type: 'finish', stopReason: 'end_turn', usage: null }])
    // The finish above only carried the flush: it is not sent (the provider's own was, or the stream was cut).
    return out.filter(e => e.type !== 'finish')
  }

  /** At the stream's end: one decision per guard (mask when it masked something, else pass). */
  private decideEnd (): void {
    if (this.decided) return
    this.decided = true
    for (const g of this.guards) {
      const masked = g.labels.size > 0
      decide(this.ctx, this.model, { direction: 'response', guard: 'regex', action: masked ? 'mask' : 'pass', ...(masked ? { details: [...g.labels].join(', ') } : {}), index: g.index })
    }
  }
}
