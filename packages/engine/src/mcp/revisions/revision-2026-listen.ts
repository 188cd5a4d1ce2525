/**
 * `subscriptions/listen` (2026-07-28) as messages: the `notifications` filter a listen
 * request carries, the part of it the targets can honour (what the acknowledgment names),
 * which change notifications a filter asks for, and a notification stamped with the
 * subscription id of the stream it goes out on.
 *
 * Pure functions: the open streams and the URIs they keep subscribed at the targets are
 * session state (session/listen.ts, SubscriptionHub).
 */

import type { JsonRpcId, JsonRpcNotification } from '../protocol/jsonrpc.ts'
import { META_SUBSCRIPTION_ID } from './revision-2026.ts'

/** The `notifications` filter of a subscriptions/listen request. */
export interface ListenFilter {
  toolsListChanged?: boolean
  promptsListChanged?: boolean
  resourcesListChanged?: boolean
  resourceSubscriptions?: string[]
}

/** The filter of a request's params, or why it is not one. */
export function parseFilter (value: unknown): ListenFilter | string {
  if (value === undefined) return {}
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'notifications must be an object'
  const v = value as Record<string, unknown>
  const out: ListenFilter = {}
  for (const key of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) {
    if (v[key] === undefined) continue
    if (typeof v[key] !== 'boolean') return `notifications.${key} must be a boolean`
    if (v[key]) out[key] = true
  }
  if (v.resourceSubscriptions !== undefined) {
    if (!Array.isArray(v.resourceSubscriptions) || v.resourceSubscriptions.some(u => typeof u !== 'string')) return 'notifications.resourceSubscriptions must be an array of strings'
    if (v.resourceSubscriptions.length > 0) out.resourceSubscriptions = [...new Set(v.resourceSubscriptions as string[])]
  }
  return out
}

/**
 * The part of `wanted` the targets can honour, from the merged capabilities (listChanged
 * per list, `resources.subscribe` for URIs); what cannot be honoured is left out, as the
 * acknowledgment must.
 */
export function honouredFilter (wanted: ListenFilter, capabilities: Record<string, unknown>): ListenFilter {
  const cap = (name: string, flag: string) => {
    const c = capabilities[name] as Record<string, unknown> | undefined
    return c !== undefined && c !== null && c[flag] === true
  }
  const out: ListenFilter = {}
  if (wanted.toolsListChanged === true && cap('tools', 'listChanged')) out.toolsListChanged = true
  if (wanted.promptsListChanged === true && cap('prompts', 'listChanged')) out.promptsListChanged = true
  if (wanted.resourcesListChanged === true && cap('resources', 'listChanged')) out.resourcesListChanged = true
  if (wanted.resourceSubscriptions !== undefined && cap('resources', 'subscribe')) out.resourceSubscriptions = wanted.resourceSubscriptions
  return out
}

/** Whether a notification is one `filter` asked for. */
export function wants (filter: ListenFilter, message: JsonRpcNotification): boolean {
  switch (message.method) {
    case 'notifications/tools/list_changed': return filter.toolsListChanged === true
    case 'notifications/prompts/list_changed': return filter.promptsListChanged === true
    case 'notifications/resources/list_changed': return filter.resourcesListChanged === true
    case 'notifications/resources/updated': {
      const uri = (message.params as { uri?: unknown } | undefined)?.uri
      return typeof uri === 'string' && filter.resourceSubscriptions?.includes(uri) === true
    }
    default: return false
  }
}

/** A notification as sent on one subscription's stream: its id in `_meta`. */
export function stamped (message: JsonRpcNotification, subscriptionId: JsonRpcId): JsonRpcNotification {
  const params = (message.params ?? {}) as Record<string, unknown>
  const meta = (params._meta !== null && typeof params._meta === 'object' ? params._meta : {}) as Record<string, unknown>
  return { jsonrpc: '2.0', method: message.method, params: { ...params, _meta: { ...meta, [META_SUBSCRIPTION_ID]: subscriptionId } } }
}

