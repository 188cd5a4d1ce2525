/**
 * `apiKey`: a key from a header or query parameter, matched by its SHA-256 against keys
 * that are stored hashed (the config may give a key in clear; it is hashed at load and the
 * clear text goes no further). The matching key's name and metadata are visible to CEL.
 */

import { createHash } from 'node:crypto'
import type { RequestContext } from '../request/context.ts'
import type { ApiKeyIR } from '../ir/policy.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import { CONTINUE } from './header-modifier.ts'
import { dropUpstreamHeader } from '../http/headers.ts'

export function sha256Hex (text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

export function apiKey (ir: ApiKeyIR): CompiledPolicy {
  const byHash = new Map(ir.keys.map(k => [k.keyHash.replace(/^sha256:/, ''), k]))
  const location = ir.location
  const refuse = (reason: string): PolicyOutcome => ({ action: 'respond', status: 401, body: `api key authentication failure: ${reason}`, reason: 'APIKeyAuth' })
  const trace = (ctx: RequestContext, type: 'apply' | 'skip' | 'deny', details: string) =>
    ctx.tracer?.emit({ type: 'policy', kind: 'apiKey', result: { type, details } }, { severity: type === 'deny' ? 'warn' : 'info' })
  const read = (ctx: RequestContext): string | null => {
    if ('query' in location) return new URLSearchParams(ctx.query).get(location.query)
    const v = ctx.headers[location.header]
    const text = Array.isArray(v) ? v[0] : v
    if (text === undefined) return null
    if (location.prefix === '') return text.trim()
    return text.slice(0, location.prefix.length).toLowerCase() === location.prefix.toLowerCase() ? text.slice(location.prefix.length).trim() : null
  }
  return {
    kind: 'apiKey',
    onRequest (ctx: RequestContext): PolicyOutcome {
      const key = read(ctx)
      if (key === null || key === '') {
        if (ir.mode !== 'strict') return CONTINUE
        trace(ctx, 'deny', 'no API key')
        return refuse('no API key')
      }
      const entry = byHash.get(sha256Hex(key))
      if (entry === undefined) {
        if (ir.mode === 'permissive') return CONTINUE
        trace(ctx, 'deny', 'unknown API key')
        return refuse('unknown API key')
      }
      ctx.auth.apiKey = { name: entry.name, metadata: entry.metadata }
      ctx.auth.credential = { kind: 'apiKey', token: key }
      if ('header' in location) dropUpstreamHeader(ctx.headers, location.header)
      trace(ctx, 'apply', `key ${entry.name}`)
      return CONTINUE
    }
  }
}
