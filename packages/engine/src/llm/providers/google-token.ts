/**
 * OAuth2 access tokens for Google Cloud (Vertex AI), from `google-auth-library`: a
 * service-account key (inline JSON or a key file) or, with neither, Application Default
 * Credentials (GOOGLE_APPLICATION_CREDENTIALS, then the GCE/GKE metadata server — workload
 * identity on GKE).
 *
 * - The library is loaded at the first token, so a gateway without Vertex never loads it.
 * - A token is reused until five minutes before it expires (the library's own eager-refresh
 *   margin); concurrent requests share one fetch.
 * - A service-account key's `token_uri` is honoured: google-auth-library for Node always posts
 *   to https://oauth2.googleapis.com/token, whereas the key names the endpoint to use (as the
 *   Python and Go libraries read it) — private token endpoints and the tests' loopback one.
 * - Tokens never appear in errors or logs: a failure says what failed, not what was sent.
 */

import { tokenCache, type CachedToken } from './token-cache.ts'
import { readFile, stat } from 'node:fs/promises'
import { lazyRequire } from '../../util/lazy-require.ts'
import { translationError } from '../canonical.ts'
import { PorticoError } from '../../util/errors.ts'

const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token'
const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform'
/** Refresh this long before expiry (google-auth-library's default eagerRefreshThresholdMillis). */
export const TOKEN_REFRESH_MARGIN_MS = 5 * 60 * 1000
/** Key files are a few KiB; anything much larger is not one. */
const MAX_KEY_FILE_BYTES = 64 * 1024

/** The fields of a service-account key file that matter here (the file has more). */
export interface ServiceAccountKey {
  type?: string
  client_email: string
  private_key: string
  private_key_id?: string
  project_id?: string
  token_uri?: string
  [field: string]: unknown
}

export interface GoogleTokenOptions {
  /** A service-account key, parsed. */
  key?: ServiceAccountKey
  /** A service-account key file, read at the first token. */
  keyFile?: string
  /** OAuth scopes; default cloud-platform. */
  scopes?: string[]
  /** Clock (ms), for tests. */
  now?: () => number
}

export interface AccessTokenSource {
  /** A valid access token; throws a TranslationError-shaped 503 when none can be had. */
  token (): Promise<string>
}

type GoogleAuthModule = typeof import('google-auth-library')
const loadGoogleAuth = lazyRequire<GoogleAuthModule>('google-auth-library')

interface TokenClient {
  getAccessToken (): Promise<{ token?: string | null }>
  credentials?: { expiry_date?: number | null }
  transporter?: { interceptors?: { request: { add: (i: { resolved: (c: { url?: unknown }) => Promise<{ url?: unknown }> }) => void } } }
}

export function googleAccessTokens (options: GoogleTokenOptions = {}): AccessTokenSource {
  const now = options.now ?? Date.now
  let client: Promise<TokenClient> | null = null

  async function makeClient (): Promise<TokenClient> {
    const key = options.key ?? (options.keyFile !== undefined ? await readKeyFile(options.keyFile) : undefined)
    const { GoogleAuth, JWT } = loadGoogleAuth()
    const scopes = options.scopes ?? [CLOUD_PLATFORM_SCOPE]
    // A service-account key makes its JWT client directly (the library's recommended form for
    // a key the operator supplied); without one, Application Default Credentials find theirs.
    const c = (key !== undefined
      ? new JWT({ email: key.client_email, key: key.private_key, keyId: key.private_key_id, scopes })
      : await new GoogleAuth({ scopes }).getClient()) as unknown as TokenClient
    const tokenUri = key?.token_uri
    if (tokenUri !== undefined && tokenUri !== GOOGLE_TOKEN_URL) {
      const target = new URL(tokenUri)
      c.transporter?.interceptors?.request.add({
        resolved: async config => {
          if (String(config.url) === GOOGLE_TOKEN_URL) config.url = target
          return config
        }
      })
    }
    return c
  }

  async function fetchToken (): Promise<CachedToken> {
    try {
      client ??= makeClient()
      const c = await client
      const { token } = await c.getAccessToken()
      if (typeof token !== 'string' || token === '') throw new PorticoError('PORTICO_LLM_CREDENTIALS', 'the token endpoint returned no access token')
      // Without an expiry (some metadata servers), assume Google's usual hour.
      const expiresAt = c.credentials?.expiry_date ?? now() + 3600_000
      return { token, expiresAt }
    } catch (err) {
      // A client that failed to build (bad key file) is rebuilt next time.
      client = null
      const reason = err instanceof Error ? err.message : String(err)
      throw translationError(503, 'api_error', `could not get a Google access token: ${reason.slice(0, 300)}`)
    }
  }

  return { token: tokenCache({ fetch: fetchToken, marginMs: TOKEN_REFRESH_MARGIN_MS, now }) }
}

async function readKeyFile (path: string): Promise<ServiceAccountKey> {
  const info = await stat(path)
  if (!info.isFile()) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is not a regular file`)
  if (info.size > MAX_KEY_FILE_BYTES) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is larger than ${MAX_KEY_FILE_BYTES} bytes: not a service-account key`)
  let key: unknown
  try {
    key = JSON.parse(await readFile(path, 'utf8'))
  } catch {
    // Never echo the file: it holds a private key.
    throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is not JSON`)
  }
  if (key === null || typeof key !== 'object' || typeof (key as ServiceAccountKey).client_email !== 'string' || typeof (key as ServiceAccountKey).private_key !== 'string') {
    throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is not a service-account key (client_email and private_key are required)`)
  }
  return key as ServiceAccountKey
}
