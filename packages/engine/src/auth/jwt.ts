/**
 * JWT validation with jose: signature against the provider's keys, only asymmetric
 * algorithms (never `none`, never HMAC with a public key), issuer, audience, and
 * exp/nbf with a small leeway. Failures carry a short reason for the 401 and the trace.
 */

import { jose, JwksCache } from './jwks.ts'

export const DEFAULT_JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']

/** Tokens longer than this are refused before any parsing. */
export const MAX_TOKEN_LENGTH = 16 * 1024

export interface JwtProvider {
  issuer: string
  audiences: string[]
  jwks: JwksCache
  algorithms: string[]
  /** Seconds of clock skew tolerated on exp/nbf. */
  leewaySeconds: number
}

export type JwtResult =
  | { ok: true, claims: Record<string, unknown>, issuer: string }
  | { ok: false, reason: string }

/** Milliseconds since the epoch; injectable so tests move time instead of sleeping. */
export type Clock = () => number

export async function verifyJwt (token: string, providers: readonly JwtProvider[], now: Clock = Date.now): Promise<JwtResult> {
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, reason: `token too large (over ${MAX_TOKEN_LENGTH} bytes)` }
  let header
  try {
    header = jose().decodeProtectedHeader(token)
  } catch {
    return { ok: false, reason: 'malformed token' }
  }
  if (header.alg === undefined || header.alg === 'none') return { ok: false, reason: 'unsigned token (alg none) not accepted' }
  let last: JwtResult = { ok: false, reason: 'no provider accepted the token' }
  for (const provider of providers) {
    if (!provider.algorithms.includes(header.alg)) {
      last = { ok: false, reason: `algorithm ${header.alg} not allowed` }
      continue
    }
    try {
      const { payload } = await jose().jwtVerify(token, provider.jwks.resolve, {
        issuer: provider.issuer,
        audience: provider.audiences,
        algorithms: provider.algorithms,
        clockTolerance: provider.leewaySeconds,
        currentDate: new Date(now())
      })
      return { ok: true, claims: payload as Record<string, unknown>, issuer: provider.issuer }
    } catch (err) {
      last = { ok: false, reason: describe(err) }
      // A token for another issuer may be for the next provider; anything else is final.
      if (!(err instanceof jose().errors.JWTClaimValidationFailed && err.claim === 'iss')) return last
    }
  }
  return last
}

function describe (err: unknown): string {
  if (err instanceof jose().errors.JWTExpired) return 'token expired'
  if (err instanceof jose().errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss': return 'wrong issuer'
      case 'aud': return 'wrong audience'
      case 'nbf': return 'token not yet valid'
      default: return `invalid claim ${err.claim}: ${err.reason}`
    }
  }
  if (err instanceof jose().errors.JWSSignatureVerificationFailed) return 'invalid signature'
  if (err instanceof jose().errors.JOSEAlgNotAllowed) return 'algorithm not allowed'
  if (err instanceof jose().errors.JWKSNoMatchingKey) return 'unknown signing key'
  if (err instanceof jose().errors.JWSInvalid || err instanceof jose().errors.JWTInvalid) return 'malformed token'
  return (err as Error).message ?? 'invalid token'
}

const CACHE_MAX = 10_000
const CACHE_TTL_MS = 5 * 60_000

/**
 * Remembers tokens that verified, so a client sending the same token on every request pays
 * for the signature check once (as Envoy's jwt_authn cache does). An entry is used only
 * while the token's own exp/nbf still hold and for at most five minutes; failures are not
 * cached. One cache per compiled policy, so a config change starts afresh.
 */
export class VerifiedTokenCache {
  private readonly entries = new Map<string, { claims: Record<string, unknown>, issuer: string, until: number, nbf: number }>()
  private readonly leewayMs: number
  private readonly now: Clock

  constructor (leewaySeconds: number, options: { now?: Clock } = {}) {
    this.leewayMs = leewaySeconds * 1000
    this.now = options.now ?? Date.now
  }

  /**
   * The result for a token that verified before and still holds, synchronously (the hot
   * path: no promise, no microtask hop), else undefined — then call `verify`.
   */
  lookup (token: string): JwtResult | undefined {
    const hit = this.entries.get(token)
    if (hit === undefined) return undefined
    const now = this.now()
    if (hit.until > now && hit.nbf <= now + this.leewayMs) return { ok: true, claims: hit.claims, issuer: hit.issuer }
    this.entries.delete(token)
    return undefined
  }

  async verify (token: string, providers: readonly JwtProvider[]): Promise<JwtResult> {
    const known = this.lookup(token)
    if (known !== undefined) return known
    const now = this.now()
    const result = await verifyJwt(token, providers, this.now)
    if (result.ok) {
      const exp = typeof result.claims.exp === 'number' ? result.claims.exp * 1000 + this.leewayMs : Infinity
      const nbf = typeof result.claims.nbf === 'number' ? result.claims.nbf * 1000 : 0
      if (this.entries.size >= CACHE_MAX) this.entries.delete(this.entries.keys().next().value as string)
      this.entries.set(token, { claims: result.claims, issuer: result.issuer, until: Math.min(exp, now + CACHE_TTL_MS), nbf })
    }
    return result
  }
}
