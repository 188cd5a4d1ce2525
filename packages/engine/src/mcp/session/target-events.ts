/**
 * What the targets of the gateway's sessions report — stdio processes started and exited,
 * stderr lines, restarts, protocol warnings — logged with their backend and target, and the
 * stdio processes of sessions kept for the admin's list (`McpGateway.children`).
 */

import type { SessionHooks } from './session.ts'
import type { StdioProcessTransport } from '../upstream/stdio.ts'

export interface McpLogger {
  debug(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
}

export interface McpChildProcess {
  pid: number
  backend: string
  target: string
  startedAt: string
}

export class TargetEvents {
  /**
   * Stdio servers of sessions, by transport rather than pid: the exit of one process must not
   * remove another that was given its pid since, and an exited one is never listed.
   */
  private readonly processes = new Map<StdioProcessTransport, McpChildProcess>()
  private readonly logger: McpLogger | undefined
  /** A session's process exited (the gateway's stdio spare may come back below the cap). */
  private readonly onExit: () => void

  constructor (options: { logger?: McpLogger, onExit: () => void }) {
    this.logger = options.logger
    this.onExit = options.onExit
  }

  /** The hooks of a session of `backend`. */
  hooks (backend: string): SessionHooks {
    return {
      onProcess: (target, process, running) => {
        // An exited process's transport no longer knows its pid: the one recorded at start is logged.
        const pid = running ? process.pid : this.processes.get(process)?.pid
        if (running && pid !== undefined) this.processes.set(process, { pid, backend, target, startedAt: new Date().toISOString() })
        else {
          this.processes.delete(process)
          this.onExit()
        }
        this.logger?.debug({ backend, target, pid }, running ? 'mcp stdio server started' : 'mcp stdio server exited')
      },
      onStderr: (target, line) => this.logger?.debug({ backend, target, line }, 'mcp stdio server stderr'),
      onTargetState: (target, state, detail) => {
        if (state === 'restarting') this.logger?.warn({ backend, target, detail }, 'mcp target down; restarting')
      },
      onWarning: (target, detail) => this.logger?.warn({ backend, target, detail }, 'mcp target broke the protocol')
    }
  }

  /** The stdio servers of sessions still running: an exited one's transport no longer has a pid. */
  running (): McpChildProcess[] {
    return [...this.processes].flatMap(([process, info]) => process.pid === info.pid ? [info] : [])
  }
}
