/**
 * What a target connection says when a target misbehaves or goes away, and which of its
 * errors are reported as the target's own fault.
 *
 * A target's faults stay with it: its callers get an error naming it (TARGET_UNAVAILABLE or
 * TARGET_TIMEOUT, built by the caller from these messages) and the operator a warning
 * (the session's onWarning hook, shown in logs and /debug) only for what the target did —
 * a stdio server's errors, an oversized message — not for a network that hiccupped, which
 * the restart handles.
 */

import type { McpTargetIR } from '../../ir/types.ts'
import { isPorticoError } from '../../util/errors.ts'
import { MESSAGE_TOO_LARGE } from '../protocol/message-limits.ts'
import { StdioProcessTransport } from './stdio.ts'
import type { UpstreamTransport } from './transport.ts'

/** "target X is unavailable", with the last failure when one is known. */
export function unavailableMessage (name: string, lastError: string | null): string {
  return `target "${name}" is unavailable${lastError !== null ? `: ${lastError}` : ''}`
}

/** Whether a transport error is worth a warning: a stdio server's errors are its own doing (HTTP ones are mostly the network's); an oversized message always is. */
export function isTargetFault (transport: UpstreamTransport, err: Error): boolean {
  return transport.kind === 'stdio' || isPorticoError(err, MESSAGE_TOO_LARGE)
}

/** The warning for a request whose answer was dropped, or null when the failure is not the target's doing. */
export function droppedAnswerWarning (method: string, err: Error): string | null {
  return isPorticoError(err, MESSAGE_TOO_LARGE) ? `answer to ${method} dropped: ${err.message}` : null
}

/**
 * Why a transport closed, for its pending callers and the state shown: a fault of the
 * target's (the transport closed itself: killed or disconnected, to be restarted), else a
 * stdio exit (with its code or signal) or an HTTP connection the target closed.
 */
export function closeReason (name: string, kind: McpTargetIR['kind'], transport: UpstreamTransport): string {
  const fault = transport.fault ?? null
  if (fault !== null) return `target "${name}" was ${kind === 'stdio' ? 'killed' : 'disconnected'}: ${fault}; it is restarted`
  const exit = transport instanceof StdioProcessTransport && transport.exitInfo !== null
    ? ` (exit code ${transport.exitInfo.code ?? 'none'}${transport.exitInfo.signal !== null ? `, signal ${transport.exitInfo.signal}` : ''})`
    : ''
  return `target "${name}" ${kind === 'stdio' ? 'exited' : 'closed the connection'}${exit}`
}
