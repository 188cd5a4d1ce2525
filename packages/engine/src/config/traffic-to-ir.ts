/**
 * Config → IR for remoteRateLimit, extProc, retry, requestMirror, backendTLS and health.
 * CEL descriptor values are compiled here so a bad expression is a config error naming it;
 * TLS files are read here (the IR carries PEM text, as for listeners).
 */

import { createHash } from 'node:crypto'
import type { Static } from '@sinclair/typebox'
import type { BackendHealthSchema, BackendHttpSchema, BackendTlsSchema, ExtProcSchema, RemoteRateLimitSchema, RequestMirrorSchema, RetrySchema } from './traffic-schema.ts'
import type { BackendIR } from '../ir/types.ts'
import type { BackendHealthIR, BackendTlsIR, ExtProcIR, RemoteRateLimitIR, RequestMirrorIR, RetryIR } from '../ir/traffic.ts'
import type { PolicySetIR } from '../ir/policy.ts'
import { extProcBuffersResponses } from '../ir/validate.ts'
import { checkTimerMs, parseDuration } from '../util/duration.ts'
import { compileCel, CEL_VARIABLES } from '../cel/expression.ts'
import { parseHostTarget } from './to-ir.ts'
import { hostPort } from '../util/host-port.ts'
import { readPemField } from './referenced-file.ts'

type Path = Array<string | number>
type Report = (path: Path, message: string) => void

export type RemoteRateLimitConfig = Static<typeof RemoteRateLimitSchema>
export type ExtProcConfig = Static<typeof ExtProcSchema>
export type RetryConfig = Static<typeof RetrySchema>
export type RequestMirrorConfig = Static<typeof RequestMirrorSchema>
export type BackendTlsConfig = Static<typeof BackendTlsSchema>
export type BackendHealthConfig = Static<typeof BackendHealthSchema>
export type BackendHttpConfig = Static<typeof BackendHttpSchema>

export const DEFAULT_REMOTE_RATE_LIMIT_TIMEOUT_MS = 1000
export const DEFAULT_EXT_PROC_TIMEOUT_MS = 1000
export const DEFAULT_EXT_PROC_MAX_BODY_BYTES = 1024 * 1024
export const DEFAULT_RETRY_ATTEMPTS = 1
export const DEFAULT_RETRY_CODES: readonly number[] = [500, 502, 503, 504]
export const DEFAULT_RETRY_BACKOFF_MS = 25
export const DEFAULT_HEALTH_FAILURES = 5
export const DEFAULT_HEALTH_EJECTION_MS = 30_000

/** `host:port` / `http(s)://host:port` → `http(s)://host:port`, or undefined after reporting. */
function serviceUrl (text: string, path: Path, report: Report): string | undefined {
  const target = parseHostTarget(text)
  if (typeof target === 'string') {
    report(path, target)
    return undefined
  }
  return `${target.protocol}://${hostPort(target.host, target.port)}`
}

function positiveDuration (text: string | undefined, fallback: number, path: Path, report: Report): number {
  if (text === undefined) return fallback
  const ms = parseDuration(text)
  if (ms <= 0) report(path, 'must be more than 0')
  else checkTimerMs(ms, path, report)
  return ms
}

export function remoteRateLimitToIR (c: RemoteRateLimitConfig, path: Path, report: Report): RemoteRateLimitIR | undefined {
  const host = serviceUrl(c.host, [...path, 'host'], report)
  c.descriptors.forEach((d, i) => {
    if (d.limitOverride === undefined) return
    try {
      compileCel(d.limitOverride, d.type === 'tokens' ? [...CEL_VARIABLES, 'llm'] : CEL_VARIABLES)
    } catch (err) {
      report([...path, 'descriptors', i, 'limitOverride'], (err as Error).message)
    }
  })
  c.descriptors.forEach((d, i) => d.entries.forEach((e, j) => {
    try {
      // A token descriptor may name the model (`llm`): it is built once the ai backend has read the request.
      compileCel(e.value, d.type === 'tokens' ? [...CEL_VARIABLES, 'llm'] : CEL_VARIABLES)
    } catch (err) {
      const message = (err as Error).message
      report([...path, 'descriptors', i, 'entries', j, 'value'], d.type !== 'tokens' && /unknown variable "llm"/.test(message) ? `${message}; llm is known to descriptors of type tokens only (a requests descriptor is sent before the body is read)` : message)
    }
  }))
  if (host === undefined) return undefined
  return {
    host,
    domain: c.domain,
    descriptors: c.descriptors.map(d => ({ entries: d.entries.map(e => ({ key: e.key, value: e.value })), type: d.type ?? 'requests', ...(d.limitOverride !== undefined ? { limitOverride: d.limitOverride } : {}) })),
    failureMode: c.failureMode ?? 'failClosed',
    timeoutMs: positiveDuration(c.timeout, DEFAULT_REMOTE_RATE_LIMIT_TIMEOUT_MS, [...path, 'timeout'], report)
  }
}

export function extProcToIR (c: ExtProcConfig, path: Path, report: Report): ExtProcIR | undefined {
  const host = serviceUrl(c.host, [...path, 'host'], report)
  if (host === undefined) return undefined
  const m = c.processingMode ?? {}
  if (m.request?.body !== undefined && m.requestBodyMode !== undefined) report([...path, 'processingMode', 'request', 'body'], 'set one of request.body and requestBodyMode')
  if (m.response?.body !== undefined && m.responseBodyMode !== undefined) report([...path, 'processingMode', 'response', 'body'], 'set one of response.body and responseBodyMode')
  return {
    host,
    failureMode: c.failureMode ?? 'failClosed',
    messageTimeoutMs: positiveDuration(c.timeout, DEFAULT_EXT_PROC_TIMEOUT_MS, [...path, 'timeout'], report),
    processingMode: {
      requestHeaderMode: m.requestHeaderMode ?? 'send',
      responseHeaderMode: m.responseHeaderMode ?? 'send',
      requestBodyMode: bodyMode(m.request?.body) ?? m.requestBodyMode ?? 'none',
      responseBodyMode: bodyMode(m.response?.body) ?? m.responseBodyMode ?? 'none',
      ...(m.allowModeOverride === true ? { allowModeOverride: true } : {})
    },
    maxBodyBytes: c.maxBodyBytes ?? DEFAULT_EXT_PROC_MAX_BODY_BYTES
  }
}

/** Envoy Gateway's spelling of a body mode (EnvoyExtensionPolicy extProc processingMode.request.body) as Portico's. */
function bodyMode (eg: 'Buffered' | 'Streamed' | 'FullDuplexStreamed' | undefined): ExtProcIR['processingMode']['requestBodyMode'] | undefined {
  switch (eg) {
    case 'Buffered': return 'buffered'
    case 'Streamed': return 'streamed'
    case 'FullDuplexStreamed': return 'fullDuplexStreamed'
    default: return undefined
  }
}

/**
 * extProc's response body mode holds the whole answer for the processor. An MCP backend's
 * answers may be SSE streams that stay open (a POST that streams progress, the session's
 * GET stream) and are never whole, so on a route or backend that answers with MCP it can
 * never apply: refused here rather than skipped at run time. `mcp`: what makes the answers
 * MCP (null: nothing). The response headers are processed on MCP answers as on any other.
 */
export function checkExtProcOnMcp (policies: PolicySetIR, mcp: string | null, path: Path, report: Report): void {
  if (mcp === null || !extProcBuffersResponses(policies)) return
  report([...path, 'extProc', 'processingMode', 'responseBodyMode'], `${policies.extProc?.processingMode.responseBodyMode ?? ''} cannot apply: ${mcp}, whose answers may be SSE streams that are never whole (use none; the response headers are still sent to the processor)`)
}

export function retryToIR (c: RetryConfig, path: Path, report: Report): RetryIR {
  const backoffMs = c.backoff === undefined ? DEFAULT_RETRY_BACKOFF_MS : parseDuration(c.backoff)
  if (backoffMs > 60_000) report([...path, 'backoff'], 'must be at most 1m')
  return {
    attempts: c.attempts ?? DEFAULT_RETRY_ATTEMPTS,
    codes: [...new Set(c.codes ?? DEFAULT_RETRY_CODES)].sort((a, b) => a - b),
    backoffMs
  }
}

/**
 * The route's mirrors; each mirror backend is made (like a `host:` backend) and handed to
 * `addBackend`, which puts it in the IR's backend list.
 */
export function mirrorsToIR (c: RequestMirrorConfig, path: Path, makeBackend: (host: string, path: Path) => BackendIR | undefined): RequestMirrorIR[] {
  const list = Array.isArray(c) ? c : [c]
  const out: RequestMirrorIR[] = []
  list.forEach((m, i) => {
    const p = Array.isArray(c) ? [...path, i] : path
    const backend = makeBackend(m.backend.host, [...p, 'backend'])
    if (backend !== undefined) out.push({ backend: backend.key, percentage: m.percentage ?? 100 })
  })
  return out
}

/**
 * Applies `backendTLS`, `health` and `http` to a static backend: TLS files are read and the
 * protocol becomes https; `http.version: HTTP2` makes it h2c (http) or h2 by ALPN (https). A
 * backend with any gets a key of its own (`<key>#<hash>`), so routes that call one host with
 * different settings get separate pools and stats.
 */
export function backendSettingsToIR (
  backend: BackendIR,
  c: { backendTLS?: BackendTlsConfig, health?: BackendHealthConfig, http?: BackendHttpConfig },
  path: Path,
  options: { baseDir: string, readFile: (path: string) => string },
  report: Report
): BackendIR {
  if (c.backendTLS === undefined && c.health === undefined && c.http?.version !== 'HTTP2') return backend
  const out: BackendIR = { ...backend }
  if (c.backendTLS !== undefined) {
    const t = c.backendTLS
    const tp = [...path, 'backendTLS']
    const tls: BackendTlsIR = {}
    const read = (file: string, field: string): string | undefined => readPemField(file, [...tp, field], { ...options, report })
    if (t.root !== undefined) {
      const ca = read(t.root, 'root')
      if (ca !== undefined) tls.ca = ca
    }
    if ((t.cert === undefined) !== (t.key === undefined)) report(tp, 'a client certificate needs both cert and key')
    else if (t.cert !== undefined) {
      const cert = read(t.cert, 'cert')
      const key = read(t.key!, 'key')
      if (cert !== undefined) tls.cert = cert
      if (key !== undefined) tls.key = key
    }
    if (t.hostname !== undefined) tls.serverName = t.hostname
    if (t.insecure === true) tls.insecure = true
    if (t.insecure === true && t.root !== undefined) report([...tp, 'insecure'], 'insecure skips verification: root is then unused')
    out.tls = tls
    out.protocol = 'https'
  }
  if (c.health !== undefined) {
    const health: BackendHealthIR = {
      consecutiveFailures: c.health.consecutiveFailures ?? DEFAULT_HEALTH_FAILURES,
      ejectionMs: positiveDuration(c.health.ejectionDuration, DEFAULT_HEALTH_EJECTION_MS, [...path, 'health', 'ejectionDuration'], report)
    }
    out.health = health
  }
  if (c.http?.version === 'HTTP2') {
    if (out.protocol === 'https') out.h2 = true
    else out.h2c = true
  }
  const hash = createHash('sha256').update(JSON.stringify({ tls: out.tls ?? null, health: out.health ?? null, h2: out.h2 === true || out.h2c === true })).digest('hex').slice(0, 8)
  const [, rest] = backend.key.split('://', 2)
  out.key = `${out.protocol}://${rest ?? backend.key}#${hash}`
  return out
}
