/**
 * Process settings: the config file's `config:` section and environment variables, with
 * defaults. An environment variable wins over the file, so one file can serve several
 * instances (each with its own ADMIN_ADDR, say). Read once at start; not hot-reloaded.
 */

import { resolve } from 'node:path'
import type { StaticConfig, TracingOptions } from '@portico/engine'
import { compileCelFields, formatDiagnostic, ISTIO_CA_DEFAULTS, parseDuration, validateAgainstSchema, type IstioCaSettings } from '@portico/engine'
import { availableCpus } from './workers/cpus.ts'
import { accessLogSettings, type AccessLogSettings } from './worker-settings.ts'

export { receivedSettings, transferableSettings } from './worker-settings.ts'

export interface Address {
  host: string
  port: number
}

export interface Settings {
  /** null = off. */
  adminAddr: Address | null
  /**
   * Whether the admin web UI may change things (fire requests, MCP playground, log level
   * through /api/logging). Default false: the UI is read-only. `/logging` POST (porticoctl)
   * is not affected.
   */
  adminWrites: boolean
  /**
   * DNS names the admin server answers to besides localhost, IP literals and adminAddr's own
   * host (DNS rebinding protection: any other Host is refused). Default none.
   */
  adminAllowedHosts: string[]
  /** Request header names marked non-secret: their policy-set values show in dumps and traces. */
  publicHeaders: string[]
  statsAddr: Address | null
  readinessAddr: Address | null
  logLevel: string
  logFormat: 'json' | 'text'
  /** How long SIGTERM waits for in-flight requests before closing connections. */
  drainTimeoutMs: number
  /** Hex AES-256 key for MCP session ids; undefined = random per process. */
  sessionKey: string | undefined
  /** Idle MCP sessions close after this long. */
  mcpSessionTtlMs: number
  /** Whether /debug/trace works (DEBUG_TRACE=off disables it). */
  debugTrace: boolean
  /** Max bytes of a body kept in a trace snapshot. */
  traceBodyLimit: number
  /** OpenTelemetry tracing (config.tracing, env TRACING as JSON); null = off. */
  tracing: TracingOptions | null
  /** config.accessLog (env ACCESS_LOG as JSON): the CEL fields and filter, compiled; the OTLP logs export. */
  accessLog: AccessLogSettings
  /**
   * Data-plane event loops: 1 serves everything on the main thread (one loop); more run
   * that many worker threads sharing the listening ports, with the admin, metrics and
   * readiness servers (and MCP sessions) on the main thread. Default: the CPUs available
   * to the process (cgroup quota aware).
   */
  workers: number
  /**
   * How workers get connections: `reuseport`, each listens with SO_REUSEPORT and the kernel
   * spreads connections; `primary`, the primary listens and hands connections over
   * (workers/distributor.ts). Env WORKER_ACCEPT; default reuseport where SO_REUSEPORT balances.
   */
  workerAccept: 'reuseport' | 'primary'
  /**
   * How long a data-plane worker may take to load before start-up fails (env
   * WORKER_START_TIMEOUT, default 60s): longer where loading is slow (a small CPU quota, a
   * proxy run under valgrind).
   */
  workerStartTimeoutMs: number
  /**
   * config.mesh.certificate (env MESH_CERT_FILE, MESH_KEY_FILE, MESH_ROOT_FILE): the files of
   * the gateway's mesh identity, absolute; null: no mesh identity (mesh backends then fail).
   */
  meshCertificate: { cert: string, key: string, root: string } | null
  /**
   * config.mesh.ca, or MESH_ENABLED=true with agentgateway's env names (CA_ADDRESS,
   * TRUST_DOMAIN, CLUSTER_ID, NETWORK, POD_NAMESPACE, SERVICE_ACCOUNT) and MESH_TOKEN_FILE,
   * MESH_ROOT_FILE, CA_SERVER_NAME: the identity from the mesh CA (IstioCaIdentity); null:
   * off. Not with meshCertificate.
   */
  meshCa: (IstioCaSettings & { network: string | null }) | null
  /** config.hbone: the HBONE pool's stream cap per connection and idle timeout (ms); undefined: the defaults (100, 5 minutes). */
  hbone: { maxStreams?: number, idleTimeoutMs?: number }
}

/** Upper bound of config.workers / WORKERS. */
export const MAX_WORKERS = 256

export const DEFAULTS = {
  adminAddr: '127.0.0.1:15000',
  statsAddr: '0.0.0.0:15020',
  readinessAddr: '0.0.0.0:15021',
  logLevel: 'info',
  drainTimeout: '10s',
  mcpSessionTtl: '30m',
  workerStartTimeout: '60s'
} as const

export function resolveSettings (file: StaticConfig, env: NodeJS.ProcessEnv, isTTY: boolean, cpus: () => number = availableCpus): Settings {
  const pick = (envName: string, fromFile: string | undefined, fallback: string): string =>
    nonEmpty(env[envName]) ?? fromFile ?? fallback
  const format = pick('LOG_FORMAT', file.logging?.format, isTTY ? 'text' : 'json')
  return {
    adminAddr: parseAddress(pick('ADMIN_ADDR', file.adminAddr, DEFAULTS.adminAddr), 'ADMIN_ADDR'),
    adminWrites: parseSwitch(pick('ADMIN_WRITES', file.adminWrites === undefined ? undefined : String(file.adminWrites), 'false'), 'ADMIN_WRITES'),
    adminAllowedHosts: nonEmpty(env.ADMIN_ALLOWED_HOSTS)?.split(',').map(h => h.trim()).filter(h => h !== '') ?? file.adminAllowedHosts ?? [],
    publicHeaders: nonEmpty(env.PUBLIC_HEADERS)?.split(',').map(h => h.trim()).filter(h => h !== '') ?? file.publicHeaders ?? [],
    statsAddr: parseAddress(pick('STATS_ADDR', file.statsAddr, DEFAULTS.statsAddr), 'STATS_ADDR'),
    readinessAddr: parseAddress(pick('READINESS_ADDR', file.readinessAddr, DEFAULTS.readinessAddr), 'READINESS_ADDR'),
    logLevel: pick('LOG_LEVEL', file.logging?.level, DEFAULTS.logLevel),
    logFormat: format === 'text' ? 'text' : 'json',
    drainTimeoutMs: namedDuration(pick('DRAIN_TIMEOUT', file.drainTimeout, DEFAULTS.drainTimeout), 'DRAIN_TIMEOUT'),
    sessionKey: sessionKey(nonEmpty(env.SESSION_KEY) ?? file.session?.key),
    mcpSessionTtlMs: namedDuration(pick('MCP_SESSION_TTL', file.mcp?.sessionTtl, DEFAULTS.mcpSessionTtl), 'MCP_SESSION_TTL'),
    debugTrace: !['off', 'false', '0'].includes(pick('DEBUG_TRACE', file.debugTrace === false ? 'off' : undefined, 'on').toLowerCase()),
    traceBodyLimit: Number(pick('TRACE_BODY_LIMIT', file.traceBodyLimit === undefined ? undefined : String(file.traceBodyLimit), '65536')),
    workers: workerCount(nonEmpty(env.WORKERS) ?? (file.workers === undefined ? undefined : String(file.workers)), cpus),
    workerAccept: workerAccept(nonEmpty(env.WORKER_ACCEPT)),
    workerStartTimeoutMs: namedDuration(pick('WORKER_START_TIMEOUT', undefined, DEFAULTS.workerStartTimeout), 'WORKER_START_TIMEOUT'),
    hbone: {
      ...(file.hbone?.poolMaxStreamsPerConn !== undefined ? { maxStreams: file.hbone.poolMaxStreamsPerConn } : {}),
      ...(file.hbone?.poolUnusedReleaseTimeout !== undefined ? { idleTimeoutMs: namedDuration(file.hbone.poolUnusedReleaseTimeout, 'hbone.poolUnusedReleaseTimeout') } : {})
    },
    ...meshIdentitySettings(file, env),
    tracing: withSpanDelay(tracingOptions(fromEnvJson(env, 'TRACING', 'tracing') ?? file.tracing), env),
    accessLog: withLogDelay(accessLogSettings(fromEnvJson(env, 'ACCESS_LOG', 'accessLog') ?? file.accessLog, fromEnvJson(env, 'TRACING', 'tracing') ?? file.tracing), env)
  }
}

/**
 * OpenTelemetry's own variables for how long the batch processors wait before an export
 * (OTEL_BSP_SCHEDULE_DELAY for spans, OTEL_BLRP_SCHEDULE_DELAY for log records; ms, default
 * 1000 here): how long this thread gathers records before handing them to the export
 * thread, which, given less than a second, gathers no longer itself.
 */
function scheduleDelay (env: NodeJS.ProcessEnv, name: string): number | undefined {
  const text = nonEmpty(env[name])
  if (text === undefined) return undefined
  if (!/^[0-9]{1,7}$/.test(text)) throw new Error(`${name}: ${JSON.stringify(text.slice(0, 40))} is not a number of milliseconds`)
  return Number(text)
}

function withSpanDelay (t: TracingOptions | null, env: NodeJS.ProcessEnv): TracingOptions | null {
  const delay = scheduleDelay(env, 'OTEL_BSP_SCHEDULE_DELAY')
  return t === null || delay === undefined ? t : { ...t, scheduledDelayMs: delay }
}

function withLogDelay (a: Settings['accessLog'], env: NodeJS.ProcessEnv): Settings['accessLog'] {
  const delay = scheduleDelay(env, 'OTEL_BLRP_SCHEDULE_DELAY')
  return a.otlp === null || delay === undefined ? a : { ...a, otlp: { ...a.otlp, scheduledDelayMs: delay } }
}

/**
 * A `config:` section given as JSON in an environment variable (cluster mode: the
 * controller passes PorticoParameters' tracing and accessLog so), checked against the
 * same schema as the file's.
 */
export function fromEnvJson<K extends keyof StaticConfig> (env: NodeJS.ProcessEnv, name: string, key: K): StaticConfig[K] | undefined {
  const text = nonEmpty(env[name])
  if (text === undefined) return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new Error(`${name}: not JSON (${(err as Error).message})`)
  }
  const problems = validateAgainstSchema({ config: { [key]: value } })
  if (problems.length > 0) throw new Error(`${name}: ${problems.map(d => formatDiagnostic(name, { ...d, path: d.path.slice(1) })).join('; ')}`)
  return value as StaticConfig[K]
}

function tracingOptions (t: StaticConfig['tracing']): TracingOptions | null {
  if (t === undefined) return null
  return {
    otlpEndpoint: t.otlpEndpoint,
    otlpProtocol: t.otlpProtocol ?? 'grpc',
    ...(t.path !== undefined ? { path: t.path } : {}),
    headers: t.headers ?? {},
    // agentgateway's defaults: no trace of our own, the caller's decision honoured.
    randomSampling: t.randomSampling ?? false,
    clientSampling: t.clientSampling ?? true,
    resources: t.resources ?? {},
    ...(t.fields !== undefined ? { fields: checkedCelFields(t.fields) } : {})
  }
}

/** The fields as written, once their CEL compiled (a bad expression stops the start, naming it). */
function checkedCelFields (fields: NonNullable<NonNullable<StaticConfig['tracing']>['fields']>): typeof fields {
  try {
    compileCelFields(fields)
  } catch (err) {
    throw new Error(`config.tracing.fields / TRACING: ${(err as Error).message}`)
  }
  return fields
}

/**
 * Systems whose SO_REUSEPORT spreads connections over the sockets sharing a port (Node's
 * `reusePort`); elsewhere (macOS, Windows) the primary accepts and hands connections over.
 */
export const REUSE_PORT_BALANCES = ['linux', 'freebsd', 'sunos', 'aix'].includes(process.platform)

/**
 * Where connections cannot be spread by the kernel, the default stays one event loop: the
 * primary's copying (WORKER_ACCEPT=primary) is a way to use more cores when asked for, not a
 * free one.
 */
function workerCount (text: string | undefined, cpus: () => number, balances = REUSE_PORT_BALANCES): number {
  if (text === undefined || text === 'auto') return balances ? Math.min(MAX_WORKERS, cpus()) : 1
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1 || n > MAX_WORKERS) throw new Error(`WORKERS / config.workers: invalid value "${text}" (want an integer from 1 to ${MAX_WORKERS}, or auto)`)
  return n
}

/**
 * The mesh identity: files (config.mesh.certificate, MESH_CERT_FILE...) or the mesh CA
 * (config.mesh.ca, MESH_ENABLED=true), one or the other. MESH_ROOT_FILE is the root file of
 * whichever is in use.
 */
function meshIdentitySettings (file: StaticConfig, env: NodeJS.ProcessEnv): Pick<Settings, 'meshCertificate' | 'meshCa'> {
  const enabled = nonEmpty(env.MESH_ENABLED)
  const caOn = enabled === undefined ? file.mesh?.ca !== undefined : parseSwitch(enabled, 'MESH_ENABLED')
  const c = file.mesh?.certificate
  if (!caOn) {
    return { meshCa: null, meshCertificate: meshCertificateFiles(nonEmpty(env.MESH_CERT_FILE) ?? c?.cert, nonEmpty(env.MESH_KEY_FILE) ?? c?.key, nonEmpty(env.MESH_ROOT_FILE) ?? c?.root) }
  }
  if (c !== undefined || nonEmpty(env.MESH_CERT_FILE) !== undefined || nonEmpty(env.MESH_KEY_FILE) !== undefined) {
    throw new Error('mesh: the identity comes from the mesh CA (mesh.ca / MESH_ENABLED=true) or from files (mesh.certificate / MESH_CERT_FILE, MESH_KEY_FILE), not both')
  }
  const ca = file.mesh?.ca ?? {}
  const pick = (name: string, fromFile: string | undefined): string | undefined => nonEmpty(env[name]) ?? fromFile
  const namespace = pick('POD_NAMESPACE', ca.namespace)
  const serviceAccount = pick('SERVICE_ACCOUNT', ca.serviceAccount)
  if (namespace === undefined || serviceAccount === undefined) {
    throw new Error('mesh CA identity: the pod\'s namespace and service account are needed (POD_NAMESPACE and SERVICE_ACCOUNT, or mesh.ca.namespace and mesh.ca.serviceAccount)')
  }
  const serverName = pick('CA_SERVER_NAME', ca.serverName)
  return {
    meshCertificate: null,
    meshCa: {
      address: pick('CA_ADDRESS', ca.address) ?? ISTIO_CA_DEFAULTS.address,
      ...(serverName !== undefined ? { serverName } : {}),
      trustDomain: pick('TRUST_DOMAIN', ca.trustDomain) ?? ISTIO_CA_DEFAULTS.trustDomain,
      clusterId: pick('CLUSTER_ID', ca.clusterId) ?? ISTIO_CA_DEFAULTS.clusterId,
      network: pick('NETWORK', ca.network) ?? null,
      namespace,
      serviceAccount,
      tokenFile: resolve(pick('MESH_TOKEN_FILE', ca.tokenFile) ?? ISTIO_CA_DEFAULTS.tokenFile),
      rootFile: resolve(pick('MESH_ROOT_FILE', ca.rootFile) ?? ISTIO_CA_DEFAULTS.rootFile),
      ...(ca.certificateTtl !== undefined ? { validitySeconds: Math.max(1, Math.round(namedDuration(ca.certificateTtl, 'mesh.ca.certificateTtl') / 1000)) } : {}),
      ...(ca.renewFraction !== undefined ? { renewFraction: ca.renewFraction } : {})
    }
  }
}

/** The three mesh identity files, all or none (a partial set is a start-up error). */
function meshCertificateFiles (cert: string | undefined, key: string | undefined, root: string | undefined): Settings['meshCertificate'] {
  const given = [cert, key, root].filter(v => v !== undefined).length
  if (given === 0) return null
  if (given !== 3) throw new Error('mesh.certificate needs cert, key and root (MESH_CERT_FILE, MESH_KEY_FILE, MESH_ROOT_FILE)')
  return { cert: resolve(cert!), key: resolve(key!), root: resolve(root!) }
}

function workerAccept (text: string | undefined, balances = REUSE_PORT_BALANCES): Settings['workerAccept'] {
  if (text === undefined || text === 'auto') return balances ? 'reuseport' : 'primary'
  if (text === 'reuseport' || text === 'primary') {
    if (text === 'reuseport' && !balances) throw new Error(`WORKER_ACCEPT=reuseport: SO_REUSEPORT does not spread connections on ${process.platform}; use primary or auto`)
    return text
  }
  throw new Error(`WORKER_ACCEPT: invalid value "${text}" (want reuseport, primary or auto)`)
}

function sessionKey (hex: string | undefined): string | undefined {
  if (hex === undefined) return undefined
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error('SESSION_KEY / config.session.key: want 64 hex digits (a 256-bit key)')
  return hex
}

/** A duration setting, a bad one refused with the setting's name (as parseAddress and parseSwitch do). */
function namedDuration (text: string, name: string): number {
  try {
    return parseDuration(text)
  } catch (err) {
    throw new Error(`${name}: ${(err as Error).message}`)
  }
}

/** `on`/`true`/`1` or `off`/`false`/`0` (any case). */
function parseSwitch (text: string, name: string): boolean {
  const v = text.toLowerCase()
  if (['on', 'true', '1'].includes(v)) return true
  if (['off', 'false', '0'].includes(v)) return false
  throw new Error(`${name}: invalid value "${text}" (want true or false)`)
}

function nonEmpty (v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v
}

/** `127.0.0.1:15000`, `[::]:15020`, `localhost:1`, `:15000` (all interfaces) or `off`. */
export function parseAddress (text: string, name = 'address'): Address | null {
  if (text === 'off') return null
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]*)):(\d{1,5})$/.exec(text)
  if (m === null) throw new Error(`${name}: invalid address "${text}" (want host:port or off)`)
  const port = Number(m[3])
  if (port > 65535) throw new Error(`${name}: port out of range in "${text}"`)
  return { host: m[1] ?? (m[2] === '' ? '0.0.0.0' : m[2]!), port }
}

export function formatAddress (a: Address): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`
}
