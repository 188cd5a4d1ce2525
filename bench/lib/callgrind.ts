/**
 * Instructions per function from a callgrind part file, with V8's JIT code named.
 *
 * callgrind names the functions of the node binary (V8's builtins, the C++ runtime, libuv)
 * but not the code V8 compiles at run time, which it shows as bare addresses. Run with
 * `--perf-basic-prof`, V8 writes each piece of code it makes to /tmp/perf-<pid>.map (start,
 * size, name, as `perf` reads it); the addresses are looked up there. JIT names keep V8's
 * tier mark — `*` TurboFan, `+` Maglev, `^` Sparkplug, `~` the interpreter — so a function
 * that shows up twice ran in two tiers during the count (it was still being optimized).
 */

import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Pool, type Dispatcher } from 'undici'
import { fmt, table } from './report.ts'

interface CodeRange { start: number, end: number, name: string }

/** The JIT code ranges V8 wrote for process `pid` (empty without --perf-basic-prof). */
export function jitCodeMap (pid: number): CodeRange[] {
  const file = `/tmp/perf-${pid}.map`
  if (!existsSync(file)) return []
  const ranges: CodeRange[] = []
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line)
    if (m === null) continue
    const start = parseInt(m[1]!, 16)
    // The source position (file:line:col) is left out: one name per function.
    ranges.push({ start, end: start + parseInt(m[2]!, 16), name: `JIT ${m[3]!.replace(/\s+\S+:\d+:\d+$/, '')}` })
  }
  return ranges.sort((a, b) => a.start - b.start)
}

function lookup (ranges: CodeRange[], address: number): string | undefined {
  let lo = 0
  let hi = ranges.length - 1
  // The last range starting at or before the address; code V8 made later at the same place
  // (after freeing the first) sorts after it and wins, which is the newer, so the likelier.
  let found = -1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (ranges[mid]!.start <= address) {
      found = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  for (let i = found; i >= 0 && i > found - 50; i--) {
    const r = ranges[i]!
    if (address >= r.start && address < r.end) return r.name
  }
  return undefined
}

/**
 * Self instructions per function of one callgrind part file (`callgrind_annotate`), JIT
 * addresses named from `ranges`; functions with the same name are summed.
 */
export async function functionCounts (file: string, ranges: CodeRange[]): Promise<Map<string, number>> {
  const out = await new Promise<string>((resolve, reject) => execFile('callgrind_annotate', ['--inclusive=no', '--threshold=100', '--auto=no', file], { maxBuffer: 256 * 1024 * 1024 }, (err, stdout) => err !== null ? reject(err) : resolve(stdout)))
  const counts = new Map<string, number>()
  const total = Number(/^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS/m.exec(out)?.[1]?.replaceAll(',', '') ?? Infinity)
  for (const line of out.split('\n')) {
    const m = /^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$/.exec(line)
    if (m === null || m[2] === 'PROGRAM TOTALS') continue
    // The frames on the stack when the dump was taken (main, the event loop, the JavaScript
    // running then) are listed with the whole count: no function's own share comes near half.
    if (Number(m[1]!.replaceAll(',', '')) >= total / 2) continue
    let name = m[2]!.trim()
    const address = /^\?\?\?:0x([0-9a-f]+)/.exec(name)
    if (address !== null) name = lookup(ranges, parseInt(address[1]!, 16)) ?? 'JIT (unnamed)'
    else name = name.replace(/\s*\[[^\]]*\]$/, '').replace(/^\?\?\?:/, '')
    counts.set(name, (counts.get(name) ?? 0) + Number(m[1]!.replaceAll(',', '')))
  }
  return counts
}

/** The functions whose count per request moved most between `base` and `other`, largest first. */
export function largestChanges (base: Map<string, number>, other: Map<string, number>, perRequest: number, n: number): Array<{ name: string, change: number }> {
  const names = new Set([...base.keys(), ...other.keys()])
  return [...names]
    .map(name => ({ name, change: ((other.get(name) ?? 0) - (base.get(name) ?? 0)) / perRequest }))
    .sort((a, b) => Math.abs(b.change) - Math.abs(a.change))
    .slice(0, n)
}

/**
 * The `n` functions that moved most from `base` to `other`, as a titled table of their change
 * per `unit` (a request, a call): what each counted bench prints under its totals.
 */
export function movedFunctionsTable (title: string, base: Map<string, number>, other: Map<string, number>, perUnit: number, n: number, unit = 'request'): string {
  return [
    `${title}: the ${n} functions that moved most, instructions per ${unit} (JIT tiers: * TurboFan, + Maglev, ^ Sparkplug, ~ interpreter)`,
    table(['function', 'change'], largestChanges(base, other, perUnit, n).map(f => [f.name.length > 100 ? `${f.name.slice(0, 99)}…` : f.name, `${f.change > 0 ? '+' : ''}${fmt(f.change, 0)}`]))
  ].join('\n')
}

/** Whether valgrind runs here; when it does not, says so for the bench `name` (which then skips). */
export async function haveValgrind (name: string): Promise<boolean> {
  try {
    await run('valgrind', ['--version'])
    return true
  } catch {
    process.stdout.write(`${name}: skipped (needs valgrind: apt-get install valgrind)\n`)
    return false
  }
}

/** Runs a command to its end; its stdout (callgrind_control, valgrind --version). */
export function run (command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => execFile(command, args, (err, stdout) => err !== null ? reject(err) : resolve(stdout)))
}

/**
 * `n` requests (`request`: path, method, body, headers) over 10 keep-alive connections, each
 * answer read to its end: the load a counted window measures. Fails when any is not a 200.
 */
export async function sendRequests (url: string, request: Dispatcher.RequestOptions, n: number): Promise<void> {
  const pool = new Pool(url, { connections: 10 })
  let left = n
  let failed = 0
  const worker = async (): Promise<void> => {
    while (left-- > 0) {
      const res = await pool.request(request)
      await res.body.dump()
      if (res.statusCode !== 200) failed++
    }
  }
  await Promise.all(Array.from({ length: 10 }, worker))
  await pool.close()
  if (failed > 0) throw new Error(`${request.path}: ${failed} of ${n} requests failed`)
}

/**
 * The instructions of dump `dump` (`callgrind_control --dump` numbers them from 1): the main
 * thread's (part file …-01) and all threads' `summary:`, and the main thread's file.
 */
export function dumpTotals (dir: string, dump: number): { main: number, all: number, mainFile: string } {
  let main = 0
  let all = 0
  let mainFile = ''
  for (const file of readdirSync(dir)) {
    const m = /^callgrind\.out\.\d+\.(\d+)-(\d+)$/.exec(file)
    if (m === null || Number(m[1]) !== dump) continue
    const summary = /^summary: (\d+)$/m.exec(readFileSync(join(dir, file), 'utf8'))
    const count = summary === null ? 0 : Number(summary[1])
    all += count
    if (Number(m[2]) === 1) {
      main = count
      mainFile = join(dir, file)
    }
  }
  return { main, all, mainFile }
}
