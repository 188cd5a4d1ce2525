/** What the proxy tests need to run a `portico` child: a free port for it, and its start. */

import type { ChildProcess } from 'node:child_process'
import { createServer, type AddressInfo } from 'node:net'

/** A loopback port free at the moment of asking (the system's pick for port 0). */
export function freePort (): Promise<number> {
  return new Promise<number>(resolve => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port
      s.close(() => resolve(p))
    })
  })
}

/** Resolves when a `portico` child logs `portico started` (on stdout or stderr); rejects if it exits first. */
export function porticoStarted (child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let out = ''
    const onData = (d: Buffer) => { out += d.toString(); if (out.includes('portico started')) resolve() }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    child.once('exit', code => reject(new Error(`portico exited (${code}): ${out}`)))
  })
}
