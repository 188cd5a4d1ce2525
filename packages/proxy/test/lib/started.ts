import type { ChildProcess } from 'node:child_process'

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
