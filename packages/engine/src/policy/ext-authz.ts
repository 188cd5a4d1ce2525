/**
 * `extAuthz`: every request is checked by an external authorization service before it goes
 * on — Envoy's gRPC `Authorization/Check` (wire-compatible with Envoy's ext_authz filter, so
 * OPA-Envoy, Authorino and the like work unchanged) or a plain HTTP service. An allow may
 * add, replace or remove upstream request headers (and add response headers); a denial is
 * answered with the service's status (default 403), headers and body. A service that fails
 * or does not answer within `timeout` denies (403 `external authorization failed: <why>`),
 * unless `failureMode: allow`.
 *
 * With `includeRequestBody` the body is read whole (up to `maxBytes`, 413 above), sent to the
 * service, and kept in `ctx.requestBody` so the backend still gets it intact.
 */

import { callTraceHeaders, endDecisionSpan, grpcClientAttributes, httpClientAttributes, startChildSpan } from '../trace/otel.ts'
import { randomUUID } from 'node:crypto'
import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { ExtAuthzIR } from '../ir/policy.ts'
import type { PolicyServices } from './services.ts'
import { applyHeaderMutations, removeHeaders, type CheckInput, type CheckResult, type HeaderMutation } from '../auth/ext-authz-check.ts'
import { grpcCheck } from '../auth/ext-authz-grpc.ts'
import { httpCheck } from '../auth/ext-authz-http.ts'
import { bodyReadFailure, readRequestBody, requestHasBody } from '../http/request-body.ts'
import { CONTINUE } from './header-modifier.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import { plainAddress } from '../util/host-port.ts'
import { performance } from '../util/clock.ts'

type TraceResult = 'apply' | 'skip' | 'deny'

/**
 * How the check is used: as a policy (the default), or as listener filter `label` (`listener
 * filter 1 of 2`), whose header changes route matching also reads (ctx.routingHeaders).
 */
export interface ExtAuthzUse {
  label: string
  routing: boolean
}

const AS_POLICY: ExtAuthzUse = { label: '', routing: false }

export function extAuthz (ir: ExtAuthzIR, services: PolicyServices, use: ExtAuthzUse = AS_POLICY): CompiledPolicy {
  const prefix = use.label !== '' ? `${use.label}: ` : ''
  const trace = (ctx: RequestContext, type: TraceResult, details: string): void => {
    ctx.tracer?.emit({ type: 'policy', kind: 'extAuthz', result: { type, details: prefix + details } }, { severity: type === 'deny' ? 'warn' : 'info' })
  }
  const url = new URL(ir.host)
  const tls = url.protocol === 'https:'
  const target = url.host
  const include = ir.includeRequestHeaders === null ? null : new Set(ir.includeRequestHeaders)
  const bodyLimit = ir.includeRequestBody?.maxBytes ?? 0
  let check: (input: CheckInput) => Promise<CheckResult>
  if ('grpc' in ir.protocol) {
    const client = services.extAuthzGrpc(target, tls)
    const options = { timeoutMs: ir.timeoutMs, packAsBytes: ir.includeRequestBody?.packAsBytes ?? false }
    check = input => grpcCheck(client, input, options)
  } else {
    const pool = services.httpPool(url.origin)
    const options = { origin: url.origin, pathPrefix: ir.protocol.http.pathPrefix, timeoutMs: ir.timeoutMs, allowedResponseHeaders: ir.protocol.http.allowedResponseHeaders }
    check = input => httpCheck(pool, input, options)
  }
  /** Response headers the service asked for, per request, applied on the way back. */
  const responseHeaders = new WeakMap<RequestContext, HeaderMutation[]>()
  // The check's client span: made once here, so a request pays nothing for it while tracing is off.
  const spanName = 'grpc' in ir.protocol ? 'envoy.service.auth.v3.Authorization/Check' : 'POST'
  const spanAttrs = 'grpc' in ir.protocol
    ? { ...grpcClientAttributes('envoy.service.auth.v3.Authorization', 'Check', target), 'portico.policy': 'extAuthz' }
    : { ...httpClientAttributes('POST', { scheme: url.protocol.slice(0, -1), host: url.hostname, port: Number(url.port !== '' ? url.port : tls ? 443 : 80), pathAndQuery: ir.protocol.http.pathPrefix ?? '/' }), 'portico.policy': 'extAuthz' }

  return {
    kind: 'extAuthz',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      let body: Buffer | null = null
      if (ir.includeRequestBody !== null && ctx.upgrade === null) {
        // A body another policy already read counts whole, whatever this policy's limit.
        const read = ctx.requestBody !== null ? 'buffered' : await readRequestBody(ctx, { maxBytes: bodyLimit, whenTooLarge: 'drain' })
        if (read === 'too-large') {
          trace(ctx, 'deny', `request body larger than includeRequestBody.maxBytes (${bodyLimit})`)
          return { action: 'respond', status: 413, body: 'payload too large', reason: 'ExtAuth' }
        }
        if (read instanceof Error) {
          trace(ctx, 'deny', `reading the request body: ${read.message}`)
          return { action: 'respond', ...bodyReadFailure(read) }
        }
        body = ctx.requestBody
      }
      const started = performance.now()
      const span = startChildSpan(ctx, spanName, spanAttrs)
      const input = checkInput(ctx, include, body, ir.contextExtensions)
      input.traceHeaders = callTraceHeaders(ctx, span)
      const result = await check(input)
      endDecisionSpan(span, result.decision, result.decision === 'error' ? result.reason : null)
      const took = `${Math.round(performance.now() - started)}ms`
      switch (result.decision) {
        case 'allow': {
          applyHeaderMutations(ctx.headers, result.requestHeaders)
          removeHeaders(ctx.headers, result.removeHeaders)
          if (use.routing && (result.requestHeaders.length > 0 || result.removeHeaders.length > 0)) {
            // Route matching reads the client's headers (hop-by-hop ones included), not the
            // upstream copy: the same changes go onto a copy of those. Host and :authority
            // are never changed (applyHeaderMutations / removeHeaders skip them): the
            // listener was chosen by them and is not chosen again.
            const routing = ctx.routingHeaders ??= { ...ctx.req.headers }
            applyHeaderMutations(routing as HeaderMap, result.requestHeaders)
            removeHeaders(routing as HeaderMap, result.removeHeaders)
          }
          if (result.responseHeaders.length > 0) responseHeaders.set(ctx, result.responseHeaders)
          const changes = [
            result.requestHeaders.length > 0 ? `set ${result.requestHeaders.map(h => h.name).join(', ')}` : '',
            result.removeHeaders.length > 0 ? `removed ${result.removeHeaders.join(', ')}` : ''
          ].filter(s => s !== '')
          trace(ctx, 'apply', `allowed by ${target} (${took})${changes.length > 0 ? `; ${changes.join('; ')}` : ''}`)
          return CONTINUE
        }
        case 'deny':
          trace(ctx, 'deny', `denied by ${target} with ${result.status} (${took})`)
          return { action: 'respond', status: result.status, body: result.body, headers: localHeaders(result.headers), reason: 'ExtAuth' }
        case 'error':
          if (ir.failureMode === 'allow') {
            trace(ctx, 'skip', `external authorization failed, allowed by failureMode allow: ${result.reason}`)
            return CONTINUE
          }
          trace(ctx, 'deny', `external authorization failed: ${result.reason}`)
          return {
            action: 'respond',
            status: result.status ?? 403,
            body: result.body ?? `external authorization failed: ${result.reason}`,
            headers: localHeaders(result.headers ?? []),
            reason: 'ExtAuth'
          }
      }
    },
    onResponse (ctx: RequestContext): void {
      const mutations = responseHeaders.get(ctx)
      if (mutations !== undefined) applyHeaderMutations(ctx.responseHeaders, mutations)
    }
  }
}

function localHeaders (mutations: readonly HeaderMutation[]): Record<string, string | string[]> {
  const headers: HeaderMap = {}
  applyHeaderMutations(headers, mutations)
  return headers as Record<string, string | string[]>
}

/** The request as the service sees it: Envoy's pseudo-headers, then the upstream headers. */
export function checkInput (ctx: RequestContext, include: ReadonlySet<string> | null, body: Buffer | null, contextExtensions: Record<string, string>): CheckInput {
  const headers: Record<string, string> = {
    ':authority': ctx.host,
    ':method': ctx.method,
    ':path': ctx.pathAndQuery,
    ':scheme': ctx.scheme
  }
  for (const [name, value] of Object.entries(ctx.headers)) {
    if (value === undefined || name === 'host' || (include !== null && !include.has(name))) continue
    headers[name] = Array.isArray(value) ? value.join(',') : value
  }
  const requestId = ctx.headers['x-request-id']
  const declared = Number(ctx.req.headers['content-length'] ?? NaN)
  return {
    id: typeof requestId === 'string' && requestId !== '' ? requestId : randomUUID(),
    method: ctx.method,
    path: ctx.pathAndQuery,
    host: ctx.host,
    scheme: ctx.scheme,
    protocol: ctx.req.httpVersion === '2.0' ? 'HTTP/2' : `HTTP/${ctx.req.httpVersion}`,
    size: body !== null ? body.length : Number.isFinite(declared) ? declared : requestHasBody(ctx.req.headers) ? -1 : 0,
    headers,
    body,
    traceHeaders: null,
    source: { address: plainAddress(ctx.sourceAddress), port: ctx.sourcePort },
    destination: { address: plainAddress(ctx.localAddress ?? ''), port: ctx.localPort ?? 0 },
    contextExtensions,
    time: ctx.startTime
  }
}
