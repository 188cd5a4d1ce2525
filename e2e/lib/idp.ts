/**
 * A real OpenID provider for tests: `oidc-provider` on loopback, issuing JWT access tokens
 * with the client-credentials grant at `{issuer}oauth/token` — taking the service document's
 * request shape (JSON `client_id`, `client_secret`, `audience`, `grant_type`) — for an API
 * audience, with a `permissions` claim per client. Keys are ours, so tests can also forge
 * tokens (expired, wrong audience, ...) signed exactly as the provider would, and rotate them.
 */

import http from 'node:http'
import type { Socket } from 'node:net'
import Provider, { errors } from 'oidc-provider'
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose'
import { request } from 'undici'
import { quietOidcProviderNotices } from './oidc-quiet.ts'

quietOidcProviderNotices()

export interface IdpClient {
  id: string
  secret: string
  permissions: string[]
}

export interface Idp {
  /** With a trailing slash, as the service document writes `{issuer_url}`. */
  issuer: string
  port: number
  jwksUrl: string
  audience: string
  /** The current signing key (private JWK with kid). */
  key: JWK & { kid: string }
  /** Client-credentials token, requested exactly as the service document shows. */
  token(client: IdpClient, audience?: string): Promise<string>
  /** A token signed with the provider's current key, with any claims (for bad-token tests). */
  forge(claims: Record<string, unknown>, header?: Record<string, unknown>): Promise<string>
  /** Replaces the signing key (the old one stays published unless `dropOld`). */
  rotate(options?: { dropOld?: boolean }): Promise<void>
  stop(): Promise<void>
  /** Starts again on the same port after stop(). */
  start(): Promise<void>
}

export async function newSigningKey (): Promise<JWK & { kid: string }> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const jwk = await exportJWK(privateKey)
  return { ...jwk, kid: `k${Math.random().toString(36).slice(2, 10)}`, alg: 'RS256', use: 'sig' }
}

export async function startIdp (options: { clients: IdpClient[], audience?: string, port?: number }): Promise<Idp> {
  const audience = options.audience ?? 'https://api.portico.test'
  let keys: Array<JWK & { kid: string }> = [await newSigningKey()]
  let server: http.Server | null = null
  const sockets = new Set<Socket>()
  let port = options.port ?? 0
  let issuer = ''

  const makeProvider = () => {
    const provider = new Provider(issuer, {
      clients: options.clients.map(c => ({
        client_id: c.id,
        client_secret: c.secret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_post'
      })),
      // The newest key signs; older ones stay published for tokens already out.
      jwks: { keys: [...keys].reverse() as never },
      routes: { token: '/oauth/token', jwks: '/.well-known/jwks.json' },
      scopes: ['mcp'],
      ttl: { ClientCredentials: 300 },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => audience,
          getResourceServerInfo: (_ctx, resource) => {
            if (resource !== audience) throw new errors.InvalidTarget()
            return { scope: 'mcp', audience, accessTokenFormat: 'jwt', accessTokenTTL: 300, jwt: { sign: { alg: 'RS256' } } }
          }
        }
      },
      extraTokenClaims: (_ctx, token) => {
        const client = options.clients.find(c => c.id === (token as { clientId?: string }).clientId)
        return client === undefined ? {} : { permissions: client.permissions }
      }
    })
    provider.proxy = true
    return provider
  }

  const start = async () => {
    server = http.createServer()
    server.on('connection', s => {
      sockets.add(s)
      s.once('close', () => sockets.delete(s))
    })
    await new Promise<void>(resolve => server!.listen({ host: '127.0.0.1', port }, resolve))
    port = (server.address() as { port: number }).port
    issuer = `http://127.0.0.1:${port}/`
    const callback = makeProvider().callback()
    server.on('request', (req, res) => {
      // The service document's token request is JSON with `audience`; oidc-provider speaks
      // RFC 6749 forms with an RFC 8707 `resource`. Translate, then hand over.
      if (req.method === 'POST' && req.url === '/oauth/token' && String(req.headers['content-type']).startsWith('application/json')) {
        const chunks: Buffer[] = []
        req.on('data', c => chunks.push(c as Buffer))
        req.on('end', () => {
          let body: Record<string, string> = {}
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, string>
          } catch {
            res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_request"}')
            return
          }
          // The stream is consumed: oidc-provider then reads the pre-parsed req.body.
          const form: Record<string, string> = { grant_type: body.grant_type ?? '', client_id: body.client_id ?? '', client_secret: body.client_secret ?? '', scope: 'mcp' }
          if (body.audience !== undefined) form.resource = body.audience
          req.headers['content-type'] = 'application/x-www-form-urlencoded'
          // (a length keeps the request "with a body" in the content-type check)
          req.headers['content-length'] = String(new URLSearchParams(form).toString().length)
          ;(req as http.IncomingMessage & { body?: unknown }).body = form
          callback(req, res)
        })
        return
      }
      callback(req, res)
    })
  }

  const stop = async () => {
    if (server === null) return
    const s = server
    server = null
    await new Promise<void>(resolve => {
      s.close(() => resolve())
      for (const sock of sockets) sock.destroy()
    })
  }

  await start()
  return {
    get issuer () { return issuer },
    get port () { return port },
    get jwksUrl () { return `${issuer}.well-known/jwks.json` },
    audience,
    get key () { return keys.at(-1)! },
    async token (client, aud = audience) {
      // A fresh connection each time: the provider may have been restarted (rotation).
      const res = await request(`${issuer}oauth/token`, {
        method: 'POST',
        reset: true,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_id: client.id, client_secret: client.secret, audience: aud, grant_type: 'client_credentials' })
      })
      const json = await res.body.json() as { access_token?: string, error?: string, error_description?: string }
      if (json.access_token === undefined) throw new Error(`token request failed: ${json.error ?? res.statusCode} ${json.error_description ?? ''}`)
      return json.access_token
    },
    async forge (claims, header = {}) {
      const key = keys.at(-1)!
      const now = Math.floor(Date.now() / 1000)
      const privateKey = await importJWK(key, 'RS256')
      return await new SignJWT({ iss: issuer, aud: audience, sub: 'forged', iat: now, exp: now + 300, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt', ...header })
        .sign(privateKey)
    },
    async rotate (opts = {}) {
      const next = await newSigningKey()
      keys = opts.dropOld === true ? [next] : [...keys, next]
      await stop()
      await start()
    },
    stop,
    start
  }
}
