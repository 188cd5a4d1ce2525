/**
 * `urlRewrite`: changes the request on its way to the backend (Gateway API
 * HTTPURLRewriteFilter). `hostname` replaces the Host header the backend gets
 * (X-Forwarded-Host keeps the client's); `path` is ReplaceFullPath or ReplacePrefixMatch
 * (see path-modifier.ts). The query string is kept.
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { UrlRewriteIR } from '../ir/policy.ts'
import { modifyPath } from './path-modifier.ts'
import { CONTINUE } from './header-modifier.ts'

export function urlRewrite (ir: UrlRewriteIR): CompiledPolicy {
  return {
    kind: 'urlRewrite',
    onRequest (ctx: RequestContext): PolicyOutcome {
      const changes: string[] = []
      if (ir.hostname !== undefined) {
        ctx.headers.host = ir.hostname
        changes.push(`host ${ir.hostname}`)
      }
      if (ir.path !== undefined) {
        const modified = modifyPath(ctx.path, ir.path, ctx.matchedPath)
        if (typeof modified === 'string') {
          if (ctx.tracer !== null) changes.push(`path ${ctx.path} \u2192 ${modified}`)
          ctx.path = modified
        } else {
          ctx.tracer?.emit({ type: 'policy', kind: 'urlRewrite', result: { type: 'skip', details: `path not rewritten: ${modified.error}` } }, { severity: 'warn' })
        }
      }
      if (changes.length > 0) ctx.tracer?.emit({ type: 'policy', kind: 'urlRewrite', result: { type: 'apply', details: changes.join('; ') } })
      return CONTINUE
    }
  }
}
