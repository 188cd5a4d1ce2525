/**
 * An MCP stdio client transport that launches the server in its own process group, so
 * closing it ends the server and everything the server started (`npx` wrappers, shell
 * shims, helpers) — no orphans after a session ends, a reload or shutdown.
 *
 * Framing is newline-delimited JSON, read in linear time with a cap on a line
 * (`maxLineBytes`, the target's maxMessageSize). A server that passes the cap is killed at
 * once: its pending callers are answered by the target connection and it is restarted there,
 * like a server that crashed. A line that is not a JSON-RPC message is reported and skipped.
 * Nothing the child does — errors on its pipes, a failed kill, garbage — may throw out of a
 * stream handler: that would be an uncaught exception in the gateway.
 */

import { spawn, type ChildProcess } from 'node:child_process'

/**
 * What a stdio server inherits of the gateway's environment besides what its target sets:
 * the variables the MCP SDK's stdio client passes on (its DEFAULT_INHERITED_ENV_VARS, after
 * sudo's), skipping exported shell functions. Kept here rather than imported: the SDK's stdio
 * module loads its message schemas (zod, ~100 modules and tens of MiB of heap) for a list of
 * names. packages/engine/test/mcp-stdio-environment.test.ts pins it to the SDK's.
 */
export const INHERITED_ENV_VARS = process.platform === 'win32'
  ? ['APPDATA', 'HOMEDRIVE', 'HOMEPATH', 'LOCALAPPDATA', 'PATH', 'PROCESSOR_ARCHITECTURE', 'SYSTEMDRIVE', 'SYSTEMROOT', 'TEMP', 'USERNAME', 'USERPROFILE', 'PROGRAMFILES']
  : ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER']

export function inheritedEnvironment (env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of INHERITED_ENV_VARS) {
    const value = env[name]
    if (value !== undefined && !value.startsWith('()')) out[name] = value
  }
  return out
}

/** One message per line, as the SDK's serializeMessage writes it. */
function serializeMessage (message: unknown): string {
  return JSON.stringify(message) + '\n'
}
import type { UpstreamTransport } from './transport.ts'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { LineSplitter } from './line-splitter.ts'
import { validMessage } from '../protocol/jsonrpc.ts'
import { messageTooLarge } from '../protocol/message-limits.ts'
import { PorticoError } from '../../util/errors.ts'

export interface StdioTargetOptions {
  cmd: string
  args: string[]
  env: Record<string, string>
  cwd?: string
  /** Longest stdout line (one message) accepted, in bytes. */
  maxLineBytes: number
  /** Each line the server writes to stderr. */
  onStderr?: (line: string) => void
}

/** Stderr lines are for logs: longer ones are cut off here. */
const MAX_STDERR_LINE_BYTES = 16 * 1024
/**
 * What a server started ahead of time (a spare, mcp/upstream/stdio-spares.ts) may write before a
 * session takes it, kept for that session: a server has no reason to say much before
 * `initialize`, and one that says more is cut off here (the excess is dropped).
 */
const MAX_EARLY_ITEMS = 256

export class StdioProcessTransport implements UpstreamTransport {
  readonly kind = 'stdio' as const
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private child: ChildProcess | undefined
  private readonly options: StdioTargetOptions
  private closing = false
  private closeReported = false
  exitInfo: { code: number | null, signal: NodeJS.Signals | null } | null = null
  /** Why the transport stopped the server itself (it broke the protocol), or null. */
  fault: string | null = null
  /** Each line the server writes to stderr (options.onStderr to begin with). */
  onstderr: ((line: string) => void) | undefined
  private starting: Promise<void> | undefined
  private spawned = false
  /**
   * Messages and stderr lines that came before anyone listened (a spare not yet taken), in
   * order; handed to whoever starts the transport next.
   */
  private early: Array<{ message: JSONRPCMessage } | { stderr: string }> = []

  constructor (options: StdioTargetOptions) {
    this.options = options
    this.onstderr = options.onStderr
  }

  /** Launched (or launching), and neither exited, closing nor stopped for a fault. */
  get usable (): boolean {
    return this.starting !== undefined && this.exitInfo === null && this.fault === null && !this.closing
  }

  get pid (): number | undefined {
    return this.child?.pid
  }

  /**
   * Launches the server. Called again (a spare being taken, with its handlers now set), it
   * waits for that same launch and hands over what the server wrote meanwhile.
   */
  async start (): Promise<void> {
    if (this.starting === undefined) {
      this.starting = this.launch()
      await this.starting
      return
    }
    if (!this.spawned) await this.starting
    // At once, before any new output can be read: the session sees everything in order.
    const early = this.early
    this.early = []
    for (const item of early) {
      if ('message' in item) this.onmessage?.(item.message)
      else this.onstderr?.(item.stderr)
    }
  }

  private launch (): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.options.cmd, this.options.args, {
        env: { ...inheritedEnvironment(), ...this.options.env },
        cwd: this.options.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true
      })
      this.child = child
      let started = false
      child.on('error', err => {
        if (!started) reject(err)
        this.onerror?.(err)
      })
      child.once('spawn', () => {
        started = true
        this.spawned = true
        resolve()
      })
      child.once('close', (code, signal) => {
        this.exitInfo = { code, signal }
        this.child = undefined
        // The server left on its own: whatever it started goes with it.
        if (!this.closing) this.killGroup(child, 'SIGKILL')
        this.reportClose()
      })
      const stdout = new LineSplitter({
        maxLineBytes: this.options.maxLineBytes,
        onLine: line => this.onLine(line),
        onOverflow: () => this.stopForFault(child, messageTooLarge('it wrote a stdout line', this.options.maxLineBytes).message)
      })
      child.stdout!.on('data', (chunk: Buffer) => {
        if (this.fault === null) stdout.push(chunk)
      })
      const stderr = new LineSplitter({
        maxLineBytes: MAX_STDERR_LINE_BYTES,
        onLine: line => {
          const text = line.toString('utf8').replace(/\r$/, '')
          if (text !== '') this.stderrLine(text)
        },
        onOverflow: () => this.stderrLine(`[a stderr line of more than ${MAX_STDERR_LINE_BYTES} bytes was dropped]`)
      })
      child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk))
      for (const stream of [child.stdin!, child.stdout!, child.stderr!]) stream.on('error', err => this.onerror?.(err))
    })
  }

  private onLine (line: Buffer): void {
    const text = line.toString('utf8').replace(/\r$/, '')
    if (text.trim() === '') return
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      this.onerror?.(new PorticoError('PORTICO_MCP_PROTOCOL', `stdout line is not a JSON-RPC message (skipped): ${text.slice(0, 200)}`))
      return
    }
    if (!validMessage(message)) {
      this.onerror?.(new PorticoError('PORTICO_MCP_PROTOCOL', `stdout line is not a JSON-RPC message (skipped): ${text.slice(0, 200)}`))
      return
    }
    if (this.onmessage !== undefined) this.onmessage(message as JSONRPCMessage)
    else if (this.early.length < MAX_EARLY_ITEMS) this.early.push({ message: message as JSONRPCMessage })
  }

  private stderrLine (text: string): void {
    if (this.onstderr !== undefined) this.onstderr(text)
    else if (this.early.length < MAX_EARLY_ITEMS) this.early.push({ stderr: text })
  }

  /**
   * The server broke the protocol: it is killed (with its process group) and the transport
   * reports itself closed at once, so callers are answered without waiting for the exit.
   */
  private stopForFault (child: ChildProcess, reason: string): void {
    if (this.fault !== null) return
    this.fault = reason
    child.stdout?.destroy()
    this.onerror?.(new PorticoError('PORTICO_MCP_PROTOCOL', reason))
    this.killGroup(child, 'SIGKILL')
    this.reportClose()
  }

  private reportClose (): void {
    if (this.closeReported) return
    this.closeReported = true
    this.onclose?.()
  }

  send (message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin
    if (stdin == null || stdin.destroyed || this.fault !== null) return Promise.reject(new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', 'server process is not running'))
    return new Promise((resolve, reject) => {
      if (stdin.write(serializeMessage(message))) {
        resolve()
        return
      }
      // A server that stops reading stdin must not hold the sender forever once it is gone.
      const done = (err?: Error) => {
        stdin.off('drain', onDrain)
        stdin.off('close', onClose)
        if (err === undefined) resolve()
        else reject(err)
      }
      const onDrain = () => done()
      const onClose = () => done(new PorticoError('PORTICO_MCP_TARGET_UNAVAILABLE', 'server process is not running'))
      stdin.once('drain', onDrain)
      stdin.once('close', onClose)
    })
  }

  /**
   * Ends stdin (a polite server exits), then SIGTERM to the whole process group (also when
   * the leader already left: a shim's children may not have), then SIGKILL if it lingers.
   */
  async close (): Promise<void> {
    const child = this.child
    if (child === undefined || this.closing) return
    this.closing = true
    const exited = new Promise<void>(resolve => child.once('close', () => resolve()))
    const wait = (ms: number) => Promise.race([exited.then(() => true), new Promise<boolean>(resolve => setTimeout(() => resolve(false), ms).unref())])
    child.stdin?.end()
    await wait(300)
    this.killGroup(child, 'SIGTERM')
    if (!(await wait(2000))) this.killGroup(child, 'SIGKILL')
    await wait(1000)
  }

  private killGroup (child: ChildProcess, signal: NodeJS.Signals): void {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal)
    } catch {
      try {
        child.kill(signal)
      } catch {
        // already gone
      }
    }
  }
}
