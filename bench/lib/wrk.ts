/**
 * wrk (Debian's `wrk`) as a load generator: a C client that spends far less CPU per request
 * than autocannon, so on a small machine more of the cores go to the servers measured.
 * Closed loop, keep-alive, `threads` threads and `connections` connections.
 */

import { execFile } from 'node:child_process'

export interface WrkResult {
  rps: number
  requests: number
  /** Non-2xx/3xx answers plus socket errors. */
  failures: number
  p50: number
  p99: number
}

export function hasWrk (): Promise<boolean> {
  return new Promise(resolve => execFile('wrk', ['--version'], err => resolve(err === null || (err as NodeJS.ErrnoException).code !== 'ENOENT')))
}

/** `headers`: request header lines (`Name: value`), e.g. `Connection: close` for a new connection per request. */
export function runWrk (url: string, options: { connections: number, seconds: number, threads?: number, headers?: string[] }): Promise<WrkResult> {
  const args = ['-t', String(options.threads ?? 1), '-c', String(options.connections), '-d', `${options.seconds}s`, '--latency', ...(options.headers ?? []).flatMap(h => ['-H', h]), url]
  return new Promise((resolve, reject) => {
    execFile('wrk', args, { timeout: (options.seconds + 30) * 1000 }, (err, stdout) => {
      if (err !== null) return reject(err)
      resolve(parseWrk(stdout))
    })
  })
}

/** wrk's report: `Requests/sec:`, `N requests in`, the latency distribution, errors. */
export function parseWrk (out: string): WrkResult {
  const num = (re: RegExp) => { const m = re.exec(out); return m === null ? 0 : Number(m[1]) }
  const ms = (label: string) => {
    const m = new RegExp(`^\\s*${label}%\\s+([\\d.]+)(us|ms|s)`, 'm').exec(out)
    if (m === null) return NaN
    return Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1)
  }
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  return {
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    requests: num(/(\d+) requests in/),
    failures: num(/Non-2xx or 3xx responses: (\d+)/) + (socketErrors === null ? 0 : socketErrors.slice(1).reduce((n, v) => n + Number(v), 0)),
    p50: ms('50'),
    p99: ms('99')
  }
}
