import type { CompiledPolicy } from '../request/policy.ts'
import type { HeaderModifierIR, PolicyKind } from '../ir/policy.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import type { RequestContext } from '../request/context.ts'

/**
 * Applies a Gateway API header filter to a header map in place: `set` overwrites, `add`
 * appends to an existing value (comma-joined, as the Gateway API's examples show), `remove`
 * deletes. Names are matched case-insensitively.
 */
export function applyHeaderModifier (headers: HeaderMap, mod: CompiledHeaderModifier): void {
  for (const [name, value] of mod.set) headers[name] = value
  for (const [name, value] of mod.add) {
    const existing = headers[name]
    if (existing === undefined) headers[name] = value
    else if (Array.isArray(existing)) headers[name] = name === 'set-cookie' ? [...existing, value] : `${existing.join(',')},${value}`
    else headers[name] = name === 'set-cookie' ? [existing, value] : `${existing},${value}`
  }
  // Deleting a property that is not there is skipped: it is the common case, and a delete can
  // turn the object into a slower dictionary.
  for (const name of mod.remove) if (name in headers) delete headers[name]
}

export interface CompiledHeaderModifier {
  set: Array<[string, string]>
  add: Array<[string, string]>
  remove: string[]
}

export function compileHeaderModifier (ir: HeaderModifierIR): CompiledHeaderModifier {
  return {
    set: Object.entries(ir.set ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    add: Object.entries(ir.add ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    remove: (ir.remove ?? []).map(k => k.toLowerCase())
  }
}

export function requestHeaderModifier (ir: HeaderModifierIR): CompiledPolicy {
  const mod = compileHeaderModifier(ir)
  return {
    kind: 'requestHeaderModifier' satisfies PolicyKind,
    onRequest (ctx: RequestContext) {
      applyHeaderModifier(ctx.headers, mod)
      return CONTINUE
    }
  }
}

export function responseHeaderModifier (ir: HeaderModifierIR): CompiledPolicy {
  const mod = compileHeaderModifier(ir)
  return {
    kind: 'responseHeaderModifier' satisfies PolicyKind,
    onResponse (ctx: RequestContext) {
      applyHeaderModifier(ctx.responseHeaders, mod)
    }
  }
}

export const CONTINUE = Object.freeze({ action: 'continue' as const })
