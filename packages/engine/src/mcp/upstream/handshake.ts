/**
 * Reaching a target and shaking hands with it: the transport of its kind, the initialize
 * exchange with the client's own parameters, and the fallback to 2026-07-28 for a
 * streamable target that refuses initialize.
 *
 * The target is initialized with the parameters of the gateway session's client (its
 * protocol version, capabilities and info), not the gateway's own: the target then offers
 * what this client can use (sampling only to a client that can sample, say), and a session
 * resumed on another replica, or a target restarted after a crash, is initialized alike.
 */

import type { McpTargetIR } from '../../ir/types.ts'
import { PorticoError } from '../../util/errors.ts'
import type { JsonRpcResponse } from '../protocol/jsonrpc.ts'
import { SseClientTransport } from './sse.ts'
import { ModernClientTransport, speaksModern } from './stateless.ts'
import { StdioProcessTransport } from './stdio.ts'
import { stdioLaunchOptions, type StdioSpares } from './stdio-spares.ts'
import { StreamableHttpClientTransport } from './streamable.ts'
import type { UpstreamTransport } from './transport.ts'

export interface ClientInit {
  protocolVersion: string
  capabilities: Record<string, unknown>
  clientInfo: Record<string, unknown>
}

export interface TargetInitResult {
  protocolVersion: string
  capabilities: Record<string, unknown>
  serverInfo: Record<string, unknown>
  instructions?: string
}

/** Longest a probe for 2026-07-28 (server/discover) may take: it delays a target's start. */
const DISCOVER_PROBE_MS = 5_000

export interface OpenOptions {
  /** Where a stdio target takes a server process started ahead of time, if one is ready. */
  spares?: StdioSpares
  onStderr(line: string): void
  /** A streamable HTTP target's upstream session to carry on (a session id minted elsewhere). */
  resumeSession?: string
}

/** The transport of a target's kind: one UpstreamTransport (transport.ts) each; not started. */
export function openTransport (spec: McpTargetIR, options: OpenOptions): UpstreamTransport {
  if (spec.kind === 'stdio') {
    // A warm spare saves the server's start (hundreds of ms for a Node server) on a new session.
    const spare = options.spares?.take(spec)
    if (spare !== undefined) {
      spare.onstderr = options.onStderr
      return spare
    }
    return new StdioProcessTransport({ ...stdioLaunchOptions(spec), onStderr: options.onStderr })
  }
  if (spec.kind === 'sse') return new SseClientTransport(new URL(spec.url), { maxMessageBytes: spec.maxMessageBytes, requestTimeoutMs: spec.requestTimeoutMs })
  const http: ConstructorParameters<typeof StreamableHttpClientTransport>[1] = { maxMessageBytes: spec.maxMessageBytes, requestTimeoutMs: spec.requestTimeoutMs }
  if (options.resumeSession !== undefined) http.sessionId = options.resumeSession
  return new StreamableHttpClientTransport(new URL(spec.url), http)
}

/** How the handshake sends a request: the connection's own call, over `via` (the transport being started, not yet the connection's). */
export type HandshakeCall = (message: { method: string, params?: Record<string, unknown> }, timeoutMs: number, via: UpstreamTransport) => Promise<JsonRpcResponse>

/**
 * initialize with the client's parameters, then notifications/initialized. `accept` gets
 * the result (and a streamable target's upstream session id) before the notification goes:
 * the target may send its own requests as soon as it has it.
 */
export async function initialize (transport: UpstreamTransport, init: ClientInit, call: HandshakeCall, timeoutMs: number, accept: (result: TargetInitResult, upstreamSession: string | null | undefined) => void): Promise<void> {
  const response = await call({ method: 'initialize', params: { protocolVersion: init.protocolVersion, capabilities: init.capabilities, clientInfo: init.clientInfo } }, timeoutMs, transport)
  if ('error' in response) throw new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', `initialize failed: ${response.error.message}`)
  const result = response.result as unknown as TargetInitResult
  let upstreamSession: string | null | undefined
  if (transport instanceof StreamableHttpClientTransport) {
    // Every later request carries the negotiated version (MCP-Protocol-Version) and the session.
    transport.setProtocolVersion(result.protocolVersion)
    upstreamSession = transport.sessionId ?? null
  }
  accept(result, upstreamSession)
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
}

/**
 * A streamable HTTP target that refused initialize may speak only 2026-07-28: asked with
 * server/discover, and if so served through ModernClientTransport from then on (the
 * session's clients keep their initialize-era revision). Null when it is not one. The
 * transport returned is not started.
 */
export async function modernFallback (refused: UpstreamTransport, spec: McpTargetIR, init: ClientInit): Promise<ModernClientTransport | null> {
  if (refused.kind !== 'streamable' || spec.kind !== 'mcp') return null
  const url = new URL(spec.url)
  if (!await speaksModern(url, Math.min(spec.requestTimeoutMs, DISCOVER_PROBE_MS), spec.maxMessageBytes)) return null
  return new ModernClientTransport(url, { client: { capabilities: init.capabilities, clientInfo: init.clientInfo }, maxMessageBytes: spec.maxMessageBytes, requestTimeoutMs: spec.requestTimeoutMs })
}
