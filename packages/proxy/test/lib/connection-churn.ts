/**
 * Run by pretenuring.test.ts in a Node of its own (testkit old-space.ts): the V8 flags
 * Portico sets (src/v8-flags.ts, as bin/portico.ts sets them), then streams made and
 * destroyed as a server's connections are (a Duplex each, 50 open), one full GC while they
 * come and go, and 150,000 more. Prints how much the old generation grew (MB). With
 * allocation-site pretenuring on, the full GC tipped the streams' allocation sites into the
 * old generation and everything they pointed at was kept from then on (~6 MB here, run with
 * `no-flags`); without it, ~0.1.
 */

import { Duplex } from 'node:stream'
import { oldSpaceGrowthMb } from '@portico/testkit/old-space'
import { setRuntimeFlags } from '../../src/v8-flags.ts'

if (process.argv[2] !== 'no-flags') setRuntimeFlags(process.execArgv, process.env.NODE_OPTIONS)

const open: Duplex[] = []

/** 100 connections, then a turn of the event loop (a destroyed stream closes on the next tick). */
async function batch (): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const stream = new Duplex({ read () {}, write (_chunk, _encoding, cb) { cb() } })
    stream.on('error', () => {})
    open.push(stream)
    if (open.length > 50) open.shift()!.destroy()
  }
  await new Promise(resolve => setImmediate(resolve))
}

process.stdout.write(`${(await oldSpaceGrowthMb(batch, 200, 1500)).toFixed(1)}\n`)
process.exit(0)
