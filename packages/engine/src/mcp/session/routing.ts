/**
 * Where a client's request goes in a session of several targets, decided from the message
 * alone: answered by the gateway (ping, a second initialize, an unknown or forbidden item),
 * fanned out (lists, logging/setLevel), or forwarded to the one target that owns the named
 * tool, prompt or resource, with its prefix stripped and the answer's URIs put back in the
 * client's namespace.
 *
 * The decision is apart from the sending (session.ts) so that the trace's description of a
 * request (`describeRequest`) names the same target the request is routed to: both read
 * the owner through `ownerOf`.
 */

import type { McpCallInfo } from '../../request/calls.ts'
import type { ItemFilter } from '../protocol/item-filter.ts'
import {
  errorResponse, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, resultResponse,
  type JsonRpcRequest, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'
import { LISTS, type ListSpec } from './fan-out.ts'
import { wrapPromptResult, wrapResourceResult, wrapToolResult, type TargetNaming } from './names.ts'

export type Transform = (result: Record<string, unknown>) => Record<string, unknown>

export type Route =
  | { kind: 'reply', message: JsonRpcResponse }
  | { kind: 'list', spec: ListSpec }
  | { kind: 'broadcast' }
  | { kind: 'forward', target: string, params: Record<string, unknown> | undefined, transform?: Transform }

/** The item a request names and the target that owns it (upstream name or URI), or null when no target owns it; undefined for a method that names none. */
export function ownerOf (method: string, params: Record<string, unknown>, naming: TargetNaming): { kind: 'tool' | 'prompt' | 'resource', target: string, name: string } | null | undefined {
  switch (method) {
    case 'tools/call':
    case 'prompts/get': {
      const owner = naming.unwrapName(String(params.name ?? ''))
      return owner === null ? null : { kind: method === 'tools/call' ? 'tool' : 'prompt', target: owner.target, name: owner.name }
    }
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe': {
      const owner = naming.unwrapUri(String(params.uri ?? ''))
      return owner === null ? null : { kind: 'resource', target: owner.target, name: owner.uri }
    }
    default:
      return undefined
  }
}

/**
 * The route of one client request. `filter` hides the items this caller may not use: a
 * forbidden item answers exactly like a missing one, so its existence is not revealed.
 */
export function routeRequest (req: JsonRpcRequest, naming: TargetNaming, targets: ReadonlyMap<string, unknown>, filter?: ItemFilter): Route {
  const params = (req.params ?? {}) as Record<string, unknown>
  switch (req.method) {
    case 'ping':
      return { kind: 'reply', message: resultResponse(req.id, {}) }
    case 'initialize':
      return { kind: 'reply', message: errorResponse(req.id, INVALID_REQUEST, 'session already initialized') }
    case 'tools/list':
    case 'prompts/list':
    case 'resources/list':
    case 'resources/templates/list':
      return { kind: 'list', spec: LISTS[req.method]! }
    case 'tools/call':
    case 'prompts/get':
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe': {
      const kind = req.method === 'tools/call' ? 'tool' : req.method === 'prompts/get' ? 'prompt' : 'resource'
      const owner = ownerOf(req.method, params, naming)!
      if (owner === null || (filter !== undefined && !filter({ method: req.method, kind, name: owner.name, target: owner.target }))) {
        return { kind: 'reply', message: errorResponse(req.id, INVALID_PARAMS, `Unknown ${kind}: ${kind === 'resource' ? String(params.uri ?? '') : String(params.name ?? '')}`) }
      }
      const target = owner.target
      if (kind === 'resource') return { kind: 'forward', target, params: { ...params, uri: owner.name }, transform: result => wrapResourceResult(naming, target, result) }
      // Resource links and embedded resources in the answer get the target's prefix too.
      return {
        kind: 'forward',
        target,
        params: { ...params, name: owner.name },
        transform: kind === 'tool' ? result => wrapToolResult(naming, target, result) : result => wrapPromptResult(naming, target, result)
      }
    }
    case 'completion/complete': {
      const ref = (params.ref ?? {}) as Record<string, unknown>
      const owner = ref.type === 'ref/prompt' ? naming.unwrapName(String(ref.name ?? '')) : naming.unwrapUri(String(ref.uri ?? ''))
      if (owner === null) return { kind: 'reply', message: errorResponse(req.id, INVALID_PARAMS, 'Unknown completion reference') }
      const upstreamRef = ref.type === 'ref/prompt' ? { ...ref, name: (owner as { name: string }).name } : { ...ref, uri: (owner as { uri: string }).uri }
      return { kind: 'forward', target: owner.target, params: { ...params, ref: upstreamRef } }
    }
    case 'logging/setLevel':
      return { kind: 'broadcast' }
    default:
      // Anything else (newer methods included) has an owner only when there is one target.
      if (targets.size === 1) return { kind: 'forward', target: targets.keys().next().value!, params: req.params }
      return { kind: 'reply', message: errorResponse(req.id, METHOD_NOT_FOUND, `Method not found: ${req.method} (not supported across several targets)`) }
  }
}

/**
 * Describes a client request for traces, logs and metrics: its method, the item it names
 * and the target(s) it goes to (comma-separated for a fan-out). The revisions are filled in
 * by the session, which knows what each target speaks.
 */
export function describeRequest (method: string, params: Record<string, unknown>, naming: TargetNaming, targets: ReadonlyMap<string, unknown>): McpCallInfo {
  const info: McpCallInfo = { method, target: '' }
  const owner = ownerOf(method, params, naming)
  if (owner !== undefined) {
    info.name = method.startsWith('resources/') ? String(params.uri ?? '') : String(params.name ?? '')
    info.kind = method === 'tools/call' ? 'tool' : method === 'prompts/get' ? 'prompt' : 'resource'
    info.target = owner === null ? '' : owner.target
  } else if (method in LISTS || method === 'initialize' || method === 'logging/setLevel') {
    info.target = [...targets.keys()].join(',')
  } else if (targets.size === 1) {
    info.target = targets.keys().next().value!
  }
  return info
}
