/**
 * The requests a session of several targets sends to all of them: the list calls (tools,
 * prompts, resources, templates), merged into one list in the client's namespace with one
 * composite cursor, and logging/setLevel, answered once.
 *
 * A list is asked only of the targets that declared its capability; the authorization
 * filter drops the items this caller may not use before the client sees them (a forbidden
 * item is absent, as a missing one). A target's error fails the whole list with
 * failureMode failClosed and is skipped with failOpen — except "method not found", which a
 * target with the capability but not this list (templates, typically) answers: it has none.
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'
import {
  errorResponse, INVALID_PARAMS, METHOD_NOT_FOUND, resultResponse, targetUnavailable,
  type JsonRpcRequest
} from '../protocol/jsonrpc.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import { endTargetSpan, startTargetSpan, withTraceContext } from '../upstream/span.ts'
import type { TargetConnection } from '../upstream/target.ts'
import type { Channel } from './channels.ts'
import type { ClientCalls } from './client-calls.ts'
import { decodeCursor, encodeCursor } from './merge.ts'
import type { TargetNaming } from './names.ts'

/** How one list call is merged. */
export interface ListSpec {
  /** The capability a target must declare to be asked. */
  capability: string
  kind: 'tool' | 'prompt' | 'resource'
  /** The item's upstream name (or URI) for authorization. */
  nameOf: (item: Record<string, unknown>) => string
  /** The result's array. */
  key: string
  /** The item in the client's namespace. */
  rewrite: (naming: TargetNaming, target: string, item: Record<string, unknown>) => Record<string, unknown>
}

export const LISTS: Readonly<Record<string, ListSpec>> = {
  'tools/list': { capability: 'tools', kind: 'tool', nameOf: i => String(i.name), key: 'tools', rewrite: (n, t, i) => ({ ...i, name: n.wrapName(t, String(i.name)) }) },
  'prompts/list': { capability: 'prompts', kind: 'prompt', nameOf: i => String(i.name), key: 'prompts', rewrite: (n, t, i) => ({ ...i, name: n.wrapName(t, String(i.name)) }) },
  'resources/list': { capability: 'resources', kind: 'resource', nameOf: i => String(i.uri), key: 'resources', rewrite: (n, t, i) => ({ ...i, uri: n.wrapUri(t, String(i.uri)) }) },
  'resources/templates/list': { capability: 'resources', kind: 'resource', nameOf: i => String(i.uriTemplate), key: 'resourceTemplates', rewrite: (n, t, i) => ({ ...i, uriTemplate: n.wrapUri(t, String(i.uriTemplate)) }) }
}

export interface FanOutContext {
  targets: ReadonlyMap<string, TargetConnection>
  naming: TargetNaming
  failureMode: McpBackendSpecIR['failureMode']
  /** Where the list call is registered while it runs (the client may cancel it). */
  calls: ClientCalls
}

/** A list call: every target with the capability, merged, with one composite cursor. */
export async function fanOutList (req: JsonRpcRequest, spec: ListSpec, channel: Channel, ctx: FanOutContext, filter?: ItemFilter): Promise<void> {
  const params = { ...(req.params ?? {}) } as Record<string, unknown>
  // A cursor of ours names each target's own cursor; a page goes only to targets with more.
  let cursors: Record<string, string> | null = null
  if (typeof params.cursor === 'string') {
    cursors = decodeCursor(params.cursor)
    if (cursors === null) {
      channel.deliver(errorResponse(req.id, INVALID_PARAMS, 'Invalid cursor'))
      return
    }
  }
  delete params.cursor
  const call = { clientId: req.id, channel, method: req.method, target: null, upstreamId: null, progressToken: undefined, cancelled: false, span: null }
  ctx.calls.open(call)
  // A target not yet initialized is asked if it may have the list; it is skipped below once its capabilities are known.
  const targets = [...ctx.targets.values()].filter(t => (cursors === null || t.name in cursors) && (t.initResult === null || spec.capability in (t.initResult.capabilities ?? {})))
  if (targets.length > 0) channel.calling?.(targets.map(t => t.name).join(','))
  const answers = await Promise.all(targets.map(async t => {
    try {
      await t.ready()
    } catch (err) {
      return { t, response: targetUnavailable(req.id, (err as Error).message) }
    }
    if (!(spec.capability in (t.initResult?.capabilities ?? {}))) return null
    const p = cursors !== null ? { ...params, cursor: cursors[t.name] } : params
    const span = startTargetSpan(channel.span, req.method, t, p, t.revision)
    const response = await t.call({ method: req.method, params: channel.span != null ? withTraceContext(p, channel.span, span) : p }, t.spec.requestTimeoutMs)
    endTargetSpan(span, response)
    return { t, response }
  }))
  ctx.calls.close(call)
  if (call.cancelled) return
  const items: Array<Record<string, unknown>> = []
  const next: Record<string, string> = {}
  for (const answer of answers) {
    if (answer === null) continue
    const { t, response } = answer
    if ('error' in response) {
      if (response.error.code === METHOD_NOT_FOUND || ctx.failureMode === 'failOpen') continue
      const message = response.error.message.includes(`"${t.name}"`) ? response.error.message : `target "${t.name}": ${response.error.message}`
      channel.deliver(errorResponse(req.id, response.error.code, message, response.error.data))
      return
    }
    for (const item of (response.result[spec.key] ?? []) as Array<Record<string, unknown>>) {
      if (filter !== undefined && !filter({ method: req.method, kind: spec.kind, name: spec.nameOf(item), target: t.name })) continue
      items.push(spec.rewrite(ctx.naming, t.name, item))
    }
    if (typeof response.result.nextCursor === 'string') next[t.name] = response.result.nextCursor
  }
  const result: Record<string, unknown> = { [spec.key]: items }
  if (Object.keys(next).length > 0) result.nextCursor = encodeCursor(next)
  channel.deliver(resultResponse(req.id, result))
}

/** A request every target gets (logging/setLevel); one empty result for the client, or the first error with failClosed. */
export async function broadcastRequest (req: JsonRpcRequest, channel: Channel, ctx: Omit<FanOutContext, 'naming' | 'calls'>): Promise<void> {
  channel.calling?.([...ctx.targets.keys()].join(','))
  const answers = await Promise.all([...ctx.targets.values()].map(async t => {
    try {
      await t.ready()
    } catch (err) {
      return targetUnavailable(req.id, (err as Error).message)
    }
    const message: { method: string, params?: Record<string, unknown> } = { method: req.method }
    if (req.params !== undefined) message.params = req.params
    return await t.call(message, t.spec.requestTimeoutMs)
  }))
  const failed = answers.find(a => 'error' in a)
  if (failed !== undefined && 'error' in failed && ctx.failureMode === 'failClosed') {
    channel.deliver(errorResponse(req.id, failed.error.code, failed.error.message))
    return
  }
  channel.deliver(resultResponse(req.id, {}))
}
