/**
 * Browser logins for tests: a real OpenID provider (`oidc-provider`) set up for the
 * authorization code flow with PKCE (required), a confidential client, accounts with claims
 * in the ID token, RP-initiated logout, and its development login and consent forms; and a
 * minimal browser (undici, redirects followed by hand, a cookie jar per host) that logs in
 * by filling those forms with real HTTP requests.
 */

import http from 'node:http'
import type { Socket } from 'node:net'
import Provider from 'oidc-provider'
import { quietOidcProviderNotices } from './oidc-quiet.ts'
import { request } from 'undici'
import { newSigningKey } from './idp.ts'

quietOidcProviderNotices()

export interface LoginIdpOptions {
  port: number
  client: { id: string, secret: string, redirectUris: string[], postLogoutRedirectUris: string[] }
  /** Account id → extra claims (sub is the id). */
  accounts: Record<string, Record<string, unknown>>
}

export interface LoginIdp {
  issuer: string
  stop(): Promise<void>
}

export async function startLoginIdp (options: LoginIdpOptions): Promise<LoginIdp> {
  const issuer = `http://127.0.0.1:${options.port}`
  const key = await newSigningKey()
  const provider = new Provider(issuer, {
    clients: [{
      client_id: options.client.id,
      client_secret: options.client.secret,
      redirect_uris: options.client.redirectUris,
      post_logout_redirect_uris: options.client.postLogoutRedirectUris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic'
    }],
    jwks: { keys: [key as never] },
    cookies: { keys: ['test-only-cookie-signing-key'] },
    claims: { openid: ['sub'], email: ['email'], profile: ['name'], groups: ['groups'] },
    // Scope claims in the ID token itself (Portico's session holds the ID token's claims).
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    findAccount: async (_ctx, id) => {
      const claims = options.accounts[id]
      if (claims === undefined) return undefined
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) }
    },
    features: {
      devInteractions: { enabled: true },
      rpInitiatedLogout: { enabled: true }
    }
  })
  const server = http.createServer(provider.callback())
  const sockets = new Set<Socket>()
  server.on('connection', s => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>(resolve => server.listen({ host: '127.0.0.1', port: options.port }, resolve))
  return {
    issuer,
    stop: () => new Promise<void>(resolve => {
      server.close(() => resolve())
      for (const s of sockets) s.destroy()
    })
  }
}

export interface Page {
  url: string
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  /** `set-cookie` values of this response. */
  setCookies: string[]
}

/** A cookie-keeping, redirect-following (by hand) HTTP client that says it is a browser. */
export class Browser {
  /** host → cookie name → value. */
  readonly jar = new Map<string, Map<string, string>>()
  /** Every response seen, in order. */
  readonly history: Page[] = []

  cookies (url: string): Map<string, string> {
    const host = new URL(url).host
    let c = this.jar.get(host)
    if (c === undefined) this.jar.set(host, c = new Map())
    return c
  }

  /** One request; cookies sent from and stored in the jar. */
  async fetch (url: string, options: { method?: string, headers?: Record<string, string>, form?: Record<string, string> } = {}): Promise<Page> {
    const jar = this.cookies(url)
    const headers: Record<string, string> = { accept: 'text/html,application/xhtml+xml', ...options.headers }
    if (jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    let body: string | undefined
    if (options.form !== undefined) {
      body = new URLSearchParams(options.form).toString()
      headers['content-type'] = 'application/x-www-form-urlencoded'
    }
    const res = await request(url, { method: (options.method ?? (body !== undefined ? 'POST' : 'GET')) as 'GET', headers, body })
    const text = await res.body.text()
    const raw = res.headers['set-cookie']
    const setCookies = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]
    for (const line of setCookies) {
      const [pair, ...attrs] = line.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1).trim()
      const expired = attrs.some(a => /^\s*max-age=0\s*$/i.test(a)) || value === ''
      if (expired) jar.delete(name)
      else jar.set(name, value)
    }
    const page: Page = { url, status: res.statusCode, headers: res.headers, text, setCookies }
    this.history.push(page)
    return page
  }

  /** GETs `url` and follows redirects (up to `maxHops`); returns the last response. */
  async follow (url: string, maxHops = 10): Promise<Page> {
    let page = await this.fetch(url)
    for (let i = 0; i < maxHops && isRedirect(page); i++) page = await this.fetch(new URL(String(page.headers.location), page.url).href)
    return page
  }

  /**
   * Logs in as `user` starting from `url`: follows redirects to the provider, fills its
   * login and consent forms, and follows the redirects back. Returns the last response.
   */
  async login (url: string, user: string): Promise<Page> {
    let page = await this.follow(url)
    for (let step = 0; step < 6; step++) {
      const action = /<form[^>]*action="([^"]+)"/.exec(page.text)?.[1]
      const prompt = /name="prompt" value="([^"]+)"/.exec(page.text)?.[1]
      if (page.status !== 200 || action === undefined || prompt === undefined) return page
      const form: Record<string, string> = prompt === 'login' ? { prompt, login: user, password: 'any' } : { prompt }
      page = await this.fetch(new URL(action, page.url).href, { form })
      for (let i = 0; i < 10 && isRedirect(page); i++) page = await this.fetch(new URL(String(page.headers.location), page.url).href)
    }
    return page
  }
}

export function isRedirect (page: Page): boolean {
  return page.status >= 300 && page.status < 400 && page.headers.location !== undefined
}
