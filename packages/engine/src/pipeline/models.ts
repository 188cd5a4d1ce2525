/**
 * The model API on the data path (docs/models.md). A route with models (RouteIR.models) has
 * no backends of its own: the request's model -- the body's `model`, or the path's for Gemini
 * and Bedrock clients -- picks an attached public model (exact, then the most specific
 * wildcard), and a virtual model picks again (weighted at random, the first conditional rule
 * that holds, or failover groups) until a concrete model, an `ai` backend, is reached. From
 * there the request is any ai backend's: llm/request.ts translates it, counts its usage,
 * prices it; failover is pipeline/failover.ts's.
 *
 * An unknown or internal model is the client format's 404, naming nothing else served
 * here; `GET .../models` is answered from the config (the public models, virtual ones
 * included), no provider called.
 */

import type { ModelIR, BackendRefIR } from '../ir/types.ts'
import type { CompiledBackendRef, CompiledModel, CompiledModelTable } from '../request/compiled.ts'
import type { RequestContext } from '../request/context.ts'
import { WeightedPicker } from '../routing/weighted.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import { celVars } from '../cel/vars.ts'
import type { TranslationError } from '../llm/canonical.ts'
import { llm } from './llm-modules.ts'
import { bodyReadFailure, readRequestBody } from '../http/request-body.ts'
import { PorticoError } from '../util/errors.ts'

/** The CEL compiler loads with the first conditional model (its rules), not with the engine. */
const cel = lazyRequire<typeof import('../cel/expression.ts')>('../cel/expression.ts')

// llm/ loads with a config that has models (their concrete models are AI backends): at
// compile time, in compileModelTable, before any request reaches chooseModel.

/** How deep virtual models may nest (the loader refuses cycles; this bounds a table built elsewhere). */
const MAX_DEPTH = 32

/** A requested model is echoed in errors up to this many characters. */
const ECHO_LIMIT = 256

export function compileModelTable (models: ModelIR[], compileRef: (ref: BackendRefIR) => CompiledBackendRef): CompiledModelTable {
  const byName = new Map<string, CompiledModel>()
  for (const ir of models) {
    const v = ir.virtual
    byName.set(ir.name, {
      ir,
      ref: ir.backend !== undefined ? compileRef(ir.backend) : null,
      failover: v?.kind === 'failover' ? v.groups.map(g => g.map(p => compileRef({ backend: p.backend, weight: 1, policies: p.policies, ...(p.policySources !== undefined ? { policySources: p.policySources } : {}) }))) : null,
      failoverModels: v?.kind === 'failover' ? new Map(v.groups.flatMap((g, gi) => g.map((p, i) => [p.backend, v.models[gi]![i]!] as const))) : null,
      weighted: v?.kind === 'weighted' ? new WeightedPicker(v.targets.map(t => ({ item: t.model, weight: t.weight }))) : null,
      rules: v?.kind === 'conditional' ? v.rules.map(r => ({ program: cel().compileCel(r.when, llm().BODY_EDIT_CEL_VARIABLES, { expectBool: true }), model: r.model })) : null
    })
  }
  const selectable = models.filter(m => m.attached && m.visibility === 'Public')
  const matcher = new (llm().ModelMatcher)(selectable.map(m => ({ pattern: m.match, item: byName.get(m.name)! })))
  // A wildcard model serves a family no list could spell out without asking its provider: only
  // models a client can name exactly are listed.
  return { byName, select: model => matcher.select(model), listed: selectable.filter(m => !m.match.includes('*')) }
}

/** What the model step decided: the backend to call (and failover groups), or an answer. */
export type ModelOutcome =
  | { ref: CompiledBackendRef, failover: CompiledBackendRef[][] | null }
  | { status: number, body: string, headers: Record<string, string>, reason: 'NotFound' | 'InvalidRequest' | 'DirectResponse' | 'Timeout' }

const JSON_TYPE = { 'content-type': 'application/json' }

/** The client's format for answers given here: told by the path (a model list by the Anthropic SDK's header). */
function clientFormat (ctx: RequestContext) {
  const endpoint = llm().clientEndpoint(ctx.originalPath)
  const name = endpoint.operation === 'models' && ctx.req.headers['anthropic-version'] !== undefined ? 'anthropic-messages' : endpoint.format
  return { endpoint, format: llm().formatByName(name) ?? llm().formatByName('openai-chat')! }
}

function refuse (ctx: RequestContext, error: TranslationError, reason: 'NotFound' | 'InvalidRequest'): ModelOutcome {
  const { format } = clientFormat(ctx)
  const extra = format.errorHeaders?.(error)
  return { status: error.status, body: JSON.stringify(format.encodeError(error)), headers: extra === undefined ? JSON_TYPE : { ...JSON_TYPE, ...extra }, reason }
}

export async function chooseModel (ctx: RequestContext, table: CompiledModelTable): Promise<ModelOutcome> {
  const { endpoint, format } = clientFormat(ctx)
  if (endpoint.operation === 'models') {
    if (ctx.method !== 'GET') return { ...refuse(ctx, llm().translationError(405, 'invalid_request', `${ctx.method} on a models path (GET lists the models)`), 'InvalidRequest'), headers: { ...JSON_TYPE, allow: 'GET' } }
    const shape = format.name === 'anthropic-messages' ? 'anthropic' : 'openai'
    const list = llm().encodeModelList(shape, table.listed.map(m => ({ id: m.match })), 'portico')
    return { status: 200, body: JSON.stringify(list), headers: JSON_TYPE, reason: 'DirectResponse' }
  }

  let body: Record<string, unknown> = {}
  if (endpoint.model === undefined || ctx.method === 'POST') {
    if (ctx.method !== 'POST') return { ...refuse(ctx, llm().translationError(405, 'invalid_request', `${ctx.method} is not a model request (POST with a JSON body)`), 'InvalidRequest'), headers: { ...JSON_TYPE, allow: 'POST' } }
    const read = await readRequestBody(ctx, { maxBytes: llm().LLM_REQUEST_LIMIT, whenTooLarge: 'drain' })
    if (read === 'too-large') return refuse(ctx, llm().translationError(413, 'invalid_request', `request larger than ${llm().LLM_REQUEST_LIMIT} bytes`), 'InvalidRequest')
    if (read instanceof Error) {
      const failure = bodyReadFailure(read)
      return { status: failure.status, body: failure.body, headers: failure.headers ?? {}, reason: failure.reason }
    }
    if (read === 'buffered') {
      let parsed: unknown
      try {
        parsed = JSON.parse(ctx.requestBody!.toString('utf8'))
      } catch (err) {
        return refuse(ctx, llm().translationError(400, 'invalid_request', `body is not JSON (${(err as Error).message})`), 'InvalidRequest')
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return refuse(ctx, llm().translationError(400, 'invalid_request', 'body must be a JSON object'), 'InvalidRequest')
      body = parsed as Record<string, unknown>
    }
  }
  const requested = endpoint.model ?? (typeof body.model === 'string' ? body.model : '')
  if (requested === '') return refuse(ctx, llm().translationError(400, 'invalid_request', 'model is required', 'model'), 'InvalidRequest')
  const first = table.select(requested)
  if (first === null) {
    const shown = requested.length > ECHO_LIMIT ? `${requested.slice(0, ECHO_LIMIT)}...` : requested
    ctx.tracer?.emit({ type: 'modelSelection', requestModel: shown, matched: '', model: '', why: ['no model matches'] }, { severity: 'error' })
    ctx.error = 'no model matches the requested model'
    return refuse(ctx, llm().translationError(404, 'not_found', `The model \`${shown}\` does not exist or is not served here.`, 'model'), 'NotFound')
  }

  const why: string[] = []
  let llmVar: Record<string, unknown> | null = null
  const vars = () => {
    llmVar ??= llm().llmRequestVar(requested, body)
    return { ...celVars(ctx), llm: llmVar }
  }
  let model: CompiledModel = first
  for (let depth = 0; ; depth++) {
    if (model.ref !== null) break
    if (depth >= MAX_DEPTH) throw new PorticoError('PORTICO_VIRTUAL_MODEL', `virtual models nest deeper than ${MAX_DEPTH} (${why.join(', ')})`)
    const name = model.ir.name
    let next: string
    if (model.failover !== null) {
      why.push(`${name}: failover`)
      return chosen(ctx, requested, first, model, why, { ref: model.failover[0]![0]!, failover: model.failover }, model.failoverModels ?? undefined)
    } else if (model.weighted !== null) {
      next = model.weighted.pick()!
      const weights = (model.ir.virtual as { targets: Array<{ model: string, weight: number }> }).targets
      const w = weights.find(t => t.model === next)!.weight
      why.push(`${name}: weight ${w} of ${model.weighted.total}`)
    } else {
      const rules = model.rules!
      let hit = -1
      for (let i = 0; i < rules.length; i++) {
        const r = cel().evalBool(rules[i]!.program, vars())
        if (r.value) {
          hit = i
          break
        }
      }
      next = hit === -1 ? (model.ir.virtual as { fallback: string }).fallback : rules[hit]!.model
      why.push(hit === -1 ? `${name}: fallback` : `${name}: rule ${hit + 1}`)
    }
    const target = table.byName.get(next)
    if (target === undefined) throw new PorticoError('PORTICO_VIRTUAL_MODEL', `model ${next} of virtual model ${name} is not in the route's table`)
    model = target
  }
  return chosen(ctx, requested, first, model, why, { ref: model.ref!, failover: null })
}

function chosen (ctx: RequestContext, requested: string, matched: CompiledModel, model: CompiledModel, why: string[], outcome: { ref: CompiledBackendRef, failover: CompiledBackendRef[][] | null }, failoverModels?: ReadonlyMap<string, string>): ModelOutcome {
  ctx.modelChoice = failoverModels === undefined ? { requested, model: model.ir.name, why } : { requested, model: model.ir.name, why, failoverModels }
  ctx.tracer?.emit({ type: 'modelSelection', requestModel: requested, matched: matched.ir.name, model: model.ir.name, why })
  return outcome
}

/**
 * The concrete model that served: for a failover virtual model, the target whose backend the
 * last try went to; any other choice as it was made.
 */
export function servedModel (ctx: RequestContext): string | null {
  const choice = ctx.modelChoice
  if (choice === null) return null
  if (choice.failoverModels !== undefined && ctx.backend !== null) return choice.failoverModels.get(ctx.backend.key) ?? choice.model
  return choice.model
}
