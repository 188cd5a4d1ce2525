/**
 * ReferenceGrant: a reference from one namespace to an object in another is allowed only
 * when a grant in the target namespace names the source (group, kind, namespace) and the
 * target (group, kind, and name when given).
 */

import type { ReferenceGrant } from './gateway-api.ts'

export interface CrossReference {
  fromGroup: string
  fromKind: string
  fromNamespace: string
  toGroup: string
  toKind: string
  toNamespace: string
  toName: string
}

export class ReferenceGrants {
  private readonly byNamespace = new Map<string, ReferenceGrant[]>()

  constructor (grants: readonly ReferenceGrant[]) {
    for (const g of grants) {
      const ns = g.metadata.namespace ?? ''
      let list = this.byNamespace.get(ns)
      if (list === undefined) this.byNamespace.set(ns, list = [])
      list.push(g)
    }
  }

  allows (ref: CrossReference): boolean {
    if (ref.fromNamespace === ref.toNamespace) return true
    for (const g of this.byNamespace.get(ref.toNamespace) ?? []) {
      const fromOk = g.spec.from.some(f => f.group === ref.fromGroup && f.kind === ref.fromKind && f.namespace === ref.fromNamespace)
      if (!fromOk) continue
      const toOk = g.spec.to.some(t => t.group === ref.toGroup && t.kind === ref.toKind && (t.name === undefined || t.name === '' || t.name === ref.toName))
      if (toOk) return true
    }
    return false
  }
}
