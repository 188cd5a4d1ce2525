/**
 * HBONE data path cost (docs/mesh.md): the same GETs through Portico to the bench backend
 * plainly and through an HBONE tunnel (HTTP/2 CONNECT over mTLS to a peer in its own process,
 * bench/servers/hbone-peer.ts, which pipes to the backend). Prints requests/s and Portico's
 * CPU µs per request for each, from one run, and the ratios HBONE / plain.
 *
 * Run: node bench/hbone.ts [--duration 5] [--connections 50]
 */

import { join } from 'node:path'
import { startNode } from './lib/children.ts'
import { startBackend, startPortico, type Server } from './lib/servers.ts'
import { measureThroughput } from './lib/load.ts'
import { readOptions } from './lib/options.ts'
import { fmt, ratio, rounded, table } from './lib/report.ts'
import { makeTestCa } from '@portico/testkit/hbone-peer'

const opts = readOptions({
  duration: { flag: 'duration', default: 5, help: 'seconds per measured run' },
  connections: { flag: 'connections', default: 50, help: 'autocannon connections' }
})
const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

async function main (): Promise<void> {
  const children: Server['child'][] = []
  const ca = makeTestCa('bench-mesh-ca')
  try {
    const peerCert = ca.issue('peer', 'spiffe://cluster.local/ns/bench/sa/backend')
    const gw = ca.issue('gateway', 'spiffe://cluster.local/ns/bench/sa/portico')
    const root = join(ca.dir, 'ca.pem')
    const backend = await startBackend()
    children.push(backend.child)
    const peer = await startNode({ name: 'hbone-peer', args: [new URL('./servers/hbone-peer.ts', import.meta.url).pathname, peerCert.certFile, peerCert.keyFile, root], readyLine: 'ready' })
    children.push(peer)
    const peerPort = Number(/ready (\d+)/.exec(peer.output())![1])
    const portico = await startPortico({
      logLevel: 'warn',
      config: [
        'config:',
        `  mesh: { certificate: { cert: "${gw.certFile}", key: "${gw.keyFile}", root: "${root}" } }`,
        'gateways:',
        '  default: { port: {port}, protocol: HTTP }',
        'routes:',
        '  - name: plain',
        '    matches: [{ path: { pathPrefix: /plain } }]',
        `    backends: [{ host: "127.0.0.1:${backend.port}" }]`,
        '  - name: mesh',
        '    matches: [{ path: { pathPrefix: /mesh } }]',
        `    backends: [{ host: "127.0.0.1:${backend.port}", mesh: { identity: "spiffe://cluster.local/ns/bench/sa/backend", hbonePort: ${peerPort} } }]`,
        ''
      ].join('\n')
    })
    children.push(portico.child)
    const cpu = () => portico.child.cpuSeconds()
    const run = { connections: opts.connections, seconds: opts.duration, warmupSeconds: 2, cpu }
    progress('portico → backend (plain)')
    const plain = await measureThroughput(`http://127.0.0.1:${portico.port}/plain`, run)
    progress('portico → HBONE peer → backend')
    const hbone = await measureThroughput(`http://127.0.0.1:${portico.port}/mesh`, run)
    const rows = [
      ['plain', fmt(plain.rps, 0), fmt(plain.p99, 2), fmt(plain.cpuUsPerRequest, 1), String(plain.failures)],
      ['hbone', fmt(hbone.rps, 0), fmt(hbone.p99, 2), fmt(hbone.cpuUsPerRequest, 1), String(hbone.failures)],
      ['hbone / plain', fmt(ratio(hbone.rps, plain.rps)), '', fmt(ratio(hbone.cpuUsPerRequest, plain.cpuUsPerRequest)), '']
    ]
    process.stdout.write([
      `hbone benchmark: Node ${process.version}; autocannon ${opts.connections} connections, ${opts.duration} s after 2 s warm-up, one run each; GET of 12 bytes; load generator, portico, peer and backend share this machine's cores`,
      '',
      table(['path', 'req/s', 'p99 ms', 'portico CPU us/req', 'failed'], rows),
      '',
      JSON.stringify(rounded({ bench: 'hbone', node: process.version, options: opts, results: { plain, hbone } }))
    ].join('\n') + '\n')
  } finally {
    await Promise.all(children.map(c => c.stop()))
    const { rmSync } = await import('node:fs')
    rmSync(ca.dir, { recursive: true, force: true })
  }
}

main().catch(err => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
