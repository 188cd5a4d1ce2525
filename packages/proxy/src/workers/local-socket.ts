/**
 * Addresses of the process's internal Unix sockets (the MCP handoff, the connection intake of
 * each worker). On Linux they are in the abstract namespace: no file, since proxy pods run
 * with a read-only root filesystem; other local processes can list and connect to such names,
 * so whatever listens there checks a random token that never leaves the process. Elsewhere
 * they are files in a fresh 0700 directory of the process's.
 */

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'

const ABSTRACT = process.platform === 'linux'

let directory: string | null = null

/** A fresh socket address for `label`; `remove` deletes its file (nothing to do when abstract). */
export function localSocketPath (label: string): { path: string, remove: () => void } {
  if (ABSTRACT) return { path: `\0portico-${process.pid}-${label}-${randomBytes(12).toString('hex')}`, remove: () => {} }
  if (directory === null) {
    const dir = mkdtempSync(join(tmpdir(), 'portico-'))
    directory = dir
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
  }
  const path = join(directory, `${label}-${randomBytes(6).toString('hex')}.sock`)
  return { path, remove: () => rmSync(path, { force: true }) }
}

/** A token for an internal socket: 256 random bits as hex. */
export function socketToken (): string {
  return randomBytes(32).toString('hex')
}
