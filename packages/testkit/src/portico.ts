/**
 * Runs the real `portico` binary as a child process for black-box tests: writes the config
 * to a temp directory, picks a free loopback port, spawns `node packages/proxy/bin/portico.mjs
 * -f FILE` directly (no pnpm or shell in between, so signals reach the process), waits for the
 * "portico started" log line and collects everything it prints.
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ConfigFile } from '@portico/engine'
import { freePort } from './free-port.ts'

// packages/testkit/src → the repository root.
export const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url))
/** The package's `portico` (packages/proxy package.json "bin"): users run this one. */
export const PORTICO_BIN = join(REPO_ROOT, 'packages/proxy/bin/portico.mjs')

/** Environment every test instance runs with: no admin/stats/readiness ports, JSON logs. */
export const QUIET_ENV: Record<string, string> = {
  ADMIN_ADDR: 'off',
  STATS_ADDR: 'off',
  READINESS_ADDR: 'off',
  LOG_FORMAT: 'json'
}

/** A config as YAML text, or as an object (written as JSON, which is valid YAML). */
export type ConfigInput = string | ConfigFile

export function configText (config: ConfigInput): string {
  return typeof config === 'string' ? config : JSON.stringify(config, null, 2) + '\n'
}

/** A gateway on loopback only. */
export function gateway (port: number, extra: Partial<NonNullable<ConfigFile['gateways']>[string]> = {}): NonNullable<ConfigFile['gateways']>[string] {
  return { port, protocol: 'HTTP', address: '127.0.0.1', ...extra }
}

export { freePort }

/** Whether a process (a stdio MCP server the gateway launched, say) is still running. */
export function processAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

export function makeTempDir (prefix = 'portico-e2e-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

// Children still running when the test process exits are killed, whatever happened.
const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

export interface ExitInfo {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface StartOptions {
  /** The config; a function gets the gateway port the helper picked. */
  config: ConfigInput | ((port: number) => ConfigInput)
  /** Extra environment (on top of QUIET_ENV). */
  env?: Record<string, string>
  /** Directory for the config file (a fresh temp directory by default; removed by stop()). */
  dir?: string
  fileName?: string
  startTimeoutMs?: number
}

export class PorticoProcess {
  readonly child: ChildProcess
  readonly dir: string
  readonly configPath: string
  readonly port: number
  readonly exited: Promise<ExitInfo>
  exit: ExitInfo | null = null
  stdout = ''
  stderr = ''
  /** stop() removes `dir` when set. */
  ownsDir: boolean
  private readonly waiters = new Set<() => void>()

  constructor (child: ChildProcess, dir: string, configPath: string, port: number, ownsDir: boolean) {
    this.child = child
    this.dir = dir
    this.configPath = configPath
    this.port = port
    this.ownsDir = ownsDir
    live.add(child)
    child.stdout!.setEncoding('utf8').on('data', (s: string) => { this.stdout += s; this.notify() })
    child.stderr!.setEncoding('utf8').on('data', (s: string) => { this.stderr += s; this.notify() })
    this.exited = new Promise(resolve => {
      child.once('close', (code, signal) => {
        live.delete(child)
        this.exit = { code, signal }
        this.notify()
        resolve(this.exit)
      })
    })
  }

  get url (): string {
    return `http://127.0.0.1:${this.port}`
  }

  /** stdout and stderr so far (for assertion messages). */
  get output (): string {
    return `--- stdout ---\n${this.stdout}\n--- stderr ---\n${this.stderr}`
  }

  /** stdout's JSON log lines, parsed (non-JSON lines skipped). */
  logs (): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = []
    for (const line of this.stdout.split('\n')) {
      if (!line.startsWith('{')) continue
      try {
        out.push(JSON.parse(line) as Record<string, unknown>)
      } catch {
        // a line still being written
      }
    }
    return out
  }

  private notify (): void {
    for (const w of [...this.waiters]) w()
  }

  /**
   * Resolves with the combined output once `pattern` appears in stdout (from character
   * `fromStdout` on) or stderr (from `fromStderr` on); rejects after `timeoutMs` or when the
   * process exits first.
   */
  async waitForOutput (pattern: string | RegExp, options: { timeoutMs?: number, fromStdout?: number, fromStderr?: number } = {}): Promise<string> {
    const timeoutMs = options.timeoutMs ?? 10_000
    const matches = () => {
      const text = this.stdout.slice(options.fromStdout ?? 0) + '\n' + this.stderr.slice(options.fromStderr ?? 0)
      return (typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text)) ? text : null
    }
    const first = matches()
    if (first !== null) return first
    return await new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer)
        this.waiters.delete(check)
      }
      const check = () => {
        const text = matches()
        if (text !== null) {
          done()
          resolve(text)
        } else if (this.exit !== null) {
          done()
          reject(new Error(`portico exited (${JSON.stringify(this.exit)}) before printing ${String(pattern)}\n${this.output}`))
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${String(pattern)}\n${this.output}`))
      }, timeoutMs)
      this.waiters.add(check)
    })
  }

  /** Rewrites the config file in place (as `cat > file` or most editors do). */
  writeConfig (config: ConfigInput): void {
    writeFileSync(this.configPath, configText(config))
  }

  /** Replaces the config file by renaming a temp file over it (as atomic-save editors do). */
  replaceConfig (config: ConfigInput): void {
    const tmp = `${this.configPath}.tmp-${process.pid}`
    writeFileSync(tmp, configText(config))
    renameSync(tmp, this.configPath)
  }

  signal (signal: NodeJS.Signals): void {
    if (this.exit === null) this.child.kill(signal)
  }

  /** Waits for exit, killing the process with SIGKILL if it takes longer than `timeoutMs`. */
  async waitForExit (timeoutMs = 10_000): Promise<ExitInfo> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<'timeout'>(resolve => { timer = setTimeout(() => resolve('timeout'), timeoutMs) })
    const result = await Promise.race([this.exited, timeout])
    clearTimeout(timer)
    if (result === 'timeout') {
      this.child.kill('SIGKILL')
      await this.exited
      throw new Error(`portico did not exit within ${timeoutMs} ms; killed\n${this.output}`)
    }
    return result
  }

  /** SIGTERM, then SIGKILL after `timeoutMs`; removes the temp dir. Safe to call twice. */
  async stop (timeoutMs = 5_000): Promise<ExitInfo> {
    if (this.exit === null) {
      this.child.kill('SIGTERM')
      let timer: NodeJS.Timeout | undefined
      const timeout = new Promise<'timeout'>(resolve => { timer = setTimeout(() => resolve('timeout'), timeoutMs) })
      if (await Promise.race([this.exited, timeout]) === 'timeout') this.child.kill('SIGKILL')
      clearTimeout(timer)
    }
    const exit = await this.exited
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true })
    return exit
  }
}

/**
 * Data-plane workers of every instance the tests start: one event loop (WORKERS=1) unless
 * PORTICO_TEST_WORKERS says otherwise — scripts/test runs a named subset of the suites a
 * second time with 2 (the production default, the CPUs available, would make every test's
 * gateway as many threads as the machine has cores). A test's own `env.WORKERS` wins.
 */
export const TEST_WORKERS = process.env.PORTICO_TEST_WORKERS ?? '1'

function spawnPortico (args: string[], env: Record<string, string> | undefined): ChildProcess {
  return spawn(process.execPath, [PORTICO_BIN, ...args], {
    env: { ...process.env, ...QUIET_ENV, WORKERS: TEST_WORKERS, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
}

/** Starts portico on a config and waits until it has logged "portico started". */
export async function startPortico (options: StartOptions): Promise<PorticoProcess> {
  const ownsDir = options.dir === undefined
  const dir = options.dir ?? makeTempDir()
  const configPath = join(dir, options.fileName ?? 'config.yaml')
  // A port picked as free can be taken by someone else before portico binds it: retry.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const config = typeof options.config === 'function' ? options.config(port) : options.config
    writeFileSync(configPath, configText(config))
    const proc = new PorticoProcess(spawnPortico(['-f', configPath], options.env), dir, configPath, port, false)
    try {
      await proc.waitForOutput('portico started', { timeoutMs: options.startTimeoutMs ?? 15_000 })
      proc.ownsDir = ownsDir
      return proc
    } catch (err) {
      await proc.stop()
      if (attempt < 3 && /EADDRINUSE/.test(proc.output)) continue
      if (ownsDir) rmSync(dir, { recursive: true, force: true })
      throw err
    }
  }
}

export interface RunResult extends ExitInfo {
  stdout: string
  stderr: string
}

/** Runs portico with `args` to completion (for --validate and start-up failures). */
export async function runPortico (args: string[], options: { env?: Record<string, string>, timeoutMs?: number } = {}): Promise<RunResult> {
  const child = spawnPortico(args, options.env)
  live.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (s: string) => { stdout += s })
  child.stderr!.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 15_000)
  const exit = await new Promise<ExitInfo>(resolve => child.once('close', (code, signal) => resolve({ code, signal })))
  clearTimeout(timer)
  live.delete(child)
  return { ...exit, stdout, stderr }
}

/**
 * Starts portico in cluster mode (no config file; config from the controller at
 * `env.XDS_ADDRESS`) and waits for "portico started". Ports come from the pushed config.
 */
export async function startClusterPortico (env: Record<string, string>, options: { startTimeoutMs?: number } = {}): Promise<PorticoProcess> {
  const dir = makeTempDir()
  const proc = new PorticoProcess(spawnPortico([], env), dir, '', 0, true)
  try {
    await proc.waitForOutput('portico started', { timeoutMs: options.startTimeoutMs ?? 15_000 })
  } catch (err) {
    await proc.stop()
    throw err
  }
  return proc
}
