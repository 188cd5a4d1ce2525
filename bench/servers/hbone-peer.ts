/**
 * An HBONE peer for benchmarks (as ztunnel on a pod's port 15008): the test peer of
 * @portico/testkit/hbone-peer in its own process, so its CPU is not counted as Portico's.
 * Usage: node bench/servers/hbone-peer.ts CERT KEY ROOT — prints "ready PORT".
 */

import { readFileSync } from 'node:fs'
import { startHbonePeer } from '@portico/testkit/hbone-peer'

const [cert, key, root] = process.argv.slice(2).map(f => readFileSync(f!, 'utf8'))
const peer = await startHbonePeer({ cert: cert!, key: key!, root: root! })
process.stdout.write(`ready ${peer.port}\n`)
process.on('SIGTERM', () => { peer.close().then(() => process.exit(0), () => process.exit(1)) })
