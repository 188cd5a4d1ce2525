import { test } from 'node:test'
import assert from 'node:assert/strict'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { VerifiedTokenCache, DEFAULT_JWT_ALGORITHMS, type JwtProvider } from '../src/auth/jwt.ts'
import { JwksCache } from '../src/auth/jwks.ts'

async function setup () {
  const { publicKey, privateKey } = await generateKeyPair('RS256')
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256' }
  const provider: JwtProvider = { issuer: 'https://iss/', audiences: ['aud'], jwks: new JwksCache({ keys: { keys: [jwk] } }), algorithms: DEFAULT_JWT_ALGORITHMS, leewaySeconds: 0 }
  const sign = (exp: number, nbf?: number) => {
    const jwt = new SignJWT({ sub: 's' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer('https://iss/').setAudience('aud').setExpirationTime(exp)
    if (nbf !== undefined) jwt.setNotBefore(nbf)
    return jwt.sign(privateKey)
  }
  return { provider, sign }
}

test('a verified token is served from the cache only while it is still valid', async () => {
  const { provider, sign } = await setup()
  // An injected clock: the token's 2 s pass at once instead of a 2.1 s sleep.
  let clock = Date.now()
  const cache = new VerifiedTokenCache(0, { now: () => clock })
  const now = Math.floor(clock / 1000)
  const token = await sign(now + 2)
  assert.equal((await cache.verify(token, [provider])).ok, true)
  assert.equal((await cache.verify(token, [provider])).ok, true, 'from the cache')
  clock += 2100
  const later = await cache.verify(token, [provider])
  assert.equal(later.ok, false, 'expired tokens are not served from the cache')
  assert.equal(!later.ok && later.reason, 'token expired')
})

test('failures are not cached; a tampered token never matches a cached one', async () => {
  const { provider, sign } = await setup()
  const cache = new VerifiedTokenCache(0)
  const token = await sign(Math.floor(Date.now() / 1000) + 60)
  assert.equal((await cache.verify(token, [provider])).ok, true)
  const [h, p] = token.split('.')
  const tampered = `${h}.${p}.${'A'.repeat(20)}`
  assert.equal((await cache.verify(tampered, [provider])).ok, false)
  assert.equal((await cache.verify(tampered, [provider])).ok, false)
})
