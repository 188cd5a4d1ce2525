/**
 * What policy compilers may need beyond their IR: shared, long-lived resources that must
 * survive config reloads (a reload must not refetch every JWKS or reconnect every gRPC
 * channel). The engine owns one and passes it to every compile.
 */

import { createHash, randomBytes } from 'node:crypto'
import type { Pool } from 'undici'
import { undici } from '../util/undici.ts'
import type { JwksCache } from '../auth/jwks.ts'
import type { AuthorizationClient } from '../auth/ext-authz-grpc.ts'
import type { OidcClient, OidcClientOptions } from '../auth/oidc-client.ts'
import { deriveKey, keyFromHex } from '../auth/session-cookie.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import type { JwksIR } from '../ir/policy.ts'
import type { RecordArena } from '../util/shared-records.ts'

// Each client loads with the first policy that needs one (when a config is compiled, never by
// a request): a config without JWT, ext_authz or OIDC never loads them, and
// every data-plane worker holds each module it loads once more (docs/multicore.md, Memory).
// Paths are util/'s (lazyRequire).
const jwksModule = lazyRequire<typeof import('../auth/jwks.ts')>('../auth/jwks.ts')
const authzGrpcModule = lazyRequire<typeof import('../auth/ext-authz-grpc.ts')>('../auth/ext-authz-grpc.ts')
const oidcClientModule = lazyRequire<typeof import('../auth/oidc-client.ts')>('../auth/oidc-client.ts')

export interface PolicyServicesOptions {
  /** The process session key (config.session.key / SESSION_KEY), 64 hex digits. */
  sessionKey?: string
}

export class PolicyServices {
  private readonly jwksByUrl = new Map<string, JwksCache>()
  private readonly authzClients = new Map<string, AuthorizationClient>()
  private readonly httpPools = new Map<string, Pool>()
  private readonly oidcClients = new Map<string, OidcClient>()
  private readonly masterKey: Buffer | null
  private readonly cookieKeys = new Map<string, Buffer>()
  private readonly grpcClients = new Map<string, { close(): void }>()
  /**
   * Where this compile's localRateLimit buckets live when data-plane workers share them
   * (the engine sets a fresh arena per compile); undefined: each bucket in its own memory.
   */
  buckets: RecordArena | undefined

  constructor (options: PolicyServicesOptions = {}) {
    this.masterKey = options.sessionKey !== undefined ? keyFromHex(options.sessionKey) : null
  }

  /** The cache for a key set: shared per URL; inline keys get their own. */
  jwks (ir: JwksIR): JwksCache {
    if ('keys' in ir) return new (jwksModule().JwksCache)({ keys: ir.keys as never })
    let cache = this.jwksByUrl.get(ir.url)
    if (cache === undefined) this.jwksByUrl.set(ir.url, cache = new (jwksModule().JwksCache)({ url: ir.url }))
    return cache
  }

  /** The gRPC Authorization client (one channel) for `target` (`host:port`). */
  extAuthzGrpc (target: string, tls: boolean): AuthorizationClient {
    const key = `${tls ? 'tls' : 'plain'}:${target}`
    let c = this.authzClients.get(key)
    if (c === undefined) this.authzClients.set(key, c = authzGrpcModule().createAuthorizationClient(target, tls))
    return c
  }

  /**
   * A gRPC client of one kind (rate limit, external processing, ...) for `target`
   * (`host:port`), made by `create` the first time and shared by every route and reload.
   */
  grpcClient<T extends { close(): void }> (kind: string, target: string, tls: boolean, create: (target: string, tls: boolean) => T): T {
    const key = `${kind}:${tls ? 'tls' : 'plain'}:${target}`
    let c = this.grpcClients.get(key)
    if (c === undefined) this.grpcClients.set(key, c = create(target, tls))
    return c as T
  }

  /** A connection pool to an HTTP service (`http(s)://host:port`). */
  httpPool (origin: string): Pool {
    let p = this.httpPools.get(origin)
    if (p === undefined) this.httpPools.set(origin, p = new (undici().Pool)(origin, { connections: 64 }))
    return p
  }

  /** The OpenID client of a provider and client id (discovery is cached in it). */
  oidc (options: OidcClientOptions): OidcClient {
    const secret = options.clientSecret === undefined ? '' : createHash('sha256').update(options.clientSecret).digest('hex')
    const key = `${options.issuer}\n${options.clientId}\n${secret}`
    let c = this.oidcClients.get(key)
    if (c === undefined) this.oidcClients.set(key, c = new (oidcClientModule().OidcClient)(options))
    return c
  }

  /**
   * A 256-bit key for one use of cookies (e.g. `oidc`): derived from the process session key
   * when there is one (so replicas sharing SESSION_KEY read each other's cookies), otherwise
   * random, made once per process (a reload keeps it; a restart logs everyone out).
   */
  cookieKey (purpose: string): Buffer {
    let k = this.cookieKeys.get(purpose)
    if (k === undefined) this.cookieKeys.set(purpose, k = this.masterKey !== null ? deriveKey(this.masterKey, purpose) : randomBytes(32))
    return k
  }

  /** Closes channels and pools (at shutdown). */
  async close (): Promise<void> {
    for (const c of this.authzClients.values()) c.close()
    this.authzClients.clear()
    for (const c of this.grpcClients.values()) c.close()
    this.grpcClients.clear()
    await Promise.all([...this.httpPools.values()].map(p => p.close()))
    this.httpPools.clear()
  }
}
