/**
 * The gateway's mesh identity from the mesh CA (istiod), as Istio's own agent gets a
 * workload's: a key made here and kept in memory only, a CSR for
 * `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`, the projected
 * service-account token (audience `istio-ca`) read from its file at each request (the
 * kubelet rotates it), the mesh root read from its file (the `istio-ca-root-cert` ConfigMap,
 * mounted), and `CreateCertificate` (ca-client.ts). The certificate is put in force through
 * StaticMeshIdentity.rotate (new HBONE connections use it; open ones run on) and renewed at
 * a fraction of its life (default half, as Istio's agent: SECRET_GRACE_PERIOD_RATIO 0.5),
 * retried with jittered backoff on failure; the certificate in force is kept until a new one
 * is in hand.
 *
 * `state()` says whether the gateway is in the mesh (`ready`), not yet (`pending`) or cannot
 * be (`failed`, with a reason meant for the Gateway's status); 'state' is emitted on change.
 * Nothing secret (key, token) is in the state, the events or the log lines.
 */

import { generateKeyPairSync, X509Certificate } from 'node:crypto'
import { readFileSync, unwatchFile, watchFile } from 'node:fs'
import { isIP } from 'node:net'
import { createCsrPem } from './csr.ts'
import { meshCaClient, MeshCaError, type MeshCaClient, type MeshCaClientOptions } from './ca-client.ts'
import { meshCertificate, StaticMeshIdentity } from './identity.ts'
import { PorticoError } from '../util/errors.ts'
import { ISTIO_CA_DEFAULTS } from './ca-defaults.ts'

export interface IstioCaSettings {
  /** `host:port` of the CA; default `istiod.istio-system.svc:15012`. */
  address: string
  /** The name istiod's serving certificate is checked against; default from `address` (caServerName). */
  serverName?: string
  trustDomain: string
  clusterId: string
  namespace: string
  serviceAccount: string
  /** The projected service-account token (audience istio-ca). */
  tokenFile: string
  /** The mesh root(s), PEM (the istio-ca-root-cert ConfigMap's root-cert.pem). */
  rootFile: string
  /** Lifetime asked for; istiod caps it (default 24 h). */
  validitySeconds?: number
  /** Renew when this fraction of the certificate's life has passed; default 0.5. */
  renewFraction?: number
  /** One CA call's deadline; default 10 s. */
  timeoutMs?: number
  /** Backoff of retries after a failure: from `retryMinMs` (1 s) doubling to `retryMaxMs` (60 s), jittered. */
  retryMinMs?: number
  retryMaxMs?: number
  /** How often the root file is checked for a change; default 10 s. */
  rootPollMs?: number
}

export type MeshIdentityState = 'pending' | 'ready' | 'failed'

export interface MeshIdentityStatus {
  state: MeshIdentityState
  /** Why not ready (or, when ready, why the last renewal failed). */
  reason?: string
  spiffeId?: string
  /** ISO time the certificate in force expires. */
  notAfter?: string
}

/** A CA call's outcome, for the metrics: ok, refused (UNAUTHENTICATED / PERMISSION_DENIED), unreachable, error (anything else, a local file). */
export type CaCallResult = 'ok' | 'refused' | 'unreachable' | 'error'

export interface IstioCaIdentityOptions {
  settings: IstioCaSettings
  /** Each CA call's result (metrics). */
  onCall?: (result: CaCallResult) => void
  log?: { info: (fields: object, msg: string) => void, warn: (fields: object, msg: string) => void }
  /** Tests: the time and timers (a fake clock). */
  clock?: Clock
  /** Tests: Math.random. */
  random?: () => number
}

export interface Clock {
  now: () => number
  setTimeout: (fn: () => void, ms: number) => unknown
  clearTimeout: (handle: unknown) => void
}

const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout)
}

const MAX_TOKEN_BYTES = 64 * 1024
const MAX_ROOT_BYTES = 1024 * 1024

/** setTimeout's largest delay (about 24.8 days); a longer wait is cut and re-planned. */
const MAX_TIMER_MS = 2 ** 31 - 1

export { ISTIO_CA_DEFAULTS } from './ca-defaults.ts'

/**
 * The name istiod's certificate is checked against: its certificate names
 * `istiod[-<revision>].<namespace>.svc`, so `istiod.istio-system.svc.cluster.local` checks
 * `istiod.istio-system.svc`. An IP address has no name to derive: the address itself (which
 * fails unless the certificate names it) — give `serverName` then.
 */
export function caServerName (address: string, override?: string): string {
  if (override !== undefined && override !== '') return override
  const host = hostOf(address)
  const m = /^(.+\.svc)(?:\.[a-z0-9.-]+)?$/.exec(host)
  return m !== null && isIP(host) === 0 ? m[1]! : host
}

function hostOf (address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address)
  if (bracketed !== null) return bracketed[1]!
  const i = address.lastIndexOf(':')
  return i > 0 && address.indexOf(':') === i ? address.slice(0, i) : address
}

/** When to renew: `fraction` of the way from `from` (when the certificate came) to notAfter (ms from now, at least 0). */
export function renewalDelay (notBefore: number, notAfter: number, now: number, fraction: number): number {
  return Math.max(0, Math.round(notBefore + (notAfter - notBefore) * fraction - now))
}

/** The longest wait between retries while the gateway holds no valid certificate. */
export const OUT_OF_MESH_RETRY_MAX_MS = 10_000

/**
 * The wait before retry `attempt` (1, 2, ...): min doubling to max, "equal jitter" (half fixed,
 * half random) so gateways that failed together do not retry together. (While a certificate
 * is still valid the caller also caps it at a quarter of the time left.)
 */
export function retryDelay (attempt: number, minMs: number, maxMs: number, random: number): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt - 1, 30))
  return Math.round(base / 2 + (base / 2) * random)
}

/** A CA failure as the Gateway's status says it. */
export function failureReason (err: unknown): { reason: string, result: CaCallResult } {
  const e = err as Error & { code?: number | null }
  const message = e.message ?? String(err)
  if (err instanceof MeshCaError) {
    // gRPC: 16 UNAUTHENTICATED, 7 PERMISSION_DENIED, 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED.
    if (e.code === 16 || e.code === 7) {
      return { result: 'refused', reason: `token refused: ${message} (istiod logs why: a token audience other than istio-ca, an unknown cluster ID, an expired or unknown service account)` }
    }
    if (e.code === 14 || e.code === 4) return { result: 'unreachable', reason: `CA unreachable: ${message}` }
    return { result: 'error', reason: `CA error: ${message}` }
  }
  return { result: 'error', reason: message }
}

export class IstioCaIdentity extends StaticMeshIdentity {
  readonly settings: Required<Omit<IstioCaSettings, 'serverName'>> & { serverName: string }
  readonly spiffeId: string
  private status: MeshIdentityStatus = { state: 'pending', reason: 'waiting for the first certificate from the mesh CA' }
  private readonly clock: Clock
  private readonly random: () => number
  private readonly onCall: (result: CaCallResult) => void
  private readonly log: NonNullable<IstioCaIdentityOptions['log']>
  private client: MeshCaClient | null = null
  private clientRoot = ''
  private timer: unknown = null
  private failures = 0
  private running = false
  private stopped = false
  private inFlight: Promise<void> | null = null
  private notBefore = 0
  private notAfter = 0
  private readonly onRootChange = (): void => { this.rootChanged() }

  constructor (options: IstioCaIdentityOptions) {
    super(null)
    const s = options.settings
    this.settings = {
      ...ISTIO_CA_DEFAULTS,
      ...Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined)),
      serverName: caServerName(s.address, s.serverName)
    } as IstioCaIdentity['settings']
    for (const [name, value] of [['namespace', s.namespace], ['serviceAccount', s.serviceAccount], ['trustDomain', s.trustDomain]] as const) {
      if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(value ?? '')) throw new PorticoError('PORTICO_MESH_CA_SETTINGS', `mesh CA identity: ${name} ${JSON.stringify(value)} is not a DNS-1123 name`)
    }
    const f = this.settings.renewFraction
    if (!(f > 0 && f < 1)) throw new PorticoError('PORTICO_MESH_CA_SETTINGS', `mesh CA identity: renewFraction ${f} is not between 0 and 1`)
    this.spiffeId = `spiffe://${s.trustDomain}/ns/${s.namespace}/sa/${s.serviceAccount}`
    this.clock = options.clock ?? realClock
    this.random = options.random ?? Math.random
    this.onCall = options.onCall ?? (() => {})
    this.log = options.log ?? { info: () => {}, warn: () => {} }
  }

  state (): MeshIdentityStatus {
    return { ...this.status }
  }

  /** Asks for the first certificate now and keeps renewing; watches the root file. */
  start (): void {
    if (this.running || this.stopped) return
    this.running = true
    watchFile(this.settings.rootFile, { interval: this.settings.rootPollMs, persistent: false }, this.onRootChange)
    this.schedule(0)
  }

  stop (): void {
    this.stopped = true
    this.running = false
    if (this.timer !== null) this.clock.clearTimeout(this.timer)
    this.timer = null
    unwatchFile(this.settings.rootFile, this.onRootChange)
    this.client?.close()
    this.client = null
  }

  /** Asks for a certificate now (a new root, a test); resolves when that attempt ended. */
  async renewNow (): Promise<void> {
    if (this.timer !== null) this.clock.clearTimeout(this.timer)
    this.timer = null
    await this.attempt()
  }

  private schedule (delayMs: number): void {
    if (this.stopped) return
    if (this.timer !== null) this.clock.clearTimeout(this.timer)
    const wait = Math.min(delayMs, MAX_TIMER_MS)
    const at = this.clock.now() + delayMs
    this.timer = this.clock.setTimeout(() => {
      this.timer = null
      // A cut wait (beyond setTimeout's range) is planned again for what is left.
      if (this.clock.now() < at) this.schedule(at - this.clock.now())
      else void this.attempt()
    }, wait)
  }

  private rootChanged (): void {
    if (this.stopped) return
    let root: string
    try {
      root = readFileSync(this.settings.rootFile, 'utf8')
    } catch {
      return // the next request says why
    }
    if (root === this.clientRoot) return
    this.log.info({ rootFile: this.settings.rootFile }, 'mesh root changed: asking the mesh CA for a certificate now')
    void this.renewNow()
  }

  private attempt (): Promise<void> {
    this.inFlight ??= this.request().finally(() => { this.inFlight = null })
    return this.inFlight
  }

  private async request (): Promise<void> {
    let result: CaCallResult = 'error'
    try {
      let root: string
      try {
        root = readFileSync(this.settings.rootFile, 'utf8')
      } catch (err) {
        throw new PorticoError('PORTICO_MESH_CA_FILE', `mesh root unreadable: ${(err as Error).message} (the istio-ca-root-cert ConfigMap mounted at ${this.settings.rootFile})`)
      }
      let token: string
      try {
        token = readFileSync(this.settings.tokenFile, 'utf8').trim()
      } catch (err) {
        throw new PorticoError('PORTICO_MESH_CA_FILE', `token unreadable: ${(err as Error).message} (a projected service-account token with audience istio-ca at ${this.settings.tokenFile})`)
      }
      if (token === '') throw new PorticoError('PORTICO_MESH_CA_FILE', `token unreadable: ${this.settings.tokenFile} is empty`)
      // A service-account JWT is a few KiB; a file far larger is not one (and goes into a header).
      if (token.length > MAX_TOKEN_BYTES) throw new PorticoError('PORTICO_MESH_CA_FILE', `token unreadable: ${this.settings.tokenFile} holds ${token.length} bytes (at most ${MAX_TOKEN_BYTES})`)
      if (root.length > MAX_ROOT_BYTES) throw new PorticoError('PORTICO_MESH_CA_FILE', `mesh root unreadable: ${this.settings.rootFile} holds ${root.length} bytes (at most ${MAX_ROOT_BYTES})`)
      const client = this.clientFor(root)
      const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey
      const chain = await client.createCertificate({
        csrPem: createCsrPem({ privateKey: key, uris: [this.spiffeId] }),
        token,
        clusterId: this.settings.clusterId,
        validitySeconds: this.settings.validitySeconds,
        timeoutMs: this.settings.timeoutMs
      })
      result = 'ok'
      this.onCall('ok')
      this.accept(chain, key.export({ type: 'pkcs8', format: 'pem' }) as string, root)
    } catch (err) {
      if (result === 'ok') {
        // The CA answered but the certificate cannot be used (another identity, the key).
        this.fail(`CA answer unusable: ${(err as Error).message}`, null)
      } else {
        const f = failureReason(err)
        this.onCall(f.result)
        this.fail(f.reason, f.result)
      }
    }
  }

  private clientFor (root: string): MeshCaClient {
    if (this.client !== null && root === this.clientRoot) return this.client
    this.client?.close()
    const options: MeshCaClientOptions = { target: this.settings.address, rootCertPem: root, serverName: this.settings.serverName }
    this.client = meshCaClient(options)
    this.clientRoot = root
    return this.client
  }

  private accept (chain: string[], key: string, rootFile: string): void {
    // istiod puts its root last: the leaf and intermediates are presented, the roots trusted
    // are the file's (every root of a root rotation) and the answer's.
    const leafAndIntermediates = chain.slice(0, -1).join('')
    const roots = sameCert(rootFile, chain.at(-1)!) ? rootFile : rootFile.trimEnd() + '\n' + chain.at(-1)!
    const cert = meshCertificate({ cert: leafAndIntermediates, key, root: roots })
    if (cert.spiffeId !== this.spiffeId) {
      throw new PorticoError('PORTICO_MESH_CA_ISSUED', `the CA issued ${cert.spiffeId}, expected ${this.spiffeId} (the token is of another service account, or the trust domain is not the mesh's)`)
    }
    const leaf = new X509Certificate(chain[0]!)
    this.notBefore = Date.parse(leaf.validFrom)
    this.notAfter = Date.parse(leaf.validTo)
    this.failures = 0
    this.rotate(cert)
    this.setStatus({ state: 'ready', spiffeId: cert.spiffeId, notAfter: new Date(this.notAfter).toISOString() })
    // The life counted from when it came, not from notBefore: a CA may backdate notBefore for
    // clock skew, which with a short lifetime would put the renewal in the past (a loop). At
    // least the retry minimum between two requests, whatever the lifetime.
    const now = this.clock.now()
    const delay = Math.max(this.settings.retryMinMs, renewalDelay(Math.max(this.notBefore, now), this.notAfter, now, this.settings.renewFraction))
    this.log.info({ spiffeId: cert.spiffeId, notAfter: new Date(this.notAfter).toISOString(), renewInSeconds: Math.round(delay / 1000) },
      `mesh certificate ${cert.spiffeId} from the mesh CA ${this.settings.address}, valid until ${new Date(this.notAfter).toISOString()}`)
    this.schedule(delay)
  }

  private fail (reason: string, result: CaCallResult | null): void {
    this.failures++
    const now = this.clock.now()
    const valid = this.current() !== null && now < this.notAfter
    let delay = retryDelay(this.failures, this.settings.retryMinMs, this.settings.retryMaxMs, this.random())
    if (valid) {
      // The certificate in force stays; the gateway is still in the mesh.
      delay = Math.min(delay, Math.max(this.settings.retryMinMs, (this.notAfter - now) / 4))
      this.setStatus({ state: 'ready', reason: `renewal failing: ${reason}`, spiffeId: this.spiffeId, notAfter: new Date(this.notAfter).toISOString() })
    } else {
      // Out of the mesh (no certificate, or it expired): every mesh request fails until the
      // CA answers, so a CA that comes back must not wait out a long backoff (at 60 s the
      // gateway stayed out for up to a minute after the CA was back).
      delay = Math.min(delay, OUT_OF_MESH_RETRY_MAX_MS)
      this.setStatus(this.current() !== null
        ? { state: 'failed', reason: `certificate expired at ${new Date(this.notAfter).toISOString()}; ${reason}`, spiffeId: this.spiffeId, notAfter: new Date(this.notAfter).toISOString() }
        : { state: 'failed', reason })
    }
    this.log.warn({ reason, result, attempt: this.failures, retryInSeconds: Math.round(delay / 100) / 10, certificateInForce: valid },
      `mesh CA request failed: ${reason}; retrying in ${Math.round(delay / 100) / 10} s${valid ? ' (the certificate in force stays)' : ''}`)
    this.schedule(delay)
  }

  private setStatus (next: MeshIdentityStatus): void {
    const prev = this.status
    this.status = next
    if (prev.state !== next.state || prev.reason !== next.reason || prev.notAfter !== next.notAfter) this.emit('state', this.state())
  }
}

function sameCert (pemList: string, pem: string): boolean {
  try {
    const fp = new X509Certificate(pem).fingerprint256
    for (const m of pemList.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)) {
      if (new X509Certificate(m[0]).fingerprint256 === fp) return true
    }
  } catch {}
  return false
}
