/**
 * What policy compilers may need beyond their IR: shared, long-lived resources that must
 * survive config reloads (a reload must not refetch every JWKS or reconnect every gRPC
 * channel). The engine owns one and passes it to every compile.
 */

import { JwksCache } from '../auth/jwks.ts'
import type { JwksIR } from './types.ts'

export class PolicyServices {
  private readonly jwksByUrl = new Map<string, JwksCache>()

  /** The cache for a key set: shared per URL; inline keys get their own. */
  jwks (ir: JwksIR): JwksCache {
    if ('keys' in ir) return new JwksCache({ keys: ir.keys as never })
    let cache = this.jwksByUrl.get(ir.url)
    if (cache === undefined) this.jwksByUrl.set(ir.url, cache = new JwksCache({ url: ir.url }))
    return cache
  }
}
