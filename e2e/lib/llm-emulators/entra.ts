/**
 * A Microsoft Entra ID token emulator on loopback: the two token endpoints an Azure OpenAI
 * client gets Entra tokens from, speaking their documented wire format exactly.
 *
 * - `POST /{tenant}/oauth2/v2.0/token` (the Microsoft identity platform v2.0 token endpoint),
 *   the OAuth 2.0 client credentials grant: `application/x-www-form-urlencoded` with
 *   `client_id`, `scope`, `grant_type=client_credentials` and either `client_secret` (a shared
 *   secret) or `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer` +
 *   `client_assertion` (a federated credential: AKS workload identity's service-account token).
 *   Every field is checked as the docs define it — no field missing, none unknown, no secret and
 *   assertion together — and refused with Entra's error shape (`error`, `error_description`
 *   starting with the AADSTS code, `error_codes`, `timestamp`, `trace_id`, `correlation_id`) and
 *   status: 400 `invalid_request` / `unsupported_grant_type` / `invalid_scope`, 401
 *   `invalid_client` for a wrong secret or assertion. A grant answers `{token_type: "Bearer",
 *   expires_in, ext_expires_in, access_token}`.
 * - `GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=...` (the Instance
 *   Metadata Service's managed identity endpoint): `Metadata: true` required; a user-assigned
 *   identity by `client_id`, `object_id` or `msi_res_id`; answers `{access_token, expires_in,
 *   expires_on, not_before, resource, token_type}` with the numbers as strings, as IMDS does.
 *
 * Tokens are opaque strings (`entra-test-token-N`); `valid(token)` tells the Azure OpenAI
 * emulator which ones this authority issued and that have not expired.
 */

import type http from 'node:http'
import { randomUUID } from 'node:crypto'
import { type Backend, startBackend } from '@portico/testkit/backends'

export const ENTRA_TENANT = '00000000-0000-0000-0000-0000000000aa'
export const ENTRA_CLIENT_ID = '00000000-0000-0000-0000-0000000000cc'
export const ENTRA_CLIENT_SECRET = 'entra-test-secret-portico'
export const AZURE_AI_SCOPE = 'https://cognitiveservices.azure.com/.default'
export const AZURE_AI_RESOURCE = 'https://cognitiveservices.azure.com'
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'

export interface EntraGrant {
  kind: 'clientSecret' | 'clientAssertion' | 'managedIdentity'
  tenant?: string
  form?: Record<string, string>
  query?: Record<string, string>
  token: string
}

export interface EntraEmulator extends Backend {
  /** Every token granted, in order. */
  grants: EntraGrant[]
  /** Every request received (refused ones included): method, path and query. */
  calls: string[]
  /** Whether this authority issued `token` and it has not expired. */
  valid (token: string): boolean
  /** Lifetime of the next tokens, in seconds (default 3599). */
  expiresIn: number
  /** Held before answering each token request (null: answer at once): a slow authority. */
  gate: (() => Promise<void>) | null
  /** Answer the next token requests with this status and Entra error (null: grant). */
  failWith: { status: number, error: string, code: number, description: string } | null
}

export interface EntraEmulatorOptions {
  tenantId?: string
  clientId?: string
  clientSecret?: string
  /** The federated token (service-account JWT) a client assertion must be; absent = no federated credential. */
  federatedToken?: string
  /** The user-assigned managed identity's client id IMDS knows (besides the system-assigned one). */
  managedIdentityClientId?: string
}

function entraError (status: number, error: string, code: number, description: string): { status: number, body: Record<string, unknown> } {
  return {
    status,
    body: {
      error,
      error_description: `AADSTS${code}: ${description} Trace ID: ${randomUUID()} Correlation ID: ${randomUUID()} Timestamp: ${new Date().toISOString().replace('T', ' ').slice(0, 23)}Z`,
      error_codes: [code],
      timestamp: new Date().toISOString().replace('T', ' ').slice(0, 19) + 'Z',
      trace_id: randomUUID(),
      correlation_id: randomUUID(),
      error_uri: `https://login.microsoftonline.com/error?code=${code}`
    }
  }
}

export async function startEntraEmulator (options: EntraEmulatorOptions = {}): Promise<EntraEmulator> {
  const tenantId = options.tenantId ?? ENTRA_TENANT
  const clientId = options.clientId ?? ENTRA_CLIENT_ID
  const clientSecret = options.clientSecret ?? ENTRA_CLIENT_SECRET
  const issued = new Map<string, number>()
  let count = 0
  const grants: EntraGrant[] = []
  const calls: string[] = []
  // Set once started; handlers read what the test left in it.
  let emulator: EntraEmulator | null = null

  const grant = (kind: EntraGrant['kind'], extra: Partial<EntraGrant>): { token: string, expiresIn: number } => {
    const token = `entra-test-token-${++count}`
    const expiresIn = emulator!.expiresIn
    issued.set(token, Date.now() + expiresIn * 1000)
    grants.push({ kind, token, ...extra })
    return { token, expiresIn }
  }

  const send = (res: http.ServerResponse, status: number, body: unknown): void => {
    const text = JSON.stringify(body)
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store, no-cache', pragma: 'no-cache', 'content-length': Buffer.byteLength(text) })
    res.end(text)
  }

  /** The v2.0 token endpoint's checks, in the order Entra reports them. */
  function tokenEndpoint (req: http.IncomingMessage, tenant: string, raw: string): { status: number, body: Record<string, unknown> } {
    if (req.method !== 'POST') return entraError(400, 'invalid_request', 900561, 'The endpoint only accepts POST requests.')
    if (!String(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
      return entraError(400, 'invalid_request', 900144, 'The request body must contain the following parameter: \'grant_type\'.')
    }
    if (tenant !== tenantId) return entraError(400, 'invalid_request', 90002, `Tenant '${tenant}' not found.`)
    const params = new URLSearchParams(raw)
    const form: Record<string, string> = {}
    for (const [k, v] of params) {
      if (k in form) return entraError(400, 'invalid_request', 90015, `Requested query string is too long or a parameter is repeated: ${k}.`)
      form[k] = v
    }
    if (form.grant_type === undefined) return entraError(400, 'invalid_request', 900144, 'The request body must contain the following parameter: \'grant_type\'.')
    if (form.grant_type !== 'client_credentials') return entraError(400, 'unsupported_grant_type', 70003, `The app requested an unsupported grant type '${form.grant_type}'.`)
    if (form.client_id === undefined) return entraError(400, 'invalid_request', 900144, 'The request body must contain the following parameter: \'client_id\'.')
    if (form.scope === undefined) return entraError(400, 'invalid_request', 900144, 'The request body must contain the following parameter: \'scope\'.')
    // The client credentials flow takes exactly one `.default` scope of one resource.
    if (form.scope !== AZURE_AI_SCOPE) return entraError(400, 'invalid_scope', 1002012, `The provided value for scope ${form.scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`)
    const allowed = new Set(['grant_type', 'client_id', 'scope', 'client_secret', 'client_assertion_type', 'client_assertion'])
    const unknown = Object.keys(form).find(k => !allowed.has(k))
    if (unknown !== undefined) return entraError(400, 'invalid_request', 900144, `Unexpected parameter '${unknown}' in the client credentials request.`)
    if (form.client_id !== clientId) return entraError(400, 'unauthorized_client', 700016, `Application with identifier '${form.client_id}' was not found in the directory '${tenant}'.`)
    const hasSecret = form.client_secret !== undefined
    const hasAssertion = form.client_assertion !== undefined || form.client_assertion_type !== undefined
    if (hasSecret && hasAssertion) return entraError(400, 'invalid_request', 50027, 'Only one client credential may be presented: client_secret or client_assertion.')
    if (hasSecret) {
      if (form.client_secret !== clientSecret) return entraError(401, 'invalid_client', 7000215, 'Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.')
      const g = grant('clientSecret', { tenant, form })
      return { status: 200, body: { token_type: 'Bearer', expires_in: g.expiresIn, ext_expires_in: g.expiresIn, access_token: g.token } }
    }
    if (!hasAssertion) return entraError(401, 'invalid_client', 7000218, 'The request body must contain the following parameter: \'client_assertion\' or \'client_secret\'.')
    if (form.client_assertion_type !== JWT_BEARER) return entraError(400, 'invalid_request', 50027, `Invalid client_assertion_type '${form.client_assertion_type ?? ''}'.`)
    if (form.client_assertion === undefined || form.client_assertion.split('.').length !== 3) return entraError(400, 'invalid_request', 50027, 'The client_assertion is not a JWT.')
    if (options.federatedToken === undefined || form.client_assertion !== options.federatedToken) {
      return entraError(401, 'invalid_client', 700213, 'No matching federated identity record found for presented assertion subject.')
    }
    const g = grant('clientAssertion', { tenant, form })
    return { status: 200, body: { token_type: 'Bearer', expires_in: g.expiresIn, ext_expires_in: g.expiresIn, access_token: g.token } }
  }

  /** The Instance Metadata Service's managed identity token endpoint. */
  function imds (req: http.IncomingMessage, url: URL): { status: number, body: Record<string, unknown> } {
    const fail = (status: number, error: string, description: string) => ({ status, body: { error, error_description: description } })
    if (req.method !== 'GET') return fail(405, 'invalid_request', 'Method not allowed')
    if (req.headers.metadata !== 'true') return fail(400, 'invalid_request', 'Required metadata header not specified')
    if (url.searchParams.get('api-version') !== '2018-02-01') return fail(400, 'invalid_request', 'Invalid or missing api-version')
    const resource = url.searchParams.get('resource')
    if (resource !== AZURE_AI_RESOURCE) return fail(400, 'invalid_resource', `AADSTS500011: The resource principal named ${resource ?? ''} was not found in the tenant.`)
    const ids = ['client_id', 'object_id', 'msi_res_id'].filter(k => url.searchParams.has(k))
    if (ids.length > 1) return fail(400, 'invalid_request', 'Only one of client_id, object_id, msi_res_id may be specified')
    if (ids.length === 1 && (ids[0] !== 'client_id' || url.searchParams.get('client_id') !== options.managedIdentityClientId)) {
      return fail(400, 'invalid_request', 'Identity not found')
    }
    const g = grant('managedIdentity', { query: Object.fromEntries(url.searchParams) })
    const nowS = Math.floor(Date.now() / 1000)
    return { status: 200, body: { access_token: g.token, refresh_token: '', expires_in: String(g.expiresIn), expires_on: String(nowS + g.expiresIn), not_before: String(nowS), resource, token_type: 'Bearer' } }
  }

  const backend = await startBackend((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://entra')
        calls.push(`${req.method ?? ''} ${url.pathname}${url.search}`)
        if (emulator!.gate !== null) await emulator!.gate()
        const failing = emulator!.failWith
        if (failing !== null) {
          const e = entraError(failing.status, failing.error, failing.code, failing.description)
          return send(res, e.status, e.body)
        }
        const m = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(url.pathname)
        if (m !== null) {
          const answer = tokenEndpoint(req, decodeURIComponent(m[1]!), Buffer.concat(chunks).toString('utf8'))
          return send(res, answer.status, answer.body)
        }
        if (url.pathname === '/metadata/identity/oauth2/token') {
          const answer = imds(req, url)
          return send(res, answer.status, answer.body)
        }
        send(res, 404, { error: 'not_found' })
      })().catch(() => res.destroy())
    })
  })

  emulator = Object.assign(backend, {
    grants,
    calls,
    expiresIn: 3599,
    gate: null,
    failWith: null,
    valid: (token: string) => (issued.get(token) ?? 0) > Date.now()
  })
  return emulator
}
