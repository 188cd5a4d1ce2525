/**
 * Auth benchmark: requests/s of a route protected by mcpAuthentication (JWT signature,
 * issuer, audience, expiry) plus one CEL authorization rule (`"read" in jwt.permissions`),
 * against the same route without them (the same request, token included, to both), in one
 * run: rounds in ABBA order, the drop taken
 * as the median of the rounds' ratios (bench/lib/abba.ts). Keys are inline (no IdP on the
 * hot path: JWKS lookups are cached anyway). Target: at most a 15 % drop.
 *
 * Run: node bench/auth.ts [--rounds 4] [--duration 8] [--warmup 2] [--connections 50]
 */

import { availableParallelism } from 'node:os'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { abbaReport, compareAbba } from './lib/abba.ts'
import { readOptions } from './lib/options.ts'
import { fmt, rounded } from './lib/report.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'

const TARGET_DROP = 0.15
const opts = readOptions({
  rounds: { flag: 'rounds', default: 4, help: 'rounds of two runs, without and with auth (ABBA order)' },
  duration: { flag: 'duration', default: 8, help: 'seconds per measured run' },
  warmup: { flag: 'warmup', default: 2, help: 'seconds of warm-up before each run' },
  connections: { flag: 'connections', default: 50, help: 'concurrent connections' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

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
    // Both get the same request, token included: the figure is the policies' cost, not the
    // cost of receiving a 700-byte header (the open route forwards it, the other strips it).
    const headers = { authorization: `Bearer ${token}` }
    const result = await compareAbba(
      { name: 'no auth', url: `${base}/open`, headers },
      { name: 'mcpAuthentication + CEL rule', url: `${base}/protected`, headers },
      { ...opts, cpu: portico.child.cpuSeconds, progress }
    )
    const drop = 1 - result.rpsRatio
    const cpus = availableParallelism()
    const out = [
      `auth benchmark: Node ${process.version}, ${cpus} CPU${cpus === 1 ? '' : 's'} shared by load generator, proxy and backend; ${opts.connections} connections, ${opts.duration} s measured after ${opts.warmup} s warm-up, ${opts.rounds} rounds in ABBA order`,
      '',
      ...abbaReport(result, { a: 'no auth', b: 'mcpAuthentication + CEL rule' }),
      `drop (median of the rounds): ${fmt(drop * 100, 1)} % (target <= ${TARGET_DROP * 100} %: ${drop <= TARGET_DROP ? 'met' : 'NOT met'}); CPU per request ${fmt(result.cpuRatio, 3)}x`,
      JSON.stringify(rounded({ bench: 'auth', node: process.version, cpus, options: opts, open: result.a, protected: result.b, roundRatios: result.roundRatios, roundCpuRatios: result.roundCpuRatios, drop, cpuPerRequestRatio: result.cpuRatio, targetMet: drop <= TARGET_DROP }))
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
