/** `basicAuth`: HTTP Basic credentials checked against an htpasswd file. */

import type { RequestContext } from '../request/context.ts'
import type { BasicAuthIR } from '../ir/policy.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import { HtpasswdVerifier, parseHtpasswd } from '../auth/htpasswd.ts'
import { CONTINUE } from './header-modifier.ts'
import { dropUpstreamHeader } from '../http/headers.ts'

export function basicAuth (ir: BasicAuthIR): CompiledPolicy {
  const verifier = new HtpasswdVerifier(parseHtpasswd(ir.htpasswd).entries)
  const challenge = `Basic realm="${ir.realm.replace(/"/g, '')}", charset="UTF-8"`
  const refuse = (reason: string): PolicyOutcome => ({
    action: 'respond',
    status: 401,
    body: `basic authentication failure: ${reason}`,
    headers: { 'www-authenticate': challenge },
    reason: 'BasicAuth'
  })
  const trace = (ctx: RequestContext, type: 'apply' | 'skip' | 'deny', details: string) =>
    ctx.tracer?.emit({ type: 'policy', kind: 'basicAuth', result: { type, details } }, { severity: type === 'deny' ? 'warn' : 'info' })
  return {
    kind: 'basicAuth',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      const header = ctx.headers.authorization
      const value = Array.isArray(header) ? header[0] : header
      if (value === undefined || !/^basic /i.test(value)) {
        if (ir.mode === 'optional') return CONTINUE
        trace(ctx, 'deny', 'no credentials')
        return refuse('no credentials')
      }
      const decoded = Buffer.from(value.slice(6).trim(), 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      const user = colon === -1 ? decoded : decoded.slice(0, colon)
      const password = colon === -1 ? '' : decoded.slice(colon + 1)
      if (!(await verifier.verify(user, password))) {
        trace(ctx, 'deny', `invalid credentials for "${user}"`)
        return refuse('invalid credentials')
      }
      ctx.auth.basicAuth = { username: user }
      dropUpstreamHeader(ctx.headers, 'authorization')
      trace(ctx, 'apply', `user ${user}`)
      return CONTINUE
    }
  }
}
