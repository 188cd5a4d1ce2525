/**
 * porticoctl under test: run it to completion in this process (its `main` with the test's
 * argv, environment and output streams: a spawn costs ~0.5 s of startup, and one case ran
 * seven), or the real binary (node + bin/porticoctl.ts, no pnpm or shell in between) in the
 * background or when the process itself is under test; and read its `--raw` output.
 * Shared by packages/cli's tests and e2e (a subpath only, not in the testkit's index: it
 * loads porticoctl, which other tests do not need).
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import type { TraceRecord } from './trace.ts'
import { withTimeout } from './wait.ts'

/** A `--raw` line as a test reads it: one type for it, shared with the e2e trace client. */
export type { TraceRecord }

export const PORTICOCTL_BIN = fileURLToPath(new URL('../../cli/bin/porticoctl.ts', import.meta.url))
/** @portico/cli's entry (its package.json `exports["."]`). */
const CLI_ENTRY = new URL('../../cli/src/index.ts', import.meta.url).href

export interface CtlResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

// Background porticoctl processes still running when the test process exits are killed.
const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

export interface CtlOptions {
  env?: Record<string, string>
  timeoutMs?: number
  cwd?: string
}

export class CtlProcess {
  readonly child: ChildProcess
  stdout = ''
  stderr = ''
  readonly done: Promise<CtlResult>
  private readonly waiters = new Set<() => void>()

  constructor (args: string[], options: CtlOptions = {}) {
    this.child = spawn(process.execPath, [PORTICOCTL_BIN, ...args], {
      env: { ...process.env, ...options.env },
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe']
    })
    live.add(this.child)
    this.child.stdout!.setEncoding('utf8').on('data', (s: string) => { this.stdout += s; this.notify() })
    this.child.stderr!.setEncoding('utf8').on('data', (s: string) => { this.stderr += s; this.notify() })
    const timer = setTimeout(() => this.child.kill('SIGKILL'), options.timeoutMs ?? 20_000)
    this.done = new Promise(resolve => {
      this.child.once('close', (code, signal) => {
        clearTimeout(timer)
        live.delete(this.child)
        this.notify()
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr })
      })
    })
  }

  private notify (): void {
    for (const w of [...this.waiters]) w()
  }

  /** Resolves once `pattern` shows up on stdout or stderr; rejects after `timeoutMs`. */
  async waitFor (pattern: RegExp, timeoutMs = 10_000): Promise<void> {
    if (pattern.test(this.stdout + this.stderr)) return
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(this.stdout + this.stderr)) {
          clearTimeout(timer)
          this.waiters.delete(check)
          resolve()
        }
      }
      const timer = setTimeout(() => {
        this.waiters.delete(check)
        reject(new Error(`porticoctl did not print ${String(pattern)} within ${timeoutMs} ms\nstdout: ${this.stdout}\nstderr: ${this.stderr}`))
      }, timeoutMs)
      this.waiters.add(check)
    })
  }

  kill (): void {
    this.child.kill('SIGKILL')
  }
}

/** A stream that keeps what is written to it, as porticoctl's stdout or stderr. */
class Capture extends Writable {
  text = ''
  override _write (chunk: Buffer | string, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.text += chunk.toString()
    callback()
  }
}

/**
 * Runs porticoctl to completion in this process: `main(args)` with captured stdout and
 * stderr (not terminals), an empty stdin and `process.env` plus `options.env`. `code` is what
 * the binary would exit with. With `cwd` (which only a process can have) it spawns the binary.
 */
export async function ctl (args: string[], options: CtlOptions = {}): Promise<CtlResult> {
  if (options.cwd !== undefined) return await ctlSpawned(args, options)
  const stdout = new Capture()
  const stderr = new Capture()
  const stdin = Readable.from([])
  const env = { ...process.env, ...options.env }
  // Loaded on first use: importing this module must not cost porticoctl's load. By path, as
  // PORTICOCTL_BIN is, not as a dependency: @portico/cli's tests depend on the testkit, and a
  // dependency back would make the workspace's packages a cycle.
  const { main } = await import(CLI_ENTRY) as typeof import('../../cli/src/index.ts')
  const code = await withTimeout(main(args, { stdout, stderr, stdin }, { env }), options.timeoutMs ?? 20_000, `porticoctl ${args.join(' ')} did not finish`)
  return { code, signal: null, stdout: stdout.text, stderr: stderr.text }
}

/** Runs the real binary to completion (for what only a process shows: its exit). */
export async function ctlSpawned (args: string[], options: CtlOptions = {}): Promise<CtlResult> {
  return await new CtlProcess(args, options).done
}

/** stdout's lines, each parsed as JSON (fails the test on a non-JSON line). */
export function jsonLines (stdout: string): TraceRecord[] {
  const lines = stdout.split('\n')
  if (lines.at(-1) === '') lines.pop()
  return lines.map((line, i) => {
    try {
      return JSON.parse(line) as TraceRecord
    } catch {
      throw new Error(`stdout line ${i + 1} is not JSON: ${line}`)
    }
  })
}
