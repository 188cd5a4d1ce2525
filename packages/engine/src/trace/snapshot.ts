/**
 * Snapshot state (`requestState`) as the seed's "Snapshot state" table describes: request,
 * source, backend, response, proxy and env. Built only for traced requests.
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { HeaderMap } from '../ir/header-map.ts'
import type { BackendIR } from '../ir/types.ts'
import { EFFECTIVE_POLICY_KEYS, type PolicySetIR } from '../ir/policy.ts'
import { formatSeconds } from '../util/duration.ts'
import { redactHeaderValues, redactSecrets, redactUrl } from '../ir/redact.ts'
import type { McpSnapshot, RequestState, ResponseState } from './events.ts'
import { plainAddress } from '../util/host-port.ts'
import { performance } from '../util/clock.ts'

/**
 * What a snapshot shows of a request's state (request/context.ts RequestContext has it all).
 * Declared here, by the side that reads it, so trace/ does not import the rooms above it.
 */
export interface SnapshotContext {
  readonly req: { readonly headers: IncomingHttpHeaders, readonly httpVersion: string }
  readonly rawTarget: string
  readonly sourceAddress: string
  readonly sourcePort: number
  readonly method: string
  readonly scheme: string
  readonly host: string
  readonly query: string
  /** The query sent upstream in place of the client's (an LLM provider's own), when set. */
  readonly upstreamQuery: string | null
  /** Wall-clock start (ms since epoch) and monotonic start (ms, performance.now()). */
  readonly startTime: number
  readonly startMono: number
  readonly path: string
  readonly headers: HeaderMap
  readonly backend: BackendIR | null
  readonly mcp: McpSnapshot | null
  readonly status: number
  readonly responseHeaders: HeaderMap
  readonly upstreamStart: number
  readonly upstreamHeadersAt: number
}


/**
 * Headers as a snapshot shows them, secrets redacted (ir/redact.ts): with `sentByClient`,
 * values the gateway set or changed on the way are treated as secrets too.
 */
export function flattenHeaders (headers: HeaderMap | Record<string, string | string[] | undefined>, sentByClient?: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of Object.keys(headers).sort()) {
    const value = headers[name]
    if (value === undefined) continue
    out[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return redactHeaderValues(out, sentByClient)
}

function requestPart (ctx: SnapshotContext, initial: boolean): RequestState['request'] {
  // The initial snapshot shows the target as received (not yet normalised, maybe absolute-form).
  const raw = ctx.rawTarget
  const q = raw.indexOf('?')
  const path = initial ? (q === -1 ? raw : raw.slice(0, q)) : ctx.path
  const query = ctx.upstreamQuery ?? ctx.query
  const pathAndQuery = initial ? raw : query === '' ? path : `${path}?${query}`
  return {
    method: ctx.method,
    uri: initial && raw.charCodeAt(0) !== 47 ? raw : `${ctx.scheme}://${ctx.host}${pathAndQuery}`,
    path,
    pathAndQuery,
    host: ctx.host,
    scheme: ctx.scheme,
    version: `HTTP/${ctx.req.httpVersion}`,
    headers: initial ? flattenHeaders(ctx.req.headers) : flattenHeaders(ctx.headers, ctx.req.headers),
    startTime: new Date(ctx.startTime).toISOString()
  }
}

function sourcePart (ctx: SnapshotContext): RequestState['source'] {
  const raw = ctx.sourceAddress
  const port = ctx.sourcePort
  return {
    address: plainAddress(raw),
    port,
    rawAddress: raw,
    rawPort: port
  }
}

export function requestSnapshot (ctx: SnapshotContext, env: Record<string, string>, options: { initial?: boolean, backend?: boolean }): RequestState {
  const request = requestPart(ctx, options.initial === true)
  // Credential query parameters (?access_token=...) never reach a trace watcher.
  request.uri = redactUrl(request.uri)
  request.pathAndQuery = redactUrl(request.pathAndQuery)
  // Built in the order a trace shows the keys (YAML snapshots and their diffs): env last.
  return {
    request,
    source: sourcePart(ctx),
    ...(options.backend === true && ctx.backend !== null ? { backend: { name: ctx.backend.name, type: ctx.backend.kind, protocol: ctx.backend.kind === 'mcp' ? 'mcp' : 'http' } } : {}),
    ...(ctx.mcp !== null ? { mcp: ctx.mcp } : {}),
    env
  }
}

export function responseSnapshot (ctx: SnapshotContext, env: Record<string, string>, withDurations: boolean): ResponseState {
  return {
    response: { code: ctx.status, headers: flattenHeaders(ctx.responseHeaders) },
    ...(ctx.mcp !== null ? { mcp: ctx.mcp } : {}),
    ...(withDurations
      ? {
          proxy: {
            requestProcessingDuration: formatSeconds(Math.max(0, ctx.upstreamStart - ctx.startMono)),
            upstreamDuration: formatSeconds(Math.max(0, ctx.upstreamHeadersAt - ctx.upstreamStart))
          }
        }
      : {}),
    env
  }
}

/** The 17 keys, each the phase's policy IR (secrets redacted) or null. */
export function effectivePolicy (set: { readonly ir: PolicySetIR }): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const ir = set.ir as Record<string, unknown>
  for (const key of EFFECTIVE_POLICY_KEYS) out[key] = ir[key] ?? null
  // MCP token validation is JWT validation: it shows under `jwt`.
  if (out.jwt === null && ir.mcpAuthentication !== undefined) out.jwt = ir.mcpAuthentication
  return redactSecrets(out)
}

/** Caps a body copy for `bodySnapshot`; base64 at the end. */
export class BodyTap {
  private readonly chunks: Buffer[] = []
  private size = 0
  truncated = false
  private readonly limit: number
  constructor (limit: number) {
    this.limit = limit
  }

  push (chunk: Buffer): void {
    if (this.size >= this.limit) {
      this.truncated = true
      return
    }
    const room = this.limit - this.size
    if (chunk.length > room) {
      this.chunks.push(Buffer.from(chunk.subarray(0, room)))
      this.size = this.limit
      this.truncated = true
    } else {
      this.chunks.push(Buffer.from(chunk))
      this.size += chunk.length
    }
  }

  get empty (): boolean {
    return this.size === 0 && !this.truncated
  }

  toBase64 (): string {
    return Buffer.concat(this.chunks).toString('base64')
  }
}
