/**
 * Auth benchmark: requests/s of a route protected by mcpAuthentication (JWT signature,
 * issuer, audience, expiry) plus one CEL authorization rule (`"read" in jwt.permissions`),
 * against the same route without them, in one run. Keys are inline (no IdP on the hot
 * path: JWKS lookups are cached anyway). Target: at most a 15 % drop.
 *
 * Run: node bench/auth.ts [--duration 10]
 */

import autocannon from 'autocannon'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { readOptions } from './lib/options.ts'
import { fmt, ratio, rounded, table } from './lib/report.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'

const TARGET_DROP = 0.15
const opts = readOptions({
  duration: { flag: 'duration', default: 10, help: 'seconds per measured run' },
  warmup: { flag: 'warmup', default: 3, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

async function run (url: string, headers: Record<string, string>, seconds: number): Promise<{ rps: number, failures: number }> {
  return await new Promise((resolve, reject) => {
    autocannon({ url, connections: opts.connections, duration: seconds, headers }, (err, r) => {
      if (err !== null) reject(err)
      else resolve({ rps: r['2xx'] / r.duration, failures: r.non2xx + r.errors + r.timeouts })
    })
  })
}

async function main (): Promise<void> {
  const servers: Server[] = []
  try {
    const { publicKey, privateKey } = await generateKeyPair('RS256')
    const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'RS256', use: 'sig' }
    const token = await new SignJWT({ permissions: ['read'] }).setProtectedHeader({ alg: 'RS256', kid: 'bench' })
      .setIssuer('https://idp.bench/').setAudience('https://api.bench').setSubject('bench').setExpirationTime('2h').sign(privateKey)
    const backend = await startBackend()
    servers.push(backend)
    const config = `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: open
    matches: [{ path: { pathPrefix: /open } }]
    backends: [{ host: "127.0.0.1:${backend.port}" }]
  - name: protected
    matches: [{ path: { pathPrefix: /protected } }]
    policies:
      mcpAuthentication:
        mode: strict
        issuer: https://idp.bench/
        audiences: [https://api.bench]
        jwks: { keys: [${JSON.stringify(jwk)}] }
      authorization:
        rules: ['"read" in jwt.permissions']
    backends: [{ host: "127.0.0.1:${backend.port}" }]
`
    const portico = await startPortico({ config, logLevel: 'warn' })
    servers.push(portico)
    const base = `http://127.0.0.1:${portico.port}`
    const auth = { authorization: `Bearer ${token}` }
    progress('warm-up')
    await run(`${base}/open`, {}, opts.warmup)
    await run(`${base}/protected`, auth, opts.warmup)
    progress('measuring: without auth')
    const open = await run(`${base}/open`, {}, opts.duration)
    progress('measuring: mcpAuthentication + one CEL rule')
    const prot = await run(`${base}/protected`, auth, opts.duration)
    const drop = 1 - ratio(prot.rps, open.rps)
    const out = [
      `auth benchmark: Node ${process.version}; ${opts.connections} connections, ${opts.duration} s each; machine shared by load generator, proxy and backend`,
      '',
      table(['route', 'req/s', 'failures'], [
        ['no auth', fmt(open.rps, 0), String(open.failures)],
        ['mcpAuthentication + CEL rule', fmt(prot.rps, 0), String(prot.failures)]
      ]),
      '',
      `drop: ${fmt(drop * 100, 1)} % (target <= ${TARGET_DROP * 100} %: ${drop <= TARGET_DROP ? 'met' : 'NOT met'})`,
      JSON.stringify(rounded({ bench: 'auth', open, protected: prot, drop }))
    ]
    process.stdout.write(out.join('\n') + '\n')
  } finally {
    await Promise.all(servers.map(s => s.child.stop()))
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
