/**
 * External authorization against a plain HTTP service, as Envoy's HTTP ext_authz client does
 * it: the request's method, `pathPrefix` + path and query, its headers (those included by
 * the policy) and optionally its buffered body go to the service. A 2xx answer allows: the
 * response headers the policy lists are copied onto the upstream request (overwriting), and
 * `x-envoy-auth-headers-to-remove` names request headers to drop. Any other status denies
 * with that status, the service's body and its end-to-end headers. No answer (refused, reset,
 * timed out) is a failure.
 */

import type { Dispatcher } from 'undici'
import type { CheckInput, CheckResult, HeaderMutation } from './ext-authz-check.ts'
import { PorticoError } from '../util/errors.ts'

/** Request headers never forwarded to the service (framing is the check's own). */
const NOT_FORWARDED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'expect', 'upgrade', 'te', 'trailer'])
/** Response headers never copied to the client on a denial. */
const NOT_RETURNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'date', 'server'])

/**
 * Headers of an allowing answer never copied upstream when every header is (allowedResponseHeaders
 * null): besides framing ones and Host, those describing the answer's own body or being a
 * response's (its content-type would replace the request body's).
 */
const NOT_COPIED = new Set([...NOT_RETURNED, 'host', 'content-type', 'content-encoding', 'content-language', 'content-location', 'content-range', 'etag', 'last-modified', 'set-cookie'])

export const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove'
/** Largest denial body passed on to the client. */
const MAX_DENIAL_BODY = 64 * 1024

export interface HttpCheckOptions {
  /** `http://host:port` of the service. */
  origin: string
  pathPrefix: string
  timeoutMs: number
  /**
   * Lower-case names copied from a 2xx answer onto the upstream request; null: every header
   * of the answer but NOT_COPIED (Gateway API HTTPAuthConfig with an empty
   * allowedResponseHeaders).
   */
  allowedResponseHeaders: readonly string[] | null
}

/** Sends one check; never rejects (failures are `decision: 'error'`). */
export async function httpCheck (dispatcher: Dispatcher, input: CheckInput, options: HttpCheckOptions): Promise<CheckResult> {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(input.headers)) {
    if (!NOT_FORWARDED.has(name) && !name.startsWith(':')) headers[name] = value
  }
  if (input.body !== null) headers['content-length'] = String(input.body.length)
  // The check's own trace context, whichever headers the policy passes on.
  if (input.traceHeaders !== null) Object.assign(headers, input.traceHeaders)
  let res: Dispatcher.ResponseData
  try {
    res = await dispatcher.request({
      origin: options.origin,
      path: `${options.pathPrefix}${input.path}`,
      method: input.method as Dispatcher.HttpMethod,
      headers,
      body: input.body,
      signal: AbortSignal.timeout(options.timeoutMs)
    })
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return { decision: 'error', reason: `timed out after ${options.timeoutMs}ms` }
    return { decision: 'error', reason: e.code !== undefined ? `${e.code}: ${e.message}` : e.message }
  }
  const status = res.statusCode
  if (status >= 200 && status < 300) {
    res.body.resume()
    const requestHeaders: HeaderMutation[] = []
    const names = options.allowedResponseHeaders ?? Object.keys(res.headers).filter(n => !NOT_COPIED.has(n) && n !== HEADERS_TO_REMOVE)
    for (const name of names) {
      const v = res.headers[name]
      if (v !== undefined) requestHeaders.push({ name, value: Array.isArray(v) ? v.join(',') : v, action: 'overwrite' })
    }
    const remove = res.headers[HEADERS_TO_REMOVE]
    const removeHeaders = remove === undefined ? [] : (Array.isArray(remove) ? remove.join(',') : remove).split(',').map(s => s.trim().toLowerCase()).filter(s => s !== '')
    return { decision: 'allow', requestHeaders, removeHeaders, responseHeaders: [] }
  }
  let body: string
  try {
    body = await readLimited(res.body, MAX_DENIAL_BODY, options.timeoutMs)
  } catch (err) {
    return { decision: 'error', reason: `reading the service's answer: ${(err as Error).message}` }
  }
  const out: HeaderMutation[] = []
  for (const [name, v] of Object.entries(res.headers)) {
    if (v === undefined || NOT_RETURNED.has(name)) continue
    for (const value of Array.isArray(v) ? v : [v]) out.push({ name, value, action: name === 'set-cookie' ? 'append' : 'overwrite' })
  }
  return { decision: 'deny', status: status >= 200 && status <= 599 ? status : 403, headers: out, body }
}

async function readLimited (body: Dispatcher.ResponseData['body'], limit: number, timeoutMs: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  const timer = setTimeout(() => body.destroy(new PorticoError('PORTICO_AUTH_SERVICE_TIMEOUT', `timed out after ${timeoutMs}ms`)), timeoutMs)
  try {
    for await (const chunk of body) {
      const buf = chunk as Buffer
      if (size + buf.length > limit) {
        chunks.push(buf.subarray(0, limit - size))
        body.destroy()
        break
      }
      chunks.push(buf)
      size += buf.length
    }
  } finally {
    clearTimeout(timer)
  }
  return Buffer.concat(chunks).toString('utf8')
}
