/**
 * The relying-party side of OpenID Connect, with openid-client (panva): discovery of the
 * provider's metadata (once, lazily; a failure is retried by the next caller), the
 * authorization URL with PKCE (S256), state and nonce, the code exchange, ID token
 * validation (issuer, audience, expiry, nonce, and the signature against the provider's
 * JWKS), and the RP-initiated logout URL. Plain-HTTP issuers (a provider on loopback in
 * tests and development) are allowed; openid-client refuses them by default.
 */

import type * as client from 'openid-client'
import { lazyRequire } from '../util/lazy-require.ts'
import { PorticoError } from '../util/errors.ts'

export interface OidcClientOptions {
  issuer: string
  clientId: string
  /** Absent: a public client (token endpoint auth `none`, PKCE only). */
  clientSecret?: string
  /** Each request to the provider, seconds (default 10). */
  timeoutSeconds?: number
}

export interface LoginRequest {
  redirectUri: string
  scopes: readonly string[]
  state: string
  nonce: string
  codeVerifier: string
}

export interface LoginResult {
  claims: Record<string, unknown>
  idToken: string
  /** The ID token's `exp` (seconds since the epoch). */
  expiresAt: number
}

/** openid-client (and oauth4webapi under it), loaded when a config first has an oidc policy. */
const openid = lazyRequire<typeof client>('openid-client')

export class OidcClient {
  readonly options: OidcClientOptions
  private config: Promise<client.Configuration> | null = null

  constructor (options: OidcClientOptions) {
    this.options = options
    // Loaded now, while the config compiles, rather than by the first login.
    openid()
  }

  /** The provider's configuration (discovered on first use, then cached). */
  async configuration (): Promise<client.Configuration> {
    if (this.config === null) {
      const { issuer, clientId, clientSecret } = this.options
      const execute: Array<(config: client.Configuration) => void> = [openid().enableNonRepudiationChecks]
      if (issuer.startsWith('http:')) execute.push(openid().allowInsecureRequests)
      const pending = openid().discovery(
        new URL(issuer),
        clientId,
        clientSecret !== undefined ? { client_secret: clientSecret } : undefined,
        clientSecret !== undefined ? openid().ClientSecretBasic(clientSecret) : openid().None(),
        { execute, timeout: this.options.timeoutSeconds ?? 10 }
      )
      this.config = pending
      pending.catch(() => { if (this.config === pending) this.config = null })
    }
    try {
      return await this.config
    } catch (err) {
      throw new PorticoError('PORTICO_OIDC_DISCOVERY', `discovery of ${this.options.issuer} failed: ${describe(err)}`, { cause: err })
    }
  }

  /** Where to send the browser to log in. */
  async authorizationUrl (login: LoginRequest): Promise<URL> {
    const config = await this.configuration()
    return openid().buildAuthorizationUrl(config, {
      redirect_uri: login.redirectUri,
      scope: login.scopes.join(' '),
      state: login.state,
      nonce: login.nonce,
      code_challenge: await openid().calculatePKCECodeChallenge(login.codeVerifier),
      code_challenge_method: 'S256'
    })
  }

  /**
   * Validates the authorization response at `callbackUrl` (the redirect URI with the
   * provider's query), exchanges the code and validates the ID token.
   */
  async finishLogin (callbackUrl: URL, checks: { state: string, nonce: string, codeVerifier: string }): Promise<LoginResult> {
    const config = await this.configuration()
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>
    try {
      tokens = await openid().authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: checks.codeVerifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true
      })
    } catch (err) {
      throw new PorticoError('PORTICO_OIDC_LOGIN', describe(err), { cause: err })
    }
    const claims = tokens.claims()
    if (claims === undefined || tokens.id_token === undefined) throw new PorticoError('PORTICO_OIDC_LOGIN', 'the provider returned no ID token')
    return { claims: { ...claims }, idToken: tokens.id_token, expiresAt: claims.exp }
  }

  /** The provider's end-session URL, or null when it has none (or cannot be reached). */
  async endSessionUrl (params: { idTokenHint?: string, postLogoutRedirectUri?: string }): Promise<URL | null> {
    let config: client.Configuration
    try {
      config = await this.configuration()
    } catch {
      return null
    }
    if (config.serverMetadata().end_session_endpoint === undefined) return null
    const p: Record<string, string> = {}
    if (params.idTokenHint !== undefined) p.id_token_hint = params.idTokenHint
    if (params.postLogoutRedirectUri !== undefined) p.post_logout_redirect_uri = params.postLogoutRedirectUri
    return openid().buildEndSessionUrl(config, p)
  }
}

/** A one-line reason from openid-client's errors (OAuth error codes first). */
function describe (err: unknown): string {
  const e = err as { error?: string, error_description?: string, message?: string, code?: string, cause?: unknown }
  if (typeof e.error === 'string') return e.error_description !== undefined ? `${e.error}: ${e.error_description}` : e.error
  const cause = e.cause as { error?: string, error_description?: string, code?: string, message?: string } | undefined
  if (cause !== undefined && typeof cause.error === 'string') return cause.error_description !== undefined ? `${cause.error}: ${cause.error_description}` : cause.error
  const message = e.message ?? String(err)
  if (cause?.code !== undefined) return `${message} (${cause.code})`
  return message
}

/** openid-client's random values for a login (state, nonce, PKCE verifier). */
export function randomState (): string {
  return openid().randomState()
}

export function randomNonce (): string {
  return openid().randomNonce()
}

export function randomPKCECodeVerifier (): string {
  return openid().randomPKCECodeVerifier()
}
