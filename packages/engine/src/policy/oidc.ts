/**
 * `oidc`: browser login for routes — OpenID Connect authorization code flow with PKCE.
 *
 * - A request with a valid session cookie passes; the ID token's claims become `jwt` for
 *   CEL (so `authorization` rules work as with jwtAuth) and the session cookie is removed
 *   before the request goes upstream.
 * - Without one, a browser navigation (GET/HEAD accepting text/html) is redirected (302) to
 *   the provider's authorization endpoint with state, nonce and an S256 code challenge; the
 *   state, nonce, code verifier and the original URL ride in a short-lived encrypted cookie
 *   (`<cookieName>_login`, 10 minutes). Anything else gets 401.
 * - The redirect URI's path completes the login: the state must match the login cookie's
 *   (400 otherwise), the code is exchanged and the ID token validated (openid-client), and
 *   an encrypted session cookie (AES-256-GCM; HttpOnly, SameSite=Lax, Secure on https)
 *   carrying the claims and expiry is set before redirecting to the original URL.
 * - The logout path clears the session and redirects to the provider's end_session_endpoint
 *   when it has one, else to postLogoutRedirectUri (or /).
 */

import type { RequestContext } from '../request/context.ts'
import type { CompiledPolicy, PolicyOutcome } from '../request/policy.ts'
import type { OidcIR } from '../ir/policy.ts'
import type { PolicyServices } from './services.ts'
import { keyFromHex, open, readCookie, seal, setCookie, withoutCookies } from '../auth/session-cookie.ts'
import { randomNonce, randomPKCECodeVerifier, randomState } from '../auth/oidc-client.ts'
import { baseUrl } from './protected-resource.ts'
import { CONTINUE } from './header-modifier.ts'

/** How long a login may take from the redirect to the callback. */
const LOGIN_TTL_SECONDS = 600
/** Browsers drop cookies larger than this; the ID token (kept for logout) is left out first. */
const MAX_COOKIE_BYTES = 4000

interface LoginState {
  /** state, nonce, PKCE code verifier, original URL (path and query). */
  s: string
  n: string
  v: string
  u: string
}

interface Session {
  /** ID token claims. */
  c: Record<string, unknown>
  /** The ID token, for id_token_hint at logout (left out when the cookie would be too big). */
  t?: string
}

type TraceResult = 'apply' | 'skip' | 'deny'

function trace (ctx: RequestContext, type: TraceResult, details: string): void {
  ctx.tracer?.emit({ type: 'policy', kind: 'oidc', result: { type, details } }, { severity: type === 'deny' ? 'warn' : 'info' })
}

export function oidc (ir: OidcIR, services: PolicyServices): CompiledPolicy {
  const client = services.oidc({ issuer: ir.issuer, clientId: ir.clientId, ...(ir.clientSecret !== undefined ? { clientSecret: ir.clientSecret } : {}) })
  const key = ir.sessionKey !== undefined ? keyFromHex(ir.sessionKey) : services.cookieKey('oidc session cookie')
  // What each sealed cookie is for, and for which client: one never opens as another.
  const sessionAad = `portico oidc session\n${ir.issuer}\n${ir.clientId}`
  const loginAad = `portico oidc login\n${ir.issuer}\n${ir.clientId}`
  const sessionCookie = ir.cookieName
  const loginCookie = `${ir.cookieName}_login`
  const ownCookies = new Set([sessionCookie, loginCookie])
  const absoluteRedirect = /^https?:\/\//i.test(ir.redirectUri)
  const callbackPath = absoluteRedirect ? new URL(ir.redirectUri).pathname : ir.redirectUri
  const redirectUri = (ctx: RequestContext): string => absoluteRedirect ? ir.redirectUri : `${baseUrl(ctx)}${ir.redirectUri}`
  const secure = (ctx: RequestContext): boolean => absoluteRedirect ? ir.redirectUri.startsWith('https:') : baseUrl(ctx).startsWith('https:')
  const absolute = (ctx: RequestContext, uri: string): string => /^https?:\/\//i.test(uri) ? uri : `${baseUrl(ctx)}${uri}`

  const refuse = (status: number, body: string, headers?: Record<string, string | string[]>): PolicyOutcome =>
    ({ action: 'respond', status, body, reason: 'OidcAuth', ...(headers !== undefined ? { headers } : {}) })

  function readSession (ctx: RequestContext): { session: Session | null, present: boolean } {
    const raw = readCookie(ctx.headers.cookie, sessionCookie)
    if (raw === null || raw === '') return { session: null, present: false }
    return { session: open<Session>(key, sessionAad, raw), present: true }
  }

  async function startLogin (ctx: RequestContext, why: string): Promise<PolicyOutcome> {
    const login: LoginState = { s: randomState(), n: randomNonce(), v: randomPKCECodeVerifier(), u: ctx.query === '' ? ctx.originalPath : `${ctx.originalPath}?${ctx.query}` }
    let location: URL
    try {
      location = await client.authorizationUrl({ redirectUri: redirectUri(ctx), scopes: ir.scopes, state: login.s, nonce: login.n, codeVerifier: login.v })
    } catch (err) {
      trace(ctx, 'deny', `${why}; cannot start a login: ${(err as Error).message}`)
      return refuse(503, `identity provider unavailable: ${(err as Error).message}`)
    }
    const sealed = seal(key, loginAad, login, Math.floor(Date.now() / 1000) + LOGIN_TTL_SECONDS)
    trace(ctx, 'deny', `${why}: redirecting to ${location.origin}${location.pathname} to log in`)
    return refuse(302, '', {
      location: location.href,
      'set-cookie': setCookie(loginCookie, sealed, { maxAge: LOGIN_TTL_SECONDS, secure: secure(ctx) }),
      'cache-control': 'no-store'
    })
  }

  async function finishLogin (ctx: RequestContext): Promise<PolicyOutcome> {
    const clearLogin = setCookie(loginCookie, '', { maxAge: 0, secure: secure(ctx) })
    const raw = readCookie(ctx.headers.cookie, loginCookie)
    const login = raw === null ? null : open<LoginState>(key, loginAad, raw)
    if (login === null) {
      trace(ctx, 'deny', `callback without a valid login cookie (${raw === null ? 'none' : 'invalid or expired'})`)
      return refuse(400, 'login failed: no login in progress (or it expired); start again', { 'set-cookie': clearLogin })
    }
    const params = new URLSearchParams(ctx.query)
    if (params.get('state') !== login.s) {
      trace(ctx, 'deny', 'callback state does not match the login in progress')
      return refuse(400, 'login failed: state mismatch', { 'set-cookie': clearLogin })
    }
    const error = params.get('error')
    if (error !== null) {
      const description = params.get('error_description')
      trace(ctx, 'deny', `the provider refused the login: ${error}${description !== null ? ` (${description})` : ''}`)
      return refuse(401, `login failed: ${error}${description !== null ? `: ${description}` : ''}`, { 'set-cookie': clearLogin })
    }
    let result
    try {
      result = await client.finishLogin(new URL(`${redirectUri(ctx)}?${ctx.query}`), { state: login.s, nonce: login.n, codeVerifier: login.v })
    } catch (err) {
      trace(ctx, 'deny', `login failed: ${(err as Error).message}`)
      return refuse(401, `login failed: ${(err as Error).message}`, { 'set-cookie': clearLogin })
    }
    const now = Math.floor(Date.now() / 1000)
    const expiresAt = ir.sessionTtlSeconds !== undefined ? now + ir.sessionTtlSeconds : result.expiresAt
    let sealed = seal(key, sessionAad, { c: result.claims, t: result.idToken } satisfies Session, expiresAt)
    if (sealed.length + sessionCookie.length > MAX_COOKIE_BYTES) sealed = seal(key, sessionAad, { c: result.claims } satisfies Session, expiresAt)
    const target = safeRedirect(login.u)
    trace(ctx, 'apply', `logged in ${String(result.claims.sub ?? '-')}; redirecting to ${target}`)
    return refuse(302, '', {
      location: target,
      'set-cookie': [setCookie(sessionCookie, sealed, { maxAge: expiresAt - now, secure: secure(ctx) }), clearLogin],
      'cache-control': 'no-store'
    })
  }

  async function logout (ctx: RequestContext): Promise<PolicyOutcome> {
    const { session } = readSession(ctx)
    const postLogout = ir.postLogoutRedirectUri !== undefined ? absolute(ctx, ir.postLogoutRedirectUri) : undefined
    const endSession = await client.endSessionUrl({
      ...(session?.t !== undefined ? { idTokenHint: session.t } : {}),
      ...(postLogout !== undefined ? { postLogoutRedirectUri: postLogout } : {})
    })
    const location = endSession?.href ?? ir.postLogoutRedirectUri ?? '/'
    trace(ctx, 'apply', `logout${session !== null ? ` of ${String(session.c.sub ?? '-')}` : ''}; redirecting to ${endSession !== null ? 'the provider\'s end_session_endpoint' : location}`)
    return refuse(302, '', {
      location,
      'set-cookie': [setCookie(sessionCookie, '', { maxAge: 0, secure: secure(ctx) }), setCookie(loginCookie, '', { maxAge: 0, secure: secure(ctx) })],
      'cache-control': 'no-store'
    })
  }

  return {
    kind: 'oidc',
    async onRequest (ctx: RequestContext): Promise<PolicyOutcome> {
      if (ctx.path === callbackPath) return await finishLogin(ctx)
      if (ctx.path === ir.logoutPath) return await logout(ctx)
      const { session, present } = readSession(ctx)
      if (session !== null) {
        ctx.auth.jwt = session.c
        const cookie = withoutCookies(ctx.headers.cookie, ownCookies)
        if (cookie === undefined) delete ctx.headers.cookie
        else ctx.headers.cookie = cookie
        trace(ctx, 'apply', `session of ${String(session.c.sub ?? '-')}`)
        return CONTINUE
      }
      const why = present ? 'invalid or expired session cookie' : 'no session'
      if (isBrowserNavigation(ctx)) return await startLogin(ctx, why)
      trace(ctx, 'deny', `${why} (not a browser navigation: 401)`)
      return refuse(401, `authentication required: ${why}`)
    }
  }
}

function isBrowserNavigation (ctx: RequestContext): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return false
  const accept = ctx.req.headers.accept
  return typeof accept === 'string' && accept.includes('text/html')
}

/** Only a path on this gateway (never `//host` or a scheme): no open redirect. */
function safeRedirect (url: string): string {
  return url.startsWith('/') && !url.startsWith('//') && !url.startsWith('/\\') ? url : '/'
}
