/**
 * An MCP stdio client transport that launches the server in its own process group, so
 * closing it ends the server and everything the server started (`npx` wrappers, shell
 * shims, helpers) — no orphans after a session ends, a reload or shutdown. Framing (newline-
 * delimited JSON) is the SDK's.
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js'
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'

export interface StdioTargetOptions {
  cmd: string
  args: string[]
  env: Record<string, string>
  cwd?: string
  /** Each line the server writes to stderr. */
  onStderr?: (line: string) => void
}

export class StdioProcessTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private child: ChildProcess | undefined
  private readonly buffer = new ReadBuffer()
  private readonly options: StdioTargetOptions
  private closing = false
  exitInfo: { code: number | null, signal: NodeJS.Signals | null } | null = null

  constructor (options: StdioTargetOptions) {
    this.options = options
  }

  get pid (): number | undefined {
    return this.child?.pid
  }

  start (): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.options.cmd, this.options.args, {
        env: { ...getDefaultEnvironment(), ...this.options.env },
        cwd: this.options.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true
      })
      this.child = child
      child.once('error', err => {
        reject(err)
        this.onerror?.(err)
      })
      child.once('spawn', () => resolve())
      child.once('close', (code, signal) => {
        this.exitInfo = { code, signal }
        this.child = undefined
        // The server left on its own: whatever it started goes with it.
        if (!this.closing) this.killGroup(child, 'SIGKILL')
        this.onclose?.()
      })
      child.stdout!.on('data', (chunk: Buffer) => {
        this.buffer.append(chunk)
        for (;;) {
          let message: JSONRPCMessage | null
          try {
            message = this.buffer.readMessage()
          } catch (err) {
            this.onerror?.(err as Error)
            continue
          }
          if (message === null) break
          this.onmessage?.(message)
        }
      })
      child.stdin!.on('error', err => this.onerror?.(err))
      let partial = ''
      child.stderr!.setEncoding('utf8').on('data', (text: string) => {
        const lines = (partial + text).split('\n')
        partial = lines.pop() ?? ''
        for (const line of lines) if (line !== '') this.options.onStderr?.(line)
      })
    })
  }

  send (message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin
    if (stdin == null || stdin.destroyed) return Promise.reject(new Error('server process is not running'))
    return new Promise(resolve => {
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once('drain', resolve)
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
