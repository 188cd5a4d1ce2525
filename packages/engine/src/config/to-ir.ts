/**
 * Standalone config file → IR. Pure: the validated document and a file reader go in, the IR
 * and any semantic errors (with field paths) come out. Golden tests pin its output.
 */

import { resolve as resolvePath } from 'node:path'
import type { ConfigFile, GatewayConfig, McpBackendConfig, RouteBackendConfig, RouteConfig, RouteMatchConfig } from './schema.ts'
import type { ConfigDiagnostic } from './diagnostics.ts'
import type { AzureAuthIR, BackendIR, BackendRefIR, BindIR, GcpServiceAccountKeyIR, ListenerIR, McpTargetIR, UdpListenerIR, ProxyIR, RouteIR, RouteMatchIR, TlsMode, TlsServerIR, ValueMatchIR } from '../ir/types.ts'
import type { PolicySetIR } from '../ir/policy.ts'
import { contentVersion } from '../ir/version.ts'
import { checkTimerMs, parseDuration } from '../util/duration.ts'
import { linearRegexProblem } from '../util/linear-regex.ts'
import { intersectHostnamesWithOrigins } from '../routing/hostname.ts'
import { extAuthzToIR, policiesToIR, type PolicyContext } from './policies-to-ir.ts'
import { checkPrefixModifiers, checkTokenLimits } from './http-policy-to-ir.ts'
import { backendSettingsToIR, checkExtProcOnMcp, mirrorsToIR, retryToIR } from './traffic-to-ir.ts'
import { meshBackend } from './mesh-to-ir.ts'
import { hostPort } from '../util/host-port.ts'
import { durationOrOff, frontendToIR } from './frontend-to-ir.ts'
import { DEFAULT_REQUEST_HEADERS_TIMEOUT_MS } from '../http/frontend.ts'
import { streamRoutesToIR, udpRoutesToIR } from './stream-routes-to-ir.ts'
import { grpcPathMatch } from './grpc-match.ts'
import { serverTlsOptionsToIR, sameServerTlsOptions } from './tls-options-to-ir.ts'
import { routeGateways, type GatewayRefs } from './gateway-refs.ts'
import { readFileField, readPemField } from './referenced-file.ts'
import type { AiAuthIR, AiBackendAuth } from './ai-to-ir.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import { promptGuardToIR } from './prompt-guard-to-ir.ts'

// The translation of ai backends and models, and the LLM provider modules it reads (about 15
// modules), load with the first config that has an ai backend or models: translating a
// config of plain routes never loads them (bench/footprint.ts). Paths are util/'s (lazyRequire).
const aiToIR = lazyRequire<typeof import('./ai-to-ir.ts')>('../config/ai-to-ir.ts')
const modelsToIR = lazyRequire<typeof import('./models-to-ir.ts')>('../config/models-to-ir.ts')
const providers = lazyRequire<typeof import('../llm/providers/index.ts')>('../llm/providers/index.ts')
// And an InferencePool backend's translation (with inference/endpoints.ts) with the first one.
const inferencePoolToIR = lazyRequire<typeof import('./inference-pool-to-ir.ts')>('../config/inference-pool-to-ir.ts')
/** The header names of every provider's key: only ai backends' auth reads them. */
const credentialHeaders = (): readonly string[] => providers().CREDENTIAL_HEADERS

export interface ToIROptions {
  /** Directory relative paths (TLS files) are resolved against. */
  baseDir: string
  /** Reads a file as UTF-8; injected so translation stays pure and testable. */
  readFile: (path: string) => string
  /**
   * The config is a fragment of a larger one (the controller loads a resource's policies on a
   * stand-in route): checks that need the whole route — backendAuth.passthrough's
   * authentication policy, which a PorticoPolicy on the HTTPRoute may give — are skipped.
   */
  fragment?: boolean
  /**
   * Cluster mode (the controller sets it): a model's baseURL at a loopback, link-local or
   * metadata address is refused (util/ssrf.ts), as a namespace's users write it.
   */
  refuseLocalBaseURL?: boolean
}

export interface ToIRResult {
  ir: ProxyIR
  diagnostics: ConfigDiagnostic[]
}

type Path = Array<string | number>

export const DEFAULT_GATEWAY = 'default'
const DEFAULT_BIND_ADDRESS = '0.0.0.0'

export function configToIR (config: ConfigFile, options: ToIROptions): ToIRResult {
  const diagnostics: ConfigDiagnostic[] = []
  const report = (path: Path, message: string) => { diagnostics.push({ path, message }) }

  const backends = new Map<string, BackendIR>()
  const listenersByGateway = new Map<string, ListenerIR>()
  const binds = new Map<string, BindIR>()

  for (const [name, gw] of Object.entries(config.gateways ?? {})) {
    const listener = translateGateway(name, gw, ['gateways', name], binds, options, report)
    if (listener !== undefined) listenersByGateway.set(name, listener)
  }

  const gatewayRefs: GatewayRefs = { listeners: listenersByGateway, declared: new Set(Object.keys(config.gateways ?? {})), defaultGateway: DEFAULT_GATEWAY, report }
  const routeKeys = new Set<string>()
  /** Gateways whose extProc was refused for an MCP route already (said once, not per route). */
  const refusedOnMcp = new Set<string>()
  ;(config.routes ?? []).forEach((route, index) => {
    const path: Path = ['routes', index]
    const ir = translateRoute(route, index, path, backends, options, report)
    const duplicate = routeKeys.has(ir.key)
    if (duplicate) report([...path, 'name'], `duplicate route name "${ir.key}"`)
    routeKeys.add(ir.key)

    for (const { name: gwName, listener, where } of routeGateways(route.gateways, path, gatewayRefs)) {
      if (listener.protocol === 'UDP') {
        report(where, `gateway "${gwName}" has protocol UDP: it forwards datagrams, not HTTP requests (use udpRoutes)`)
        continue
      }
      if (listener.protocol === 'TCP' || listener.protocol === 'TLS') {
        report(where, `gateway "${gwName}" has protocol ${listener.protocol}: it forwards connections, not HTTP requests (use tcpRoutes${listener.protocol === 'TLS' ? ' or tlsRoutes' : ''})`)
        continue
      }
      const served = intersectHostnamesWithOrigins(listener.hostname, ir.hostnames)
      if (served === null) {
        report([...path, 'hostnames'], `none of the route's hostnames is served by gateway "${gwName}" (hostname ${listener.hostname ?? ''})`)
        continue
      }
      if (!duplicate) listener.routes.push({ ...ir, ...served })
      if (options.fragment !== true) checkPassthroughAuth(ir, listener, backends, path, report)
      if (!refusedOnMcp.has(gwName) && ir.backends.some(r => backends.get(r.backend)?.kind === 'mcp')) {
        const before = diagnostics.length
        checkExtProcOnMcp(listener.policies, `route "${ir.key}" on this gateway has an mcp backend`, ['gateways', gwName, 'policies'], report)
        if (diagnostics.length > before) refusedOnMcp.add(gwName)
      }
    }
  })

  if (config.models !== undefined && config.models.length > 0) {
    const translated = modelsToIR().modelsToIR(config.models, {
      report,
      translateBackends: (route, path, fail) => translateRoute(route, 0, path, backends, options, fail),
      backends,
      ...(options.refuseLocalBaseURL === true ? { refuseLocalBaseURL: true } : {})
    })
    modelsToIR().attachModels(translated, { listenersByGateway, declaredGateways: gatewayRefs.declared, defaultGateway: DEFAULT_GATEWAY }, report)
  }

  const streamContext = { gatewayRefs, backends, options, report }
  streamRoutesToIR('tcp', config.tcpRoutes ?? [], streamContext)
  streamRoutesToIR('tls', config.tlsRoutes ?? [], streamContext)
  udpRoutesToIR(config.udpRoutes ?? [], streamContext)

  const ir: ProxyIR = {
    version: '',
    binds: [...binds.values()].sort((a, b) => a.port - b.port || a.address.localeCompare(b.address)),
    backends: [...backends.values()]
  }
  ir.version = contentVersion(ir)
  return { ir, diagnostics }
}

function translateGateway (
  name: string,
  gw: GatewayConfig,
  path: Path,
  binds: Map<string, BindIR>,
  options: ToIROptions,
  report: (path: Path, message: string) => void
): ListenerIR | undefined {
  const protocol = gw.protocol ?? 'HTTP'
  const address = gw.address ?? DEFAULT_BIND_ADDRESS
  const stream = protocol === 'TCP' || protocol === 'TLS' || protocol === 'UDP'
  let tlsMode: TlsMode | undefined
  if (protocol === 'TLS') {
    tlsMode = gw.tls?.mode ?? (gw.tls?.cert !== undefined || gw.tls?.key !== undefined ? 'Terminate' : 'Passthrough')
    if (tlsMode === 'Passthrough') {
      for (const field of ['cert', 'key', 'root', 'clientCertMode', 'minTLSVersion', 'maxTLSVersion', 'cipherSuites'] as const) {
        if (gw.tls?.[field] !== undefined) report([...path, 'tls', field], 'is not used in mode Passthrough: the backend completes the handshake')
      }
    }
  } else if (gw.tls?.mode !== undefined) {
    report([...path, 'tls', 'mode'], 'mode is only used with protocol TLS')
  }
  let tls: TlsServerIR | undefined
  // A gateway whose TLS cannot be set up is not installed, but the rest of it is still
  // checked (its policies, its timers): --validate reports every problem in one run.
  let usable = true
  if (protocol === 'HTTPS' || tlsMode === 'Terminate') {
    tls = serverTlsToIR(gw, protocol, path, options, report)
    usable = tls !== undefined
  } else if (gw.tls !== undefined && !stream) {
    report([...path, 'tls'], 'tls is only used with protocol HTTPS or TLS')
  }
  if (stream) {
    // What only HTTP listeners read: said once, at the field, instead of being ignored.
    for (const field of ['http2', 'path', 'timeout', 'clientIPDetection', 'upgrades', 'policies', 'filters'] as const) {
      if (gw[field] !== undefined) report([...path, field], `is not used with protocol ${protocol} (${protocol === 'UDP' ? 'datagrams' : 'connections'} are forwarded, not HTTP requests)`)
    }
    if (protocol === 'UDP' && gw.hostname !== undefined) report([...path, 'hostname'], 'is not used with protocol UDP: a datagram carries no name')
    if (protocol === 'UDP' && gw.tls !== undefined) report([...path, 'tls'], 'is not used with protocol UDP')
    if (protocol === 'TCP' && gw.hostname !== undefined) report([...path, 'hostname'], 'is not used with protocol TCP: a plain TCP connection carries no name (use protocol TLS to tell connections apart by SNI)')
  }

  const listener: ListenerIR = {
    key: name,
    gateway: name,
    name,
    protocol,
    policies: policiesToIR(gw.policies ?? {}, [...path, 'policies'], { baseDir: options.baseDir, readFile: options.readFile, report }),
    routes: []
  }
  if (gw.filters !== undefined && !stream) {
    // Each entry is checked even when an earlier one is wrong: --validate reports them all.
    const requests = gw.filters.requests.map((f, i) => extAuthzToIR(f.extAuthz, [...path, 'filters', 'requests', i, 'extAuthz'], report))
    if (requests.every(r => r !== undefined)) listener.filters = { requests: requests.map(extAuthz => ({ extAuthz: extAuthz! })) }
  }
  if (gw.udp !== undefined) {
    if (protocol !== 'UDP') report([...path, 'udp'], 'is only used with protocol UDP')
    else {
      const udp: UdpListenerIR = {}
      if (gw.udp.idleTimeout !== undefined) {
        udp.idleTimeoutMs = parseDuration(gw.udp.idleTimeout)
        checkTimerMs(udp.idleTimeoutMs, [...path, 'udp', 'idleTimeout'], report)
      }
      if (gw.udp.maxFlows !== undefined) udp.maxFlows = gw.udp.maxFlows
      listener.udp = udp
    }
  }
  if (gw.hostname !== undefined && protocol !== 'TCP' && protocol !== 'UDP') listener.hostname = gw.hostname.toLowerCase()
  if (tlsMode !== undefined) {
    listener.tlsMode = tlsMode
    // A TLS port picks the listener by SNI before the handshake: each terminating listener
    // answers with its own certificate.
    if (tls !== undefined) listener.tls = tls
  }
  if (stream) listener.streamRoutes = []
  const frontend = stream ? {} : frontendToIR(gw)
  checkTimerMs(frontend.requestHeadersTimeoutMs, [...path, 'timeout', 'http', 'requestHeadersTimeout'], report)
  checkTimerMs(frontend.frontend?.requestBodyIdleTimeoutMs, [...path, 'timeout', 'http', 'requestBodyIdleTimeout'], report)
  checkTimerMs(frontend.frontend?.backendRequestTimeoutMs, [...path, 'timeout', 'http', 'backendRequestTimeout'], report)
  checkTimerMs(frontend.frontend?.streamIdleTimeoutMs, [...path, 'timeout', 'http', 'streamIdleTimeout'], report)
  if (frontend.frontend !== undefined) listener.frontend = frontend.frontend
  if (!usable) return undefined

  const bindKey = `${address}:${gw.port}`
  const existing = binds.get(bindKey)
  if (existing === undefined) {
    const bind: BindIR = { key: bindKey, address, port: gw.port, protocol, listeners: [listener] }
    if (tls !== undefined) bind.tls = tls
    if (frontend.requestHeadersTimeoutMs !== undefined) bind.requestHeadersTimeoutMs = frontend.requestHeadersTimeoutMs
    if (gw.http2 === false) bind.http2 = false
    binds.set(bindKey, bind)
    return listener
  }
  if (existing.protocol !== protocol) {
    report([...path, 'protocol'], `port ${gw.port} is already used by gateway "${existing.listeners[0]!.gateway}" with protocol ${existing.protocol}`)
    return undefined
  }
  if (protocol === 'TCP' || protocol === 'UDP') {
    report(path, `port ${gw.port} is already used by gateway "${existing.listeners[0]!.gateway}": a ${protocol} port serves one gateway (${protocol === 'UDP' ? 'datagrams' : 'connections'} carry no name to tell gateways apart)`)
    return undefined
  }
  if (protocol === 'TLS') {
    const clash = existing.listeners.find(l => l.hostname === listener.hostname)
    if (clash !== undefined) {
      report(gw.hostname === undefined ? path : [...path, 'hostname'],
        `port ${gw.port} is already used by gateway "${clash.gateway}" for ${clash.hostname === undefined ? 'any SNI name' : `SNI name ${clash.hostname}`}; TLS gateways sharing a port need distinct hostnames`)
      return undefined
    }
    if (tls !== undefined) existing.tls ??= tls
    existing.listeners.push(listener)
    return listener
  }
  if (tls !== undefined && !sameServerTlsOptions(existing.tls, tls)) {
    // Versions and suites are settled in the handshake, before SNI could pick a gateway's.
    report([...path, 'tls'], `gateways sharing port ${gw.port} must use the same minTLSVersion, maxTLSVersion and cipherSuites`)
    return undefined
  }
  if (tls !== undefined && (existing.tls?.clientValidation?.caCerts !== tls.clientValidation?.caCerts || existing.tls?.clientValidation?.mode !== tls.clientValidation?.mode)) {
    // The handshake asks for a client certificate before the Host header picks a gateway.
    report([...path, 'tls'], `gateways sharing port ${gw.port} must use the same root and clientCertMode`)
    return undefined
  }
  if ((frontend.requestHeadersTimeoutMs ?? DEFAULT_REQUEST_HEADERS_TIMEOUT_MS) !== (existing.requestHeadersTimeoutMs ?? DEFAULT_REQUEST_HEADERS_TIMEOUT_MS)) {
    // The head is read before its Host header can pick a gateway: one value per port.
    report([...path, 'timeout', 'http', 'requestHeadersTimeout'], `gateways sharing port ${gw.port} must use the same requestHeadersTimeout (gateway "${existing.listeners[0]!.gateway}" has ${describeMs(existing.requestHeadersTimeoutMs ?? DEFAULT_REQUEST_HEADERS_TIMEOUT_MS)})`)
    return undefined
  }
  if ((gw.http2 ?? true) !== (existing.http2 ?? true)) {
    // ALPN and the h2c preface are read before a Host header can pick a gateway.
    report([...path, 'http2'], `gateways sharing port ${gw.port} must agree on http2 (gateway "${existing.listeners[0]!.gateway}" has ${String(existing.http2 ?? true)})`)
    return undefined
  }
  const clash = existing.listeners.find(l => l.hostname === listener.hostname)
  if (clash !== undefined) {
    report(gw.hostname === undefined ? path : [...path, 'hostname'],
      `port ${gw.port} is already used by gateway "${clash.gateway}" for ${clash.hostname === undefined ? 'any host' : `host ${clash.hostname}`}; gateways sharing a port need distinct hostnames`)
    return undefined
  }
  if (tls !== undefined && existing.tls !== undefined && (existing.tls.cert !== tls.cert || existing.tls.key !== tls.key)) {
    // Several certificates on one port: the client hello's SNI name picks the gateway and
    // so its certificate (ListenerIR.tls); a name no gateway claims gets the port's default.
    if (listener.hostname !== undefined) listener.tls = { cert: tls.cert, key: tls.key }
    else {
      // A gateway for any name: its certificate becomes the default, and the gateways before
      // it (all with hostnames, or they would clash) keep theirs by SNI.
      for (const l of existing.listeners) l.tls ??= { cert: existing.tls.cert, key: existing.tls.key }
      existing.tls = { ...existing.tls, cert: tls.cert, key: tls.key }
    }
  }
  existing.listeners.push(listener)
  return listener
}

/**
 * The certificate, key and client CA of an HTTPS gateway or a terminating TLS one. Every
 * field is checked and every file read before giving up, so each problem is reported once.
 */
function serverTlsToIR (gw: GatewayConfig, protocol: string, path: Path, options: ToIROptions, report: (path: Path, message: string) => void): TlsServerIR | undefined {
  if (gw.tls === undefined) {
    report(path, `protocol ${protocol} needs "tls" with cert and key files`)
    return undefined
  }
  const t = gw.tls
  const files = { ...options, report }
  const pem = (field: 'cert' | 'key'): string | undefined => {
    const file = t[field]
    if (file !== undefined) return readPemField(file, [...path, 'tls', field], files)
    report([...path, 'tls', field], `required${protocol === 'TLS' ? ' in mode Terminate' : ' for HTTPS'} (the certificate and key Portico answers with)`)
    return undefined
  }
  const cert = pem('cert')
  const key = pem('key')
  const caCerts = t.root !== undefined ? readPemField(t.root, [...path, 'tls', 'root'], files) : undefined
  const tls: TlsServerIR = { cert: cert ?? '', key: key ?? '' }
  if (caCerts !== undefined) {
    tls.clientValidation = { caCerts, mode: t.clientCertMode ?? 'AllowValidOnly' }
  } else if (t.clientCertMode !== undefined && t.root === undefined) {
    report([...path, 'tls', 'clientCertMode'], 'clientCertMode needs root (the CA client certificates are checked against)')
  }
  const tlsOptionsOk = serverTlsOptionsToIR(t, tls, [...path, 'tls'], report)
  if (cert === undefined || key === undefined || (t.root !== undefined && caCerts === undefined) || !tlsOptionsOk) return undefined
  return tls
}

function describeMs (ms: number): string {
  return ms === 0 ? 'off' : `${ms}ms`
}

function translateRoute (
  route: RouteConfig,
  index: number,
  path: Path,
  backends: Map<string, BackendIR>,
  options: ToIROptions,
  report: (path: Path, message: string) => void
): RouteIR {
  const name = route.name ?? `route${index}`
  const key = route.namespace !== undefined ? `${route.namespace}/${name}` : name
  const fail = report
  const pc: PolicyContext = { baseDir: options.baseDir, readFile: options.readFile, report }

  const matches: RouteMatchIR[] = (route.matches ?? [{}]).map((m, i) => translateMatch(m, [...path, 'matches', i], fail))

  const refs: BackendRefIR[] = []
  /**
   * One backend of the route, or one provider of an ai backend's failover groups (`aiAt` and
   * `policiesAt` then name its place in the groups): its BackendIR into `backends`, its
   * reference returned.
   */
  const backendRef = (b: RouteBackendConfig, at: Path, aiAt: Path, policiesAt: Path, failoverProvider: boolean): BackendRefIR | undefined => {
    const { backendTLS, health, http, backendAuth, promptGuard, ...backendPolicies } = b.policies ?? {}
    const authAt = [...policiesAt, 'backendAuth']
    // Bedrock signs its requests (or sends its API key) itself: its backendAuth goes into its IR.
    const selfAuth = b.ai?.provider?.bedrock !== undefined
    let gcpCredential: GcpServiceAccountKeyIR | undefined
    const given = backendAuth === undefined ? 0 : [backendAuth.key, backendAuth.passthrough, backendAuth.aws, backendAuth.gcp, backendAuth.azure].filter(v => v !== undefined).length
    if (backendAuth !== undefined && given !== 1) report(authAt, 'needs exactly one of key, passthrough, aws, gcp or azure')
    if (backendAuth?.aws !== undefined && !selfAuth) report([...authAt, 'aws'], 'applies to ai backends of provider bedrock only')
    if (backendAuth?.gcp !== undefined) {
      if (b.ai?.provider?.vertex === undefined) report([...authAt, 'gcp'], 'applies to ai backends of provider vertex')
      else if (backendAuth.gcp.credential !== undefined) gcpCredential = gcpServiceAccountKey(backendAuth.gcp.credential, [...authAt, 'gcp', 'credential'], pc)
    }
    let azureAuth: AzureAuthIR | undefined
    if (backendAuth?.azure !== undefined) {
      if (b.ai?.provider?.azure === undefined) report([...authAt, 'azure'], 'applies to ai backends of provider azure')
      else azureAuth = aiToIR().azureAuthToIR(backendAuth.azure, [...authAt, 'azure'], report)
    }
    // The key inline, or read from its file now (and again at every reload, which loads anew).
    // (`apiKey`, not `key`: `key` is the route's, which names its MCP backends below.)
    const apiKey = backendAuth?.key === undefined ? undefined : backendKey(backendAuth.key, [...authAt, 'key'], pc)
    const keyHeader = b.ai !== undefined ? aiToIR().aiKeyHeader(b.ai) : { header: 'authorization', bearer: true }
    if (apiKey !== undefined && !selfAuth) {
      // The key becomes the Authorization header the backend gets: one header policy, so the
      // trace and /config_dump show it there (redacted, as every credential header is).
      if (backendPolicies.requestHeaderModifier?.set?.authorization !== undefined || backendPolicies.requestHeaderModifier?.add?.authorization !== undefined) {
        report(authAt, 'the Authorization header is also set by requestHeaderModifier: use one of them')
      }
      // An ai backend's provider takes its key its own way (api-key, x-api-key, x-goog-api-key):
      // the client's Authorization must not reach it then.
      const mod = backendPolicies.requestHeaderModifier ?? {}
      if (keyHeader === null) {
        report(authAt, 'does not apply to this provider: its requests are signed with the cloud\'s credentials')
      } else if (keyHeader.header === 'authorization') {
        backendPolicies.requestHeaderModifier = { ...mod, set: { ...mod.set, authorization: `Bearer ${apiKey}` }, ...removing(mod.remove, b.ai !== undefined ? credentialHeaders().filter(h => h !== 'authorization') : []) }
      } else {
        // The other providers' key headers a client sent (an Anthropic SDK's x-api-key to
        // Gemini) are removed too: the client's key for the gateway reaches no provider.
        backendPolicies.requestHeaderModifier = { ...mod, set: { ...mod.set, [keyHeader.header]: apiKey }, ...removing(mod.remove, credentialHeaders().filter(h => h !== keyHeader.header)) }
      }
    }
    const i = at[at.length - 1] as number
    if (backendAuth?.passthrough !== undefined) {
      if (b.ai === undefined) report([...authAt, 'passthrough'], 'applies to ai backends (a host backend gets the client\'s token with jwtAuth keepToken: true)')
      else if (keyHeader === null) report([...authAt, 'passthrough'], 'does not apply to this provider: its requests are signed with the cloud\'s credentials')
      else {
        // Every credential header the client sent is removed; the ai backend then puts the
        // validated token in the provider's own header (llm/request.ts), after these policies.
        const mod = backendPolicies.requestHeaderModifier ?? {}
        for (const h of credentialHeaders()) {
          if (mod.set?.[h] !== undefined || mod.add?.[h] !== undefined) report([...authAt, 'passthrough'], `the ${h} header is also set by requestHeaderModifier: use one of them`)
        }
        backendPolicies.requestHeaderModifier = { ...mod, ...removing(mod.remove, credentialHeaders()) }
      }
    }
    if (azureAuth !== undefined) {
      // The adapter sends the Entra token as Authorization: Bearer; the client's credentials go.
      const mod = backendPolicies.requestHeaderModifier ?? {}
      backendPolicies.requestHeaderModifier = { ...mod, ...removing(mod.remove, credentialHeaders()) }
    }
    const ownAuth = selfAuth && backendAuth !== undefined ? { ...backendAuth, ...(apiKey !== undefined ? { key: apiKey } : {}) } : undefined
    const aiAuth = { gcpCredential, azureAuth, passthrough: backendAuth?.passthrough !== undefined && b.ai !== undefined && keyHeader !== null }
    const onlyKind = [b.host, b.endpoints, b.mcp, b.ai, b.inferencePool].filter(k => k !== undefined).length === 1
    let backend = onlyKind && b.mcp !== undefined
      ? translateMcpBackend(b.mcp, `${key}${i === 0 ? '' : `#${i}`}`, [...at, 'mcp'], options, fail)
      : onlyKind && b.inferencePool !== undefined
        ? inferencePoolToIR().inferencePoolToIR(b.inferencePool, [...at, 'inferencePool'], pc)
        : translateBackend(b, at, fail, ownAuth, aiAuth, aiAt, policiesAt)
    if (b.mesh !== undefined && backend !== undefined) {
      if (b.host === undefined && b.endpoints === undefined) report([...at, 'mesh'], 'applies to host and endpoints backends')
      else backend = meshBackend(backend, b.mesh)
    }
    if (backend === undefined) {
      // The backend cannot be built, but its policies are still checked: every problem of
      // the file is reported in one run.
      policiesToIR(backendPolicies, policiesAt, pc)
      return undefined
    }
    if (promptGuard !== undefined) {
      const guards = promptGuardToIR(promptGuard, [...policiesAt, 'promptGuard'], pc, (k, keyAt) => backendKey(k, keyAt, pc))
      if (backend.kind !== 'ai' || backend.ai === undefined) report([...policiesAt, 'promptGuard'], 'applies to ai backends')
      else if (guards.request.length > 0 || guards.response.length > 0) backend = { ...backend, ai: { ...backend.ai, promptGuard: guards } }
    }
    if (backend.kind !== 'mcp') {
      // A provider of failover groups has passive health on, with the defaults unless its
      // policies say otherwise: ejection is how a failing provider stops getting requests first.
      backend = backendSettingsToIR(backend, { backendTLS, health: health ?? (failoverProvider ? {} : undefined), http }, policiesAt, options, report)
      // ...where a 429 (rate limited) counts against it as a 5xx does, and each ejection in a
      // row lasts longer (agentgateway's multiplicative backoff).
      if (failoverProvider && backend.health !== undefined) backend = { ...backend, health: { ...backend.health, rateLimited: true, backoff: true } }
      // The picker chooses a pool's endpoint; passive health would second-guess it.
      if (backend.inferencePool !== undefined && health !== undefined) report([...policiesAt, 'health'], 'does not apply to an inferencePool backend: its endpoint picker chooses the endpoint')
    } else if (backendTLS !== undefined || health !== undefined || http !== undefined) report(policiesAt, 'backendTLS, health and http apply to host backends, not mcp')
    const known = backends.get(backend.key)
    if (known === undefined) backends.set(backend.key, backend)
    else if (backend.kind === 'ai' && JSON.stringify(known) !== JSON.stringify(backend)) {
      report([...aiAt, 'name'], `another ai backend is named "${backend.name}" with different settings; give each its own name`)
    }
    const ref: BackendRefIR = { backend: backend.key, weight: b.weight ?? 1, policies: policiesToIR(backendPolicies, policiesAt, pc) }
    checkPrefixModifiers(ref.policies, matches, policiesAt, report)
    checkTokenLimits(ref.policies, backend.kind === 'ai', `this backend is ${backend.kind === 'static' ? 'a host' : backend.kind}`, policiesAt, report)
    checkExtProcOnMcp(ref.policies, backend.kind === 'mcp' ? 'this backend is mcp' : null, policiesAt, report)
    return ref
  }
  ;(route.backends ?? []).forEach((b, i) => {
    const at = [...path, 'backends', i]
    if (b.ai?.groups === undefined) {
      const ref = backendRef(b, at, [...at, 'ai'], [...at, 'policies'], false)
      if (ref !== undefined) refs.push(ref)
      return
    }
    const groups = aiToIR().aiGroupsToRefs(b, at, report, (provider, providerAt) => backendRef(provider, at, providerAt, [...providerAt, 'policies'], true))
    if (groups === undefined) return
    // The route's choice among its backends is the whole failover set; its first provider
    // stands for it wherever one backend is read (a request starts there when none is ejected).
    const first = groups[0]![0]!
    refs.push({ backend: first.backend, weight: b.weight ?? 1, policies: first.policies, failover: groups })
  })

  const { timeout, retry, requestMirror, ...policies } = route.policies ?? {}
  const ir: RouteIR = {
    key,
    name,
    hostnames: (route.hostnames ?? []).map(h => h.toLowerCase()),
    matches,
    policies: policiesToIR(policies, [...path, 'policies'], pc),
    backends: refs,
    order: index
  }
  if (route.namespace !== undefined) ir.namespace = route.namespace
  checkPrefixModifiers(ir.policies, matches, [...path, 'policies'], report)
  checkTokenLimits(ir.policies, refs.some(r => backends.get(r.backend)?.kind === 'ai'), 'this route has none', [...path, 'policies'], report)
  checkExtProcOnMcp(ir.policies, refs.some(r => backends.get(r.backend)?.kind === 'mcp') ? 'this route has an mcp backend' : null, [...path, 'policies'], report)
  if (retry !== undefined) ir.retry = retryToIR(retry, [...path, 'policies', 'retry'], report)
  if (requestMirror !== undefined) {
    ir.mirrors = mirrorsToIR(requestMirror, [...path, 'policies', 'requestMirror'], (host, p) => {
      const backend = translateBackend({ host }, p, fail)
      if (backend !== undefined && !backends.has(backend.key)) backends.set(backend.key, backend)
      return backend
    })
  }
  if (timeout !== undefined) {
    ir.timeouts = {}
    if (timeout.requestTimeout !== undefined) ir.timeouts.requestMs = parseDuration(timeout.requestTimeout)
    if (timeout.backendRequestTimeout !== undefined) ir.timeouts.backendRequestMs = parseDuration(timeout.backendRequestTimeout)
    if (timeout.requestBodyIdleTimeout !== undefined) ir.timeouts.requestBodyIdleMs = durationOrOff(timeout.requestBodyIdleTimeout)
    if (timeout.requestBodyMinRate !== undefined) ir.timeouts.requestBodyMinRate = timeout.requestBodyMinRate
    if (timeout.streamIdleTimeout !== undefined) ir.timeouts.streamIdleMs = durationOrOff(timeout.streamIdleTimeout)
    checkTimerMs(ir.timeouts.requestMs, [...path, 'policies', 'timeout', 'requestTimeout'], report)
    checkTimerMs(ir.timeouts.backendRequestMs, [...path, 'policies', 'timeout', 'backendRequestTimeout'], report)
    checkTimerMs(ir.timeouts.requestBodyIdleMs, [...path, 'policies', 'timeout', 'requestBodyIdleTimeout'], report)
    checkTimerMs(ir.timeouts.streamIdleMs, [...path, 'policies', 'timeout', 'streamIdleTimeout'], report)
  }
  return ir
}

function translateMatch (m: RouteMatchConfig, path: Path, fail: (p: Path, message: string) => void): RouteMatchIR {
  let pathMatch: RouteMatchIR['path'] = { kind: 'prefix', value: '/' }
  if (m.path !== undefined) {
    const given = (['exact', 'pathPrefix', 'regex'] as const).filter(k => m.path![k] !== undefined)
    if (given.length !== 1) {
      fail([...path, 'path'], `needs exactly one of exact, pathPrefix or regex${given.length > 1 ? ` (got ${given.join(', ')})` : ''}`)
    } else {
      const kind = given[0]!
      const value = m.path[kind]!
      if (kind === 'regex') checkRegex(value, [...path, 'path', 'regex'], fail)
      pathMatch = { kind: kind === 'pathPrefix' ? 'prefix' : kind, value }
    }
  }
  if (m.grpc !== undefined) {
    if (m.path !== undefined) fail([...path, 'grpc'], 'cannot be used with path (a gRPC method is matched on the path)')
    else pathMatch = grpcPathMatch(m.grpc, [...path, 'grpc'], fail) ?? pathMatch
  }
  const out: RouteMatchIR = {
    path: pathMatch,
    headers: (m.headers ?? []).map((h, i) => translateValueMatch(h.name.toLowerCase(), h.value, [...path, 'headers', i], fail)),
    query: (m.query ?? []).map((q, i) => translateValueMatch(q.name, q.value, [...path, 'query', i], fail))
  }
  if (m.method !== undefined) out.method = m.method
  return out
}

function translateValueMatch (name: string, value: { exact?: string, regex?: string }, path: Path, fail: (p: Path, message: string) => void): ValueMatchIR {
  if ((value.exact === undefined) === (value.regex === undefined)) {
    fail([...path, 'value'], 'needs exactly one of exact or regex')
    return { name, kind: 'exact', value: '' }
  }
  if (value.regex !== undefined) {
    checkRegex(value.regex, [...path, 'value', 'regex'], fail)
    return { name, kind: 'regex', value: value.regex }
  }
  return { name, kind: 'exact', value: value.exact! }
}

/** The pattern must compile on the linear-time engine the route table runs it on. */
function checkRegex (source: string, path: Path, fail: (p: Path, message: string) => void): void {
  const problem = linearRegexProblem(source)
  if (problem !== null) fail(path, problem)
}

export const DEFAULT_MCP_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
/** As the MCP SDK's DEFAULT_REQUEST_TIMEOUT_MSEC: what a client waits by default anyway. */
export const DEFAULT_MCP_REQUEST_TIMEOUT_MS = 60_000
/** A session whose client went away (GET stream closed, nothing in flight) is kept this long. */
export const DEFAULT_MCP_SESSION_IDLE_TIMEOUT_MS = 60_000
export const DEFAULT_MCP_MAX_SESSIONS = 1000
/** A session holding stdio processes with no GET stream open, idle this long, is closed. */
export const DEFAULT_MCP_STDIO_SESSION_IDLE_TIMEOUT_MS = 5 * 60_000
/** Most processes of one stdio target (65–80 MB each for a Node server such as server-everything). */
export const DEFAULT_MCP_STDIO_MAX_PROCESSES = 8

function translateMcpBackend (m: McpBackendConfig, name: string, path: Path, options: ToIROptions, fail: (p: Path, message: string) => void): BackendIR | undefined {
  const targets: McpTargetIR[] = []
  const seen = new Set<string>()
  m.targets.forEach((t, i) => {
    const tp = [...path, 'targets', i]
    if (seen.has(t.name)) fail([...tp, 'name'], `duplicate target name "${t.name}"`)
    seen.add(t.name)
    const limits = { maxMessageBytes: t.maxMessageSize ?? DEFAULT_MCP_MAX_MESSAGE_BYTES, requestTimeoutMs: DEFAULT_MCP_REQUEST_TIMEOUT_MS }
    if (t.requestTimeout !== undefined) {
      limits.requestTimeoutMs = parseDuration(t.requestTimeout)
      // A Node timer longer than 2^31-1 ms fires at once.
      checkTimerMs(limits.requestTimeoutMs, [...tp, 'requestTimeout'], fail, 1)
    }
    const kinds = (['stdio', 'mcp', 'sse'] as const).filter(k => t[k] !== undefined)
    if (kinds.length !== 1) {
      fail(tp, `needs exactly one of stdio, mcp or sse${kinds.length > 1 ? ` (got ${kinds.join(', ')})` : ''}`)
      return
    }
    if (t.stdio !== undefined) {
      const cmd = t.stdio.cmd.includes('/') && !t.stdio.cmd.startsWith('/') ? resolvePath(options.baseDir, t.stdio.cmd) : t.stdio.cmd
      const target: McpTargetIR = { name: t.name, kind: 'stdio', cmd, args: t.stdio.args ?? [], env: t.stdio.env ?? {}, maxProcesses: t.stdio.maxProcesses ?? DEFAULT_MCP_STDIO_MAX_PROCESSES, ...limits }
      if (t.stdio.cwd !== undefined) target.cwd = resolvePath(options.baseDir, t.stdio.cwd)
      targets.push(target)
      return
    }
    const kind = kinds[0] as 'mcp' | 'sse'
    const url = t[kind]!.host
    try {
      // eslint-disable-next-line no-new
      new URL(url)
    } catch {
      fail([...tp, kind, 'host'], `invalid URL "${url}"`)
      return
    }
    targets.push({ name: t.name, kind, url, ...limits })
  })
  let idleMs = DEFAULT_MCP_SESSION_IDLE_TIMEOUT_MS
  if (m.sessionIdleTimeout !== undefined) {
    idleMs = parseDuration(m.sessionIdleTimeout)
    checkTimerMs(idleMs, [...path, 'sessionIdleTimeout'], fail, 1)
  }
  let stdioIdleMs = DEFAULT_MCP_STDIO_SESSION_IDLE_TIMEOUT_MS
  if (m.stdioSessionIdleTimeout !== undefined) {
    stdioIdleMs = parseDuration(m.stdioSessionIdleTimeout)
    checkTimerMs(stdioIdleMs, [...path, 'stdioSessionIdleTimeout'], fail, 1)
  }
  return {
    key: `mcp:${name}`,
    kind: 'mcp',
    name,
    protocol: 'http',
    endpoints: [],
    target: targets.map(t => t.name).join(','),
    mcp: {
      targets,
      statefulMode: m.statefulMode ?? 'stateful',
      prefixMode: m.prefixMode ?? 'conditional',
      failureMode: m.failureMode ?? 'failClosed',
      dnsRebindingProtection: m.dnsRebindingProtection ?? true,
      allowedOrigins: m.allowedOrigins ?? [],
      maxMessageBytes: m.maxMessageSize ?? DEFAULT_MCP_MAX_MESSAGE_BYTES,
      sessionIdleTimeoutMs: idleMs,
      maxSessions: m.maxSessions ?? DEFAULT_MCP_MAX_SESSIONS,
      stdioSessionIdleTimeoutMs: stdioIdleMs
    }
  }
}

/** `remove` of a header policy: the policy's own, plus `names` (each once); nothing when both are empty. */
function removing (own: string[] | undefined, names: readonly string[]): { remove?: string[] } {
  const remove = [...(own ?? []).filter(h => !names.includes(h.toLowerCase())), ...names]
  return remove.length === 0 ? {} : { remove }
}

/**
 * backendAuth.passthrough sends the token a jwtAuth or apiKey policy validated: a route (on
 * this gateway) where no such policy runs — at the gateway, the route or the backend reference —
 * could never send one, and is refused rather than answering every request 401. (At run time a
 * request without a validated token is refused all the same: nothing else is ever sent.)
 */
function checkPassthroughAuth (route: RouteIR, listener: ListenerIR, backends: Map<string, BackendIR>, path: Path, report: (path: Path, message: string) => void): void {
  const validates = (p: PolicySetIR): boolean => p.jwt !== undefined || p.apiKey !== undefined
  route.backends.forEach((ref, i) => {
    if (backends.get(ref.backend)?.ai?.passthrough !== true) return
    if (validates(listener.policies) || validates(route.policies) || validates(ref.policies)) return
    report([...path, 'backends', i, 'policies', 'backendAuth', 'passthrough'], `needs a jwtAuth or apiKey policy on the route, the backend or gateway "${listener.gateway}": passthrough sends the token that policy validated`)
  })
}

/**
 * backendAuth.key: inline, or `{file: path}` read with the config's bounded reader (a
 * Kubernetes Secret mounted as a file, rotated by a reload). Surrounding whitespace (the
 * newline most files end with) is trimmed; what is left must be one header-safe token. Its
 * content is never echoed.
 */
function backendKey (key: string | { file: string }, at: Path, pc: PolicyContext): string | undefined {
  if (typeof key === 'string') return key
  const read = readFileField(key.file, [...at, 'file'], pc)
  if (read === undefined) return undefined
  const text = read.text.trim()
  if (!/^[\x21-\x7e]+$/.test(text)) {
    pc.report([...at, 'file'], `${read.full} does not hold one key (${text === '' ? 'it is empty' : 'printable ASCII without spaces or line breaks expected'})`)
    return undefined
  }
  return text
}

/**
 * backendAuth.gcp.credential: a service-account key, its JSON inline or in a file (read with
 * the config's bounded reader). Checked here so a broken key fails the load, not the first
 * request; its content is never echoed (it holds a private key).
 */
function gcpServiceAccountKey (credential: string | { file: string }, at: Path, pc: PolicyContext): GcpServiceAccountKeyIR | undefined {
  let text = credential as string
  let what = 'the inline credential'
  if (typeof credential !== 'string') {
    const read = readFileField(credential.file, [...at, 'file'], pc)
    if (read === undefined) return undefined
    text = read.text
    what = read.full
  }
  let key: unknown
  try {
    key = JSON.parse(text)
  } catch {
    pc.report(at, `${what} is not JSON (a service-account key file is)`)
    return undefined
  }
  const k = key as Record<string, unknown> | null
  if (k === null || typeof k !== 'object' || Array.isArray(k) || typeof k.client_email !== 'string' || typeof k.private_key !== 'string' || !k.private_key.includes('PRIVATE KEY')) {
    pc.report(at, `${what} is not a service-account key (client_email and private_key are required)`)
    return undefined
  }
  if (k.token_uri !== undefined && (typeof k.token_uri !== 'string' || !/^https?:\/\//.test(k.token_uri))) {
    pc.report(at, `${what}: token_uri must be an http(s) URL`)
    return undefined
  }
  return k as GcpServiceAccountKeyIR
}

function translateBackend (b: Pick<RouteBackendConfig, 'host' | 'endpoints' | 'mcp' | 'ai' | 'inferencePool'>, path: Path, fail: (p: Path, message: string) => void, auth?: AiBackendAuth, aiAuth?: AiAuthIR, aiAt: Path = [...path, 'ai'], policiesAt: Path = [...path, 'policies']): BackendIR | undefined {
  const kinds = (['host', 'endpoints', 'mcp', 'ai', 'inferencePool'] as const).filter(k => b[k] !== undefined)
  if (kinds.length !== 1) {
    fail(path, `needs exactly one backend kind: host, endpoints, mcp, ai or inferencePool${kinds.length > 1 ? ` (got ${kinds.join(', ')})` : ''}`)
    return undefined
  }
  if (b.endpoints !== undefined) return translateMultiEndpointBackend(b.endpoints, [...path, 'endpoints'], fail)
  if (b.ai !== undefined) return aiToIR().translateAiBackend(b.ai, aiAt, fail, parseHostTarget, auth, aiAuth, policiesAt)
  if (b.host === undefined) return undefined
  const parsed = parseHostTarget(b.host)
  if (typeof parsed === 'string') {
    fail([...path, 'host'], parsed)
    return undefined
  }
  const target = hostPort(parsed.host, parsed.port)
  return {
    key: `${parsed.protocol}://${target}`,
    kind: 'static',
    name: target,
    protocol: parsed.protocol,
    endpoints: [{ host: parsed.host, port: parsed.port }],
    target
  }
}

/** A static backend with several endpoints (`endpoints:`), all of one scheme. */
function translateMultiEndpointBackend (hosts: string[], path: Path, fail: (p: Path, message: string) => void): BackendIR | undefined {
  const parsed: Array<{ protocol: 'http' | 'https', host: string, port: number }> = []
  hosts.forEach((h, i) => {
    const p = parseHostTarget(h)
    if (typeof p === 'string') fail([...path, i], p)
    else parsed.push(p)
  })
  if (parsed.length !== hosts.length) return undefined
  const protocol = parsed[0]!.protocol
  if (parsed.some(p => p.protocol !== protocol)) {
    fail(path, 'all endpoints of a backend must use one scheme (http or https)')
    return undefined
  }
  const labels = parsed.map(p => hostPort(p.host, p.port))
  if (new Set(labels).size !== labels.length) {
    fail(path, 'endpoints must be distinct')
    return undefined
  }
  const target = labels.join(',')
  return {
    key: `${protocol}://${target}`,
    kind: 'static',
    name: target,
    protocol,
    endpoints: parsed.map(p => ({ host: p.host, port: p.port })),
    target
  }
}

/** `host:port`, `[v6]:port`, or `http(s)://host[:port][/]`. Returns an error message on failure. */
export function parseHostTarget (text: string): { protocol: 'http' | 'https', host: string, port: number } | string {
  let url: URL
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text)
  try {
    url = new URL(hasScheme ? text : `http://${text}`)
  } catch {
    return `invalid host "${text}": use host:port or http://host:port`
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `unsupported scheme "${url.protocol.slice(0, -1)}" in "${text}": use http or https`
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '') return `"${text}" must be only scheme, host and port (no path)`
  // URL drops a port equal to the scheme's default (":80"), so look at the text itself.
  if (!hasScheme && !/:\d+$/.test(text)) return `"${text}" needs a port: host:port`
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  const protocol = url.protocol === 'https:' ? 'https' : 'http'
  const port = url.port !== '' ? Number(url.port) : protocol === 'https' ? 443 : 80
  return { protocol, host, port }
}
