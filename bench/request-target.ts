/**
 * What the request-target checks cost per request (http/request-target.ts): splitting the
 * target, normalising the path and checking the Host lines, against what the pipeline did
 * before them (one indexOf and two slices). In-process, CPU only; prints ns per request and
 * the ratio for typical targets, and the share of a proxied request's CPU time that is
 * (~75 µs/req in bench/http-proxy.ts).
 *
 *   node bench/request-target.ts [--iterations N]
 */

import { hostHeaderProblem, normalizePath, splitRequestTarget, DEFAULT_PATH_NORMALIZATION } from '@portico/engine/request-target'
import { fmt, rounded, table } from './lib/report.ts'

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1] ?? '') || 2_000_000
const RAW_HEADERS = ['Host', 'api.example.test:8080', 'User-Agent', 'curl/8.5.0', 'Accept', '*/*', 'Authorization', 'Bearer abc', 'X-Request-Id', '0f6c1e1a']

const TARGETS: Array<[string, string]> = [
  ['short', '/hello'],
  ['typical', '/api/v1/users/12345/orders?limit=10&offset=20'],
  ['long clean', '/static/assets/js/vendor/react-dom.production.min.3f9a1c2b.js?v=1700000000'],
  ['needs work', '/api/%61pi/v1/./users//12345/../orders?x=1'],
  ['absolute-form', 'http://api.example.test/api/v1/users?x=1']
]

/** The old per-request work: split path and query, nothing else. */
function before (url: string): number {
  const q = url.indexOf('?')
  const path = q === -1 ? url : url.slice(0, q)
  const query = q === -1 ? '' : url.slice(q + 1)
  return path.length + query.length
}

function after (url: string): number {
  const target = splitRequestTarget(url)
  if (!target.ok) return 0
  if (hostHeaderProblem(RAW_HEADERS) !== null) return 0
  const normal = normalizePath(target.rawPath, DEFAULT_PATH_NORMALIZATION)
  return typeof normal === 'string' ? 0 : normal.path.length + target.query.length
}

function nsPerOp (fn: (url: string) => number, url: string): number {
  let sink = 0
  for (let i = 0; i < 200_000; i++) sink += fn(url) // warm-up (JIT)
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) sink += fn(url)
  const ns = Number(process.hrtime.bigint() - start) / iterations
  if (sink === -1) console.log(sink)
  return ns
}

const rows: string[][] = []
const figures: Record<string, { beforeNs: number, afterNs: number, addedUs: number }> = {}
for (const [name, url] of TARGETS) {
  const b = nsPerOp(before, url)
  const a = nsPerOp(after, url)
  figures[name] = { beforeNs: b, afterNs: a, addedUs: (a - b) / 1000 }
  rows.push([name, fmt(b, 0), fmt(a, 0), fmt(a / b, 1) + 'x', fmt((a - b) / 1000, 3), fmt((a - b) / 1000 / 75 * 100, 2) + '%'])
}
console.log(table(['target', 'before ns/req', 'after ns/req', 'after/before', 'added µs/req', 'of 75 µs/req'], rows))
console.log(JSON.stringify(rounded({ iterations, figures })))
