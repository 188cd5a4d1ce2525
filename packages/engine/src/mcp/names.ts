/**
 * How names and URIs of several targets share one namespace. With one target (and
 * `prefixMode: conditional`) nothing changes; otherwise tool and prompt names become
 * `<target>_<name>` (split at the first `_`, so target names cannot contain one) and
 * resource URIs (and URI templates) become `<target>+<uri>` (split at the first `+`).
 */

import type { McpBackendSpecIR } from '../ir/types.ts'

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
