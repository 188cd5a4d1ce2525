/**
 * Microsoft Entra ID access tokens for Azure OpenAI / Azure AI (backendAuth.azure), fetched
 * with plain `fetch` from the documented endpoints — no Azure SDK:
 *
 * - client secret: the OAuth 2.0 client credentials grant, `POST {authority}/{tenant}/oauth2/v2.0/token`
 *   with `client_id`, `scope`, `client_secret`, `grant_type=client_credentials` (Microsoft
 *   identity platform, "OAuth 2.0 client credentials flow");
 * - workload identity (AKS): the same grant with a federated credential, the service-account
 *   token in AZURE_FEDERATED_TOKEN_FILE as `client_assertion` (`client_assertion_type =
 *   urn:ietf:params:oauth:client-assertion-type:jwt-bearer`) for AZURE_CLIENT_ID in
 *   AZURE_TENANT_ID — the variables the workload identity webhook sets (with
 *   AZURE_AUTHORITY_HOST). The file is read at every fetch: the kubelet rotates it;
 * - managed identity: the Instance Metadata Service, `GET
 *   http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=...`
 *   with `Metadata: true`, a user-assigned identity by `client_id`, `object_id` or `msi_res_id`.
 *
 * The scope is Azure AI's, `https://cognitiveservices.azure.com/.default` (IMDS takes the
 * resource, without `/.default`).
 *
 * Caching: a token is used until five minutes before it expires; inside those five minutes
 * the cached one is still sent while a refresh runs in the background (requests never wait on
 * a refresh while a valid token is at hand); only with no valid token do requests wait, and
 * concurrent ones share one fetch. Tokens and secrets never appear in errors: a failure says
 * which endpoint answered what (`error` code and description), never what was sent.
 */

import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import type { AzureAuthIR } from '../../ir/types.ts'
import { translationError } from '../canonical.ts'
import type { AccessTokenSource } from './google-token.ts'
import { tokenCache, type CachedToken } from './token-cache.ts'
import { PorticoError } from '../../util/errors.ts'

export const AZURE_AI_SCOPE = 'https://cognitiveservices.azure.com/.default'
export const AZURE_AI_RESOURCE = 'https://cognitiveservices.azure.com'
export const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com'
export const DEFAULT_IMDS_ENDPOINT = 'http://169.254.169.254/metadata/identity/oauth2/token'
export const IMDS_API_VERSION = '2018-02-01'
export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'
/** Refresh this long before expiry (the Azure SDKs refresh five minutes ahead too). */
export const AZURE_REFRESH_MARGIN_MS = 5 * 60 * 1000
/** A token endpoint that does not answer within this is treated as down. */
const FETCH_TIMEOUT_MS = 10_000
/** Token answers are a few KiB; a larger body is not one. */
const MAX_ANSWER_BYTES = 64 * 1024
/** A projected service-account token is about 1 KiB. */
const MAX_ASSERTION_BYTES = 64 * 1024
/** After a failed background refresh, wait this long before the next one (the cached token still serves). */
const RETRY_AFTER_FAILURE_MS = 5_000

export interface AzureTokenOptions {
  auth: AzureAuthIR
  /** The process environment (workload identity, AZURE_AUTHORITY_HOST); default process.env. */
  env?: Record<string, string | undefined>
  /** Clock (ms), for tests. */
  now?: () => number
}

type Token = CachedToken

type UserAssignedIdentity = NonNullable<Extract<AzureAuthIR, { kind: 'managedIdentity' }>['userAssignedIdentity']>

export function azureAccessTokens (options: AzureTokenOptions): AccessTokenSource {
  const env = options.env ?? process.env
  const now = options.now ?? Date.now
  const token = tokenCache({ fetch: () => fetchAzureToken(options.auth, env, now), marginMs: AZURE_REFRESH_MARGIN_MS, backgroundRefresh: true, retryAfterFailureMs: RETRY_AFTER_FAILURE_MS, now })
  return { token }
}

/** One token from the source `auth` names. Throws a TranslationError-shaped 503 on failure. */
export async function fetchAzureToken (auth: AzureAuthIR, env: Record<string, string | undefined>, now: () => number = Date.now): Promise<Token> {
  const authority = (auth.authorityHost ?? nonEmpty(env.AZURE_AUTHORITY_HOST) ?? DEFAULT_AUTHORITY_HOST).replace(/\/+$/, '')
  const workload = workloadEnv(env)
  try {
    switch (auth.kind) {
      case 'clientSecret':
        return await entraToken(authority, auth.tenantId, { client_id: auth.clientId, scope: AZURE_AI_SCOPE, client_secret: auth.clientSecret, grant_type: 'client_credentials' }, now)
      case 'workloadIdentity':
        if (typeof workload === 'string') throw new PorticoError('PORTICO_LLM_CREDENTIALS', workload)
        return await workloadToken(authority, workload, now)
      case 'implicit':
        // DefaultAzureCredential's order for a server: workload identity, then managed identity
        // (a user-assigned one named by AZURE_CLIENT_ID, as the SDKs read it).
        if (typeof workload !== 'string') return await workloadToken(authority, workload, now)
        return await imdsToken(auth.imdsEndpoint ?? DEFAULT_IMDS_ENDPOINT, nonEmpty(env.AZURE_CLIENT_ID) !== undefined ? { clientId: env.AZURE_CLIENT_ID! } : undefined, now)
      case 'managedIdentity':
        return await imdsToken(auth.imdsEndpoint ?? DEFAULT_IMDS_ENDPOINT, auth.userAssignedIdentity, now)
    }
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err)
    throw translationError(503, 'api_error', `could not get a Microsoft Entra ID token (${auth.kind}): ${reason.slice(0, 400)}`)
  }
}

function nonEmpty (v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v
}

/** The workload identity webhook's variables, or which are missing. */
function workloadEnv (env: Record<string, string | undefined>): { file: string, clientId: string, tenantId: string } | string {
  const file = nonEmpty(env.AZURE_FEDERATED_TOKEN_FILE)
  const clientId = nonEmpty(env.AZURE_CLIENT_ID)
  const tenantId = nonEmpty(env.AZURE_TENANT_ID)
  if (file !== undefined && clientId !== undefined && tenantId !== undefined) return { file, clientId, tenantId }
  const missing = [['AZURE_FEDERATED_TOKEN_FILE', file], ['AZURE_CLIENT_ID', clientId], ['AZURE_TENANT_ID', tenantId]].filter(([, v]) => v === undefined).map(([k]) => k)
  return `workload identity needs ${missing.join(', ')} (set by the Azure workload identity webhook)`
}

async function workloadToken (authority: string, w: { file: string, clientId: string, tenantId: string }, now: () => number): Promise<Token> {
  const assertion = (await readSmallFile(w.file, MAX_ASSERTION_BYTES)).trim()
  if (assertion === '') throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${w.file} is empty`)
  return await entraToken(authority, w.tenantId, {
    client_id: w.clientId,
    scope: AZURE_AI_SCOPE,
    client_assertion_type: JWT_BEARER_ASSERTION,
    client_assertion: assertion,
    grant_type: 'client_credentials'
  }, now)
}

/** The client credentials grant at the tenant's v2.0 token endpoint. */
async function entraToken (authority: string, tenant: string, form: Record<string, string>, now: () => number): Promise<Token> {
  const url = `${authority}/${encodeURIComponent(tenant)}/oauth2/v2.0/token`
  const answer = await call(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(form).toString()
  })
  return tokenFrom(answer, url, now)
}

async function imdsToken (endpoint: string, user: UserAssignedIdentity | undefined, now: () => number): Promise<Token> {
  const url = new URL(endpoint)
  url.searchParams.set('api-version', IMDS_API_VERSION)
  url.searchParams.set('resource', AZURE_AI_RESOURCE)
  if (user !== undefined) {
    if ('clientId' in user) url.searchParams.set('client_id', user.clientId)
    else if ('objectId' in user) url.searchParams.set('object_id', user.objectId)
    else url.searchParams.set('msi_res_id', user.resourceId)
  }
  const answer = await call(url.toString(), { method: 'GET', headers: { Metadata: 'true', accept: 'application/json' } })
  return tokenFrom(answer, `${url.origin}${url.pathname}`, now)
}

/** A request with a timeout and a bounded answer: status and parsed JSON (or null). */
async function call (url: string, init: RequestInit): Promise<{ status: number, json: Record<string, unknown> | null }> {
  const res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) })
  const chunks: Uint8Array[] = []
  let size = 0
  if (res.body !== null) {
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      size += chunk.length
      if (size > MAX_ANSWER_BYTES) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${new URL(url).origin} answered more than ${MAX_ANSWER_BYTES} bytes`)
      chunks.push(chunk)
    }
  }
  let json: Record<string, unknown> | null = null
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed as Record<string, unknown>
  } catch {}
  return { status: res.status, json }
}

/** `access_token` and `expires_in` (a number, or IMDS's numeric string) of a token answer. */
function tokenFrom (answer: { status: number, json: Record<string, unknown> | null }, where: string, now: () => number): Token {
  const j = answer.json
  if (answer.status !== 200) {
    // Entra and IMDS both answer `{error, error_description}`: codes and words, no secrets.
    const code = typeof j?.error === 'string' ? j.error : 'no error code'
    const description = typeof j?.error_description === 'string' ? `: ${j.error_description.split(/[\r\n]/)[0]!.slice(0, 200)}` : ''
    throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${where} answered ${answer.status} (${code})${description}`)
  }
  const token = j?.access_token
  const expiresIn = typeof j?.expires_in === 'string' ? Number(j.expires_in) : j?.expires_in
  if (typeof token !== 'string' || token === '' || !/^[\x21-\x7e]+$/.test(token)) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${where} answered no access_token`)
  if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn) || expiresIn <= 0) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${where} answered no valid expires_in`)
  return { token, expiresAt: now() + expiresIn * 1000 }
}

/** A small regular file (the federated token), bounded; never echoed. */
async function readSmallFile (path: string, maxBytes: number): Promise<string> {
  // O_NONBLOCK: a FIFO named by mistake cannot hold the open (nor a thread of the pool).
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const info = await handle.stat()
    if (!info.isFile()) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is not a regular file`)
    if (info.size > maxBytes) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is larger than ${maxBytes} bytes`)
    const buffer = Buffer.alloc(maxBytes + 1)
    const { bytesRead } = await handle.read(buffer, 0, maxBytes + 1, 0)
    if (bytesRead > maxBytes) throw new PorticoError('PORTICO_LLM_CREDENTIALS', `${path} is larger than ${maxBytes} bytes`)
    return buffer.subarray(0, bytesRead).toString('utf8')
  } finally {
    await handle.close()
  }
}
