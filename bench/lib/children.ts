/**
 * Child processes for benchmarks: every server under test (backend, proxy) runs in its own
 * Node process so it never shares an event loop with the load generator. A child's stdout
 * and stderr go to a temporary file, not a pipe, so the load generator spends no CPU on
 * reading access logs; readiness is a line in that file or a port that accepts connections.
 */

import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

export interface StartOptions {
  /** Short name, for messages. */
  name: string
  /** Arguments after the node binary (or `command`): a script path and its arguments. */
  args: string[]
  /** The executable to run instead of this Node (a compiled reference server). */
  command?: string
  /** Extra environment variables (added to this process's environment). */
  env?: Record<string, string>
  /** Ready once this text appears in the child's output... */
  readyLine?: string
  /** ...or once this port accepts a TCP connection. */
  readyPort?: number
  /**
   * ...and only once the child itself listens on `readyPort` (from /proc). A child that takes
   * minutes to start (under valgrind) can lose the port freePort gave it to another process on
   * a busy machine, whose answers would then be counted as its own.
   */
  ownPort?: boolean
  /** Give up after this long (default 15 s). */
  timeoutMs?: number
  /** CPUs to pin the child (and its threads) to, as `taskset -c` takes them (e.g. `0`, `0,1`). */
  cpus?: string
  /** The child's working directory (default this process's): where files it writes unasked, such as V8's logs, land. */
  cwd?: string
}

export interface Child {
  readonly name: string
  readonly proc: ChildProcess
  /** Everything the child printed so far (stdout and stderr). */
  output (): string
  /** CPU time (user + system) the child has used so far, in seconds; NaN off Linux. */
  cpuSeconds (): number
  /** The same, thread by thread (threadCpuSeconds); empty off Linux. */
  threadCpuSeconds (): Map<string, number>
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  stop (graceMs?: number): Promise<void>
}

const live = new Set<Child>()
let scratch: string | undefined

/**
 * A fresh directory (under one removed when this process exits) for each config file and
 * each child's output. They never share one: Portico watches its config file's directory,
 * and a busy access log written there would wake the watcher on every write.
 */
export function scratchDir (name: string): string {
  scratch ??= mkdtempSync(join(tmpdir(), 'portico-bench-'))
  return mkdtempSync(join(scratch, `${name.replace(/\W+/g, '-')}-`))
}

process.once('exit', () => {
  for (const c of live) c.proc.kill('SIGKILL')
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })
})

/** Starts `node ...args` (or `command ...args`) and resolves once it is ready; rejects (and kills it) otherwise. */
export async function startNode (options: StartOptions): Promise<Child> {
  const logPath = join(scratchDir('logs'), 'output.log')
  const fd = openSync(logPath, 'w')
  // taskset execs the command in place: the child's pid is the command's.
  const command = options.command ?? process.execPath
  const [file, args] = options.cpus === undefined ? [command, options.args] : ['taskset', ['-c', options.cpus, command, ...options.args]]
  const proc = spawn(file, args, {
    env: { ...process.env, ...options.env },
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    stdio: ['ignore', fd, fd]
  })
  closeSync(fd)
  const child: Child = {
    name: options.name,
    proc,
    output: () => readFileSync(logPath, 'utf8'),
    cpuSeconds: () => processCpuSeconds(proc.pid),
    threadCpuSeconds: () => threadCpuSeconds(proc.pid),
    stop: graceMs => stopProcess(proc, graceMs).finally(() => live.delete(child))
  }
  live.add(child)
  try {
    await waitUntilReady(child, options)
  } catch (err) {
    await child.stop(0)
    throw new Error(`${options.name}: ${(err as Error).message}\n--- output ---\n${tail(child.output(), 2000)}`)
  }
  return child
}

async function waitUntilReady (child: Child, options: StartOptions): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 15_000)
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(`exited before it was ready (code ${child.proc.exitCode ?? child.proc.signalCode})`)
    }
    if (options.readyLine !== undefined && child.output().includes(options.readyLine)) return
    if (options.readyPort !== undefined && (options.ownPort === true ? listensOn(child.proc.pid, options.readyPort) : await portAnswers(options.readyPort))) return
    await sleep(50)
  }
  throw new Error('not ready in time')
}

function stopProcess (proc: ChildProcess, graceMs = 5_000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve()
  return new Promise(resolve => {
    const kill = setTimeout(() => proc.kill('SIGKILL'), graceMs)
    proc.once('exit', () => {
      clearTimeout(kill)
      resolve()
    })
    proc.kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM')
  })
}

/** USER_HZ: the unit of CPU times in /proc (100 on Linux in practice). */
const CLOCK_TICKS = 100

/** User + system CPU seconds of a process, from /proc (Linux); NaN when unavailable. */
export function processCpuSeconds (pid: number | undefined): number {
  if (pid === undefined) return NaN
  return statCpuSeconds(`/proc/${pid}/stat`)
}

/** utime + stime of a /proc stat file, in seconds; NaN when it cannot be read (the thread or process is gone). */
function statCpuSeconds (path: string): number {
  try {
    const stat = readFileSync(path, 'utf8')
    // Fields after the command name (which may contain spaces) start at index 2 (state);
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return NaN
  }
}

/**
 * CPU seconds of a process's threads by kind, from /proc (Linux): `main` is the thread whose
 * id is the process's (Node's event loop: the one that serves requests), the others go by
 * their names, those of one name summed (`V8Worker`: V8's platform threads, which run the
 * garbage collector's and the optimizing compiler's jobs of every isolate in the process;
 * `WorkerThread`: a worker_threads thread, such as Portico's span export thread;
 * `libuv-worker`: libuv's pool). A thread that ended takes its time with it, so compare
 * readings of threads that outlive the measurement.
 */
export function threadCpuSeconds (pid: number | undefined): Map<string, number> {
  const threads = new Map<string, number>()
  if (pid === undefined) return threads
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return threads
  }
  for (const tid of tids) {
    const seconds = statCpuSeconds(`/proc/${pid}/task/${tid}/stat`)
    if (Number.isNaN(seconds)) continue
    let kind = 'main'
    if (tid !== String(pid)) {
      try {
        kind = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim()
      } catch {
        continue
      }
    }
    threads.set(kind, (threads.get(kind) ?? 0) + seconds)
  }
  return threads
}

/**
 * CPU seconds of a process and its child processes (a Node cluster's workers), from /proc;
 * threads are counted in their process already.
 */
export function treeCpuSeconds (pid: number | undefined): number {
  if (pid === undefined) return NaN
  return processCpuSeconds(pid) + childPids(pid).reduce((sum, child) => sum + processCpuSeconds(child), 0)
}

/** Resident memory (bytes) of a process and its child processes, from /proc. */
export function treeRssBytes (pid: number | undefined): number {
  if (pid === undefined) return NaN
  const rss = (p: number) => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))
      return m === null ? 0 : Number(m[1]) * 1024
    } catch {
      return 0
    }
  }
  return rss(pid) + childPids(pid).reduce((sum, child) => sum + rss(child), 0)
}

function childPids (pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(x => x !== '').map(Number)
  } catch {
    return []
  }
}

/** Does something accept TCP connections on 127.0.0.1:port? */
export function portAnswers (port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise(resolve => {
    const socket = connect({ host, port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** Does a GET of `url` get a 2xx within a second? (The memory benches' "ready": listening and answering.) */
export async function urlAnswers (url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
    await res.arrayBuffer()
    return res.ok
  } catch {
    return false
  }
}

/** Does process `pid` hold a TCP socket listening on `port` (any address; Linux /proc)? */
export function listensOn (pid: number | undefined, port: number): boolean {
  if (pid === undefined) return false
  const inodes = new Set<string>()
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try {
      text = readFileSync(table, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st … inode: the port in hex after the colon, 0A = LISTEN.
      const f = line.trim().split(/\s+/)
      if (f.length > 9 && f[3] === '0A' && parseInt(f[1]!.split(':')[1]!, 16) === port) inodes.add(f[9]!)
    }
  }
  if (inodes.size === 0) return false
  let fds: string[] = []
  try {
    fds = readdirSync(`/proc/${pid}/fd`)
  } catch {
    return false
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m !== null && inodes.has(m[1]!)) return true
    } catch {}
  }
  return false
}

/** A port that was free a moment ago (the OS picks it). */
export function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')))
    })
  })
}

function tail (text: string, chars: number): string {
  return text.length <= chars ? text : '...' + text.slice(-chars)
}

/** Pins this process (every thread: a load generator may run here) to `cpus` (taskset). */
export function pinSelf (cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'ignore' })
}

/**
 * Pins a running process thread by thread (taskset -p on each thread id): its main thread,
 * the one that serves requests, to `mainCpus`, every other thread (V8's helpers, a span
 * export thread, libuv's pool) to `otherCpus`. A thread started later takes the affinity of
 * the thread that starts it, so call it again once the process has started its threads.
 */
export function pinThreads (pid: number, mainCpus: string, otherCpus: string): void {
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return
  }
  for (const tid of tids) {
    try {
      execFileSync('taskset', ['-p', '-c', tid === String(pid) ? mainCpus : otherCpus, tid], { stdio: 'ignore' })
    } catch {
      // The thread ended in between.
    }
  }
}

/** Where a bench's proxies run (bench/tracing.ts `--placement`, which says why each). */
export interface ProxyPlacement {
  /** CPUs to start each proxy on (taskset), all its threads; undefined: anywhere. */
  proxyCpus?: string
  /** Places a running proxy's threads; call before each of its runs. */
  place?: (pid: number) => void
  label: string
}

/**
 * `pinned`: each proxy, all its threads, on the last CPU; `apart`: each proxy's main thread
 * alone on the last CPU, its other threads on the others (pinThreads); `shared`: anywhere.
 * Either of the first two also pins this process — and the children it starts after, wrk and
 * the backend — to the other CPUs.
 */
export function placeProxies (placement: string, cpus: number): ProxyPlacement {
  if (placement === 'shared') return { label: 'shared: every process on every CPU' }
  if (placement !== 'pinned' && placement !== 'apart') throw new Error(`--placement: shared, pinned or apart, not ${placement}`)
  const last = cpus - 1
  if (last < 1 || !hasTaskset()) throw new Error(`--placement ${placement} needs 2 CPUs and taskset`)
  const others = last === 1 ? '0' : `0-${last - 1}`
  pinSelf(others)
  if (placement === 'apart') {
    return {
      place: pid => pinThreads(pid, String(last), others),
      label: `apart: each proxy's request thread alone on CPU ${last}; its other threads, wrk, the backend and the sink on CPU ${others}`
    }
  }
  return { proxyCpus: String(last), label: `pinned: each proxy on CPU ${last} (all its threads), wrk, the backend and the sink on CPU ${others}` }
}

export function hasTaskset (): boolean {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
