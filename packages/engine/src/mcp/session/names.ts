/**
 * How names and URIs of several targets share one namespace. With one target (and
 * `prefixMode: conditional`) nothing changes; otherwise tool and prompt names become
 * `<target>_<name>` (split at the first `_`, so target names cannot contain one) and
 * resource URIs (and URI templates) become `<target>+<uri>` (split at the first `+`).
 */

import type { McpBackendSpecIR } from '../../ir/types.ts'

export class TargetNaming {
  readonly prefixed: boolean
  private readonly names: Set<string>
  private readonly only: string | undefined

  constructor (spec: Pick<McpBackendSpecIR, 'targets' | 'prefixMode'>) {
    this.names = new Set(spec.targets.map(t => t.name))
    this.prefixed = spec.targets.length > 1 || spec.prefixMode === 'always'
    this.only = spec.targets.length === 1 ? spec.targets[0]!.name : undefined
  }

  wrapName (target: string, name: string): string {
    return this.prefixed ? `${target}_${name}` : name
  }

  /** The target and upstream name of a client-side name; null when no target owns it. */
  unwrapName (name: string): { target: string, name: string } | null {
    if (!this.prefixed) return this.only === undefined ? null : { target: this.only, name }
    const i = name.indexOf('_')
    if (i <= 0) return null
    const target = name.slice(0, i)
    return this.names.has(target) ? { target, name: name.slice(i + 1) } : null
  }

  wrapUri (target: string, uri: string): string {
    return this.prefixed ? `${target}+${uri}` : uri
  }

  unwrapUri (uri: string): { target: string, uri: string } | null {
    if (!this.prefixed) return this.only === undefined ? null : { target: this.only, uri }
    const i = uri.indexOf('+')
    if (i <= 0) return null
    const target = uri.slice(0, i)
    return this.names.has(target) ? { target, uri: uri.slice(i + 1) } : null
  }
}

/** A content block of a tool result or prompt message, as far as URIs go. */
type ContentBlock = Record<string, unknown>

/**
 * URIs inside content (tool results, prompt messages) in the client's namespace: a
 * `resource_link`'s `uri` and an embedded `resource`'s `resource.uri` get the target's
 * prefix, so the client can read them back through the gateway. Other blocks are as sent.
 */
export function wrapContentUris (naming: TargetNaming, target: string, block: unknown): unknown {
  if (!naming.prefixed || block === null || typeof block !== 'object') return block
  const b = block as ContentBlock
  if (b.type === 'resource_link' && typeof b.uri === 'string') return { ...b, uri: naming.wrapUri(target, b.uri) }
  if (b.type === 'resource' && b.resource !== null && typeof b.resource === 'object') {
    const r = b.resource as Record<string, unknown>
    if (typeof r.uri === 'string') return { ...b, resource: { ...r, uri: naming.wrapUri(target, r.uri) } }
  }
  return block
}

/** A tools/call result with the URIs of its content blocks wrapped. */
export function wrapToolResult (naming: TargetNaming, target: string, result: Record<string, unknown>): Record<string, unknown> {
  if (!naming.prefixed || !Array.isArray(result.content)) return result
  return { ...result, content: result.content.map(c => wrapContentUris(naming, target, c)) }
}

/** A prompts/get result with the URIs of its messages' content wrapped. */
export function wrapPromptResult (naming: TargetNaming, target: string, result: Record<string, unknown>): Record<string, unknown> {
  if (!naming.prefixed || !Array.isArray(result.messages)) return result
  return {
    ...result,
    messages: (result.messages as unknown[]).map(m => m !== null && typeof m === 'object' && 'content' in m
      ? { ...(m as Record<string, unknown>), content: wrapContentUris(naming, target, (m as Record<string, unknown>).content) }
      : m)
  }
}

/** A resources/read result with its contents' URIs in the client's namespace (so they can be read back). */
export function wrapResourceResult (naming: TargetNaming, target: string, result: Record<string, unknown>): Record<string, unknown> {
  if (!naming.prefixed || !Array.isArray(result.contents)) return result
  return { ...result, contents: (result.contents as Array<Record<string, unknown>>).map(c => typeof c.uri === 'string' ? { ...c, uri: naming.wrapUri(target, c.uri) } : c) }
}
