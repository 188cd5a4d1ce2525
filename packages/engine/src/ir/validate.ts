/**
 * Semantic checks every IR gets, whatever produced it: the YAML front end, the controller's
 * translation, an xDS push. `Engine.apply` runs them before compiling, so a value the YAML
 * path refuses cannot reach the hot path by another door (an unparsable CORS origin used to
 * be an error from YAML and silently dropped when the controller sent it).
 *
 * Only what the engine cannot serve correctly is checked here -- grammar HTTP needs, patterns
 * the linear-time regex engine cannot run, numbers that cannot be durations. Limits that are
 * choices of one front end (the YAML schema's caps) stay in that front end. The YAML front
 * end keeps its own positioned errors (file:line:col); these carry IR paths instead.
 */

import { createSecureContext } from 'node:tls'
import type { ClientValidationIR, ListenerIR, ProxyIR, RouteIR, RouteMatchIR, TlsServerIR } from './types.ts'
import { MAX_LISTENER_FILTERS } from './types.ts'
import type { CorsIR, HeaderModifierIR, PolicySetIR } from './policy.ts'
import { checkOriginPattern, normalizeOrigin } from './origin.ts'
import { isHeaderName, isHeaderValue } from './http-grammar.ts'
import { linearRegexProblem } from '../util/linear-regex.ts'
import { MAX_TIMER_MS } from '../util/duration.ts'
import { secureContextOptions } from '../util/tls-names.ts'
import { fallbackTargetsProblem } from './picker-targets.ts'

export type IrPath = ReadonlyArray<string | number>

/** One problem, at a path into the ProxyIR (`binds[0].listeners[1].routes[2].policies.cors`). */
export interface IrDiagnostic {
  path: IrPath
  message: string
}

function checkClientValidation (v: ClientValidationIR | undefined, protocol: string, path: IrPath, report: (path: IrPath, message: string) => void): void {
  if (v === undefined) return
  if (protocol !== 'HTTPS' && protocol !== 'TLS') report(path, 'client certificate validation needs an HTTPS or TLS bind')
  if (v.mode !== 'AllowValidOnly' && v.mode !== 'AllowInsecureFallback') report([...path, 'mode'], `mode must be AllowValidOnly or AllowInsecureFallback, not ${String(v.mode)}`)
  // Without a CA every client certificate fails, so AllowValidOnly would refuse everyone.
  if (typeof v.caCerts !== 'string' || !v.caCerts.includes('-----BEGIN CERTIFICATE-----')) report([...path, 'caCerts'], 'caCerts must hold at least one PEM certificate')
}

/**
 * Whether an extProc in `policies` holds response bodies (every body mode does): it can never apply where the
 * answers are MCP (they may be SSE streams that never end), so the YAML front end
 * (config/traffic-to-ir.ts) and the check below refuse it there.
 */
export function extProcBuffersResponses (policies: PolicySetIR): boolean {
  const mode = policies.extProc?.processingMode.responseBodyMode
  return mode !== undefined && mode !== 'none'
}

/** Every semantic problem of `ir`; empty when it may be installed. */
export function validateIR (ir: ProxyIR): IrDiagnostic[] {
  const out: IrDiagnostic[] = []
  const report = (path: IrPath, message: string): void => { out.push({ path, message }) }
  const mcpBackends = new Set(ir.backends.filter(b => b.kind === 'mcp').map(b => b.key))
  ir.binds.forEach((bind, b) => {
    const bp = ['binds', b]
    checkMs(bind.requestHeadersTimeoutMs, [...bp, 'requestHeadersTimeoutMs'], report)
    if (!PROTOCOLS.has(bind.protocol)) report([...bp, 'protocol'], `protocol must be HTTP, HTTPS, TLS or TCP, not ${String(bind.protocol)}`)
    checkClientValidation(bind.tls?.clientValidation, bind.protocol, [...bp, 'tls', 'clientValidation'], report)
    checkTlsOptions(bind.tls, [...bp, 'tls'], report)
    bind.listeners.forEach((listener, l) => {
      const lp = [...bp, 'listeners', l]
      if (listener.tls?.clientValidation !== undefined && bind.protocol !== 'TLS') {
        // An HTTPS handshake asks for a client certificate per bind, not per SNI name (a TLS
        // bind picks the listener from the client hello first, so there it is per listener).
        report([...lp, 'tls', 'clientValidation'], 'client certificate validation is set per bind (port), not per listener')
      }
      if (bind.protocol === 'TLS') checkClientValidation(listener.tls?.clientValidation, 'TLS', [...lp, 'tls', 'clientValidation'], report)
      checkTlsOptions(listener.tls, [...lp, 'tls'], report)
      checkStreamListener(listener, bind.protocol, bind.tls, lp, report)
      checkPolicies(listener.policies, [...lp, 'policies'], report)
      if (listener.filters !== undefined && listener.filters.requests.length > MAX_LISTENER_FILTERS) report([...lp, 'filters', 'requests'], `at most ${MAX_LISTENER_FILTERS} listener filters (Gateway API ListenerFilters.requests)`)
      checkMs(listener.frontend?.requestBodyIdleTimeoutMs, [...lp, 'frontend', 'requestBodyIdleTimeoutMs'], report)
      checkMs(listener.frontend?.backendRequestTimeoutMs, [...lp, 'frontend', 'backendRequestTimeoutMs'], report)
      checkMs(listener.frontend?.streamIdleTimeoutMs, [...lp, 'frontend', 'streamIdleTimeoutMs'], report)
      checkRate(listener.frontend?.requestBodyMinRate, [...lp, 'frontend', 'requestBodyMinRate'], report)
      listener.routes.forEach((route, r) => checkRoute(route, [...lp, 'routes', r], report))
      listener.streamRoutes?.forEach((route, r) => checkHostnameOrigins(route, [...lp, 'streamRoutes', r], report))
      checkExtProcOnMcp(listener, mcpBackends, lp, report)
    })
  })
  ir.backends.forEach((backend, i) => {
    const bp = ['backends', i]
    checkMs(backend.health?.ejectionMs, [...bp, 'health', 'ejectionMs'], report)
    backend.tls?.subjectAltNames?.forEach((san, j) => {
      const sp = [...bp, 'tls', 'subjectAltNames', j]
      if (san.type !== 'Hostname' && san.type !== 'URI') report([...sp, 'type'], `type must be Hostname or URI, not ${String(san.type)}`)
      else if (typeof san.value !== 'string' || san.value === '') report([...sp, 'value'], 'value must be a non-empty string')
      else if (san.type === 'URI' && !/^[a-z][a-z0-9+.-]*:/i.test(san.value)) report([...sp, 'value'], `${san.value} is not a URI`)
    })
    backend.mcp?.targets.forEach((t, j) => checkMs(t.requestTimeoutMs, [...bp, 'mcp', 'targets', j, 'requestTimeoutMs'], report, 1))
    checkMs(backend.mcp?.sessionIdleTimeoutMs, [...bp, 'mcp', 'sessionIdleTimeoutMs'], report, 1)
    checkMs(backend.mcp?.stdioSessionIdleTimeoutMs, [...bp, 'mcp', 'stdioSessionIdleTimeoutMs'], report, 1)
    checkMs(backend.inferencePool?.picker.timeoutMs, [...bp, 'inferencePool', 'picker', 'timeoutMs'], report, 1)
    if (backend.inferencePool !== undefined) {
      const problem = fallbackTargetsProblem(backend.inferencePool.picker)
      if (problem !== null) report([...bp, 'inferencePool', 'picker', 'fallbackTargets'], problem)
    }
    backend.mcp?.targets.forEach((t, j) => {
      if (t.kind === 'stdio' && t.maxProcesses !== undefined && (!Number.isInteger(t.maxProcesses) || t.maxProcesses < 1)) report([...bp, 'mcp', 'targets', j, 'maxProcesses'], 'must be a positive integer')
    })
    const max = backend.mcp?.maxSessions
    if (max !== undefined && (!Number.isInteger(max) || max < 1)) report([...bp, 'mcp', 'maxSessions'], 'must be a positive integer')
    backend.endpoints.forEach((e, j) => {
      // An HBONE peer is verified by exactly this ID: a malformed one could never match.
      if (e.mesh === undefined) return
      const mp = [...bp, 'endpoints', j, 'mesh']
      if (typeof e.mesh.identity !== 'string' || !/^spiffe:\/\/[a-z0-9._-]+\/[!-~]+$/.test(e.mesh.identity)) report([...mp, 'identity'], `${String(e.mesh.identity)} is not a SPIFFE ID (spiffe://<trust domain>/<path>)`)
      if (!Number.isInteger(e.mesh.hbonePort) || e.mesh.hbonePort < 1 || e.mesh.hbonePort > 65535) report([...mp, 'hbonePort'], 'must be a port (1-65535)')
    })
  })
  return out
}

/** extProc's response body mode where the answers are MCP: on the listener, a route, a backend reference. */
function checkExtProcOnMcp (listener: ListenerIR, mcpBackends: ReadonlySet<string>, lp: IrPath, report: (path: IrPath, message: string) => void): void {
  const why = (p: PolicySetIR): string => `extProc responseBodyMode ${p.extProc?.processingMode.responseBodyMode ?? ''} cannot apply to MCP answers (they may be SSE streams that are never whole)`
  let listenerHasMcp = false
  listener.routes.forEach((route, r) => {
    const rp = [...lp, 'routes', r]
    const mcp = route.backends.some(ref => mcpBackends.has(ref.backend))
    listenerHasMcp ||= mcp
    if (mcp && extProcBuffersResponses(route.policies)) report([...rp, 'policies', 'extProc'], why(route.policies))
    route.backends.forEach((ref, i) => {
      if (mcpBackends.has(ref.backend) && extProcBuffersResponses(ref.policies)) report([...rp, 'backends', i, 'policies', 'extProc'], why(ref.policies))
    })
  })
  if (listenerHasMcp && extProcBuffersResponses(listener.policies)) report([...lp, 'policies', 'extProc'], why(listener.policies))
}

const PROTOCOLS = new Set(['HTTP', 'HTTPS', 'TLS', 'TCP', 'UDP'])

/** TLS versions and suites OpenSSL accepts (a bad suite name would fail every handshake). */
function checkTlsOptions (tls: TlsServerIR | undefined, path: IrPath, report: Report): void {
  if (tls === undefined || (tls.minVersion === undefined && tls.maxVersion === undefined && tls.ciphers === undefined)) return
  for (const field of ['minVersion', 'maxVersion'] as const) {
    const v = tls[field]
    if (v !== undefined && v !== 'TLSv1.2' && v !== 'TLSv1.3') report([...path, field], `must be TLSv1.2 or TLSv1.3, not ${String(v)}`)
  }
  try {
    createSecureContext(secureContextOptions(tls))
  } catch (err) {
    report(path, `OpenSSL refuses these TLS settings: ${(err as Error).message}`)
  }
}

/** HTTP listeners have routes, TCP and TLS ones stream routes; TLS ones a mode (and a certificate to terminate with). */
function checkStreamListener (listener: ListenerIR, protocol: string, bindTls: TlsServerIR | undefined, lp: IrPath, report: Report): void {
  const stream = protocol === 'TCP' || protocol === 'TLS' || protocol === 'UDP'
  if (stream && listener.routes.length > 0) report([...lp, 'routes'], `a ${protocol} listener forwards ${protocol === 'UDP' ? 'datagrams' : 'connections'}: HTTP routes cannot attach to it`)
  if (!stream && (listener.streamRoutes?.length ?? 0) > 0) report([...lp, 'streamRoutes'], `an ${protocol} listener serves HTTP routes: stream routes attach to TCP, TLS and UDP listeners`)
  for (const r of listener.streamRoutes ?? []) {
    if ((r.kind === 'udp') !== (protocol === 'UDP')) report([...lp, 'streamRoutes'], `route ${r.key} (${r.kind}) cannot attach to a ${protocol} listener`)
  }
  if (listener.udp !== undefined) {
    if (protocol !== 'UDP') report([...lp, 'udp'], 'udp settings are only for UDP listeners')
    checkMs(listener.udp.idleTimeoutMs, [...lp, 'udp', 'idleTimeoutMs'], report, 1)
    const max = listener.udp.maxFlows
    if (max !== undefined && !(Number.isInteger(max) && max >= 1 && max <= 1_000_000)) report([...lp, 'udp', 'maxFlows'], `${max} is not a flow limit (a whole number from 1 to 1,000,000)`)
  }
  if (protocol === 'TLS') {
    if (listener.tlsMode !== 'Terminate' && listener.tlsMode !== 'Passthrough') report([...lp, 'tlsMode'], `a TLS listener needs tlsMode Terminate or Passthrough, not ${String(listener.tlsMode)}`)
    else if (listener.tlsMode === 'Terminate' && listener.tls === undefined && bindTls === undefined) report([...lp, 'tls'], 'tlsMode Terminate needs a certificate (the listener\'s or the bind\'s)')
  } else if (listener.tlsMode !== undefined) report([...lp, 'tlsMode'], 'tlsMode is only for TLS listeners')
}

/** `binds[0].listeners[1].policies.cors.allowOrigins[0]`. */
export function formatIrPath (path: IrPath): string {
  let s = ''
  for (const part of path) s += typeof part === 'number' ? `[${part}]` : s === '' ? part : `.${part}`
  return s
}

/** `path: message`. */
export function formatIrDiagnostic (d: IrDiagnostic): string {
  return `${formatIrPath(d.path)}: ${d.message}`
}

type Report = (path: IrPath, message: string) => void

/** A timer in ms: a number from `min` to what Node can time (a longer timer fires at once). */
function checkRate (rate: number | undefined, path: IrPath, report: Report): void {
  if (rate !== undefined && !(Number.isInteger(rate) && rate >= 0)) report(path, `${rate} is not a rate (whole bytes per second, 0 or more)`)
}

function checkMs (ms: number | undefined, path: IrPath, report: Report, min = 0): void {
  if (ms !== undefined && !(Number.isFinite(ms) && ms >= min && ms <= MAX_TIMER_MS)) report(path, `${ms} is not a usable duration (milliseconds from ${min} to ${MAX_TIMER_MS}, about 596h)`)
}

/**
 * The problems of one route, at paths relative to it: what the controller checks per
 * HTTPRoute rule, so one bad route is refused on its own instead of making every proxy
 * refuse the whole config.
 */
export function validateRoute (route: RouteIR): IrDiagnostic[] {
  const out: IrDiagnostic[] = []
  checkRoute(route, [], (path, message) => { out.push({ path, message }) })
  return out
}

/** hostnameOrigins, when present: one hostname string per served hostname (what precedence reads). */
function checkHostnameOrigins (route: { hostnames: string[], hostnameOrigins?: string[] }, rp: IrPath, report: Report): void {
  const origins: unknown = route.hostnameOrigins
  if (origins === undefined) return
  if (!Array.isArray(origins) || origins.length !== route.hostnames.length || !origins.every(o => typeof o === 'string' && o !== '')) {
    report([...rp, 'hostnameOrigins'], `must list one hostname per entry of hostnames (${route.hostnames.length})`)
  }
}

function checkRoute (route: RouteIR, rp: IrPath, report: Report): void {
  checkHostnameOrigins(route, rp, report)
  route.matches.forEach((m, i) => checkMatch(m, [...rp, 'matches', i], report))
  checkPolicies(route.policies, [...rp, 'policies'], report)
  route.backends.forEach((ref, i) => checkPolicies(ref.policies, [...rp, 'backends', i, 'policies'], report))
  checkMs(route.timeouts?.requestMs, [...rp, 'timeouts', 'requestMs'], report)
  checkMs(route.timeouts?.backendRequestMs, [...rp, 'timeouts', 'backendRequestMs'], report)
  checkMs(route.timeouts?.requestBodyIdleMs, [...rp, 'timeouts', 'requestBodyIdleMs'], report)
  checkMs(route.timeouts?.streamIdleMs, [...rp, 'timeouts', 'streamIdleMs'], report)
  checkRate(route.timeouts?.requestBodyMinRate, [...rp, 'timeouts', 'requestBodyMinRate'], report)
  if (route.retry !== undefined) {
    if (!Number.isInteger(route.retry.attempts) || route.retry.attempts < 0) report([...rp, 'retry', 'attempts'], `${route.retry.attempts} is not a number of retries (an integer \u2265 0)`)
    checkMs(route.retry.backoffMs, [...rp, 'retry', 'backoffMs'], report)
  }
}

/** Regex matches must compile on the linear-time engine the route table runs them on. */
function checkMatch (m: RouteMatchIR, path: IrPath, report: Report): void {
  const regex = (pattern: string, at: IrPath): void => {
    const problem = linearRegexProblem(pattern)
    if (problem !== null) report(at, problem)
  }
  if (m.path.kind === 'regex') regex(m.path.value, [...path, 'path', 'value'])
  m.headers.forEach((h, i) => { if (h.kind === 'regex') regex(h.value, [...path, 'headers', i, 'value']) })
  m.query.forEach((q, i) => { if (q.kind === 'regex') regex(q.value, [...path, 'query', i, 'value']) })
}

function checkPolicies (set: PolicySetIR, path: IrPath, report: Report): void {
  if (set.requestHeaderModifier !== undefined) checkHeaderModifier(set.requestHeaderModifier, [...path, 'requestHeaderModifier'], report)
  if (set.responseHeaderModifier !== undefined) checkHeaderModifier(set.responseHeaderModifier, [...path, 'responseHeaderModifier'], report)
  if (set.directResponse?.headers !== undefined) checkHeaderValues(set.directResponse.headers, [...path, 'directResponse', 'headers'], report)
  if (set.cors !== undefined) checkCors(set.cors, [...path, 'cors'], report)
  set.csrf?.additionalOrigins.forEach((o, i) => {
    if (normalizeOrigin(o) === null) report([...path, 'csrf', 'additionalOrigins', i], `"${o}" is not an origin (scheme://host[:port])`)
  })
}

function checkHeaderModifier (mod: HeaderModifierIR, path: IrPath, report: Report): void {
  if (mod.set !== undefined) checkHeaderValues(mod.set, [...path, 'set'], report)
  if (mod.add !== undefined) checkHeaderValues(mod.add, [...path, 'add'], report)
  mod.remove?.forEach((name, i) => checkHeaderName(name, [...path, 'remove', i], report))
}

function checkHeaderValues (headers: Record<string, string>, path: IrPath, report: Report): void {
  for (const [name, value] of Object.entries(headers)) {
    checkHeaderName(name, [...path, name], report)
    if (!isHeaderValue(value)) report([...path, name], `${JSON.stringify(value)} is not an HTTP header value (no CR, LF or other control characters, no leading or trailing whitespace)`)
  }
}

function checkHeaderName (name: string, path: IrPath, report: Report): void {
  if (!isHeaderName(name)) report(path, `${JSON.stringify(name)} is not an HTTP header name (an RFC 9110 token)`)
}

function checkCors (cors: CorsIR, path: IrPath, report: Report): void {
  cors.allowOrigins.forEach((o, i) => {
    const problem = checkOriginPattern(o)
    if (problem !== null) report([...path, 'allowOrigins', i], problem)
  })
  cors.allowMethods.forEach((m, i) => { if (!isHeaderName(m)) report([...path, 'allowMethods', i], `${JSON.stringify(m)} is not a method (an RFC 9110 token) or *`) })
  cors.allowHeaders.forEach((h, i) => checkHeaderName(h, [...path, 'allowHeaders', i], report))
  cors.exposeHeaders.forEach((h, i) => checkHeaderName(h, [...path, 'exposeHeaders', i], report))
  if (cors.maxAge !== undefined && !(Number.isInteger(cors.maxAge) && cors.maxAge >= 0)) report([...path, 'maxAge'], `${cors.maxAge} is not a number of seconds (an integer \u2265 0)`)
}
