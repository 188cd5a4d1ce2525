/**
 * Ports for tests to bind later. A port is only free until its user binds it, and a test often
 * picks one long before its server binds it (a Gateway's listener, a picker's metrics port), so
 * two things must not take it in between:
 *
 * - **outgoing connections** of this machine: they take local ports from the kernel's ephemeral
 *   range (ip_local_port_range), and a connection holding port P makes bind(*:P) fail. Asking the
 *   kernel for port 0 hands out exactly those ports (seen in CI: lwepp's metrics port taken
 *   between the pick and its bind while the apiserver, etcd and kubectl were busy). So ports come
 *   from below the ephemeral range instead, where the kernel never puts a connection.
 * - **other test processes** (the runner runs files in parallel) and this one: each pick is
 *   reserved by creating a file named for the port in a directory shared by every test process
 *   on the machine (exclusive create); a reservation whose process has exited is taken over.
 *   The reservations are removed when this process exits.
 *
 * A pick is also probed by binding it on every address (what `:PORT` servers such as lwepp do),
 * so a port something already listens on is skipped.
 */

import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Where every test process on this machine records the ports it took. */
export const PORT_RESERVATIONS_DIR = join(tmpdir(), 'portico-test-ports')

/** The lowest port handed out; below it sit well-known services' ports (and ours: 9092, 15020, 15008). */
const LOWEST = 20_000

/** [first, last] of the kernel's ephemeral range; Linux's default when the file cannot be read. */
export function ephemeralRange (text?: string): [number, number] {
  let raw = text
  if (raw === undefined) {
    try { raw = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8') } catch { raw = '' }
  }
  const [first, last] = raw.trim().split(/\s+/).map(Number)
  return first !== undefined && last !== undefined && Number.isInteger(first) && Number.isInteger(last) && first > 0 && last >= first
    ? [first, last]
    : [32_768, 60_999]
}

/**
 * The range picks come from: [LOWEST, first ephemeral port − 1] when that leaves room (a
 * thousand ports at least), else above the ephemeral range up to 65535, else everything from
 * LOWEST (a machine whose ephemeral range covers almost all ports: nothing is safe, be random).
 */
export function pickRange ([first, last]: [number, number]): [number, number] {
  if (first - 1 - LOWEST >= 1000) return [LOWEST, first - 1]
  if (65_535 - (last + 1) >= 1000) return [last + 1, 65_535]
  return [LOWEST, 65_535]
}

const mine = new Set<number>()
let cleanupRegistered = false

function pidAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists, owned by someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The directory, writable by every user (a suite run as root and one as a user share it), sticky like /tmp. */
function ensureSharedDir (dir: string): void {
  if (existsSync(dir)) return
  mkdirSync(dir, { recursive: true })
  try { chmodSync(dir, 0o1777) } catch { /* made by another user meanwhile */ }
}

/** Reserves `port` for this process: true when no live process holds it. */
export function reservePort (port: number, dir = PORT_RESERVATIONS_DIR): boolean {
  if (mine.has(port)) return false
  ensureSharedDir(dir)
  const file = join(dir, String(port))
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' })
      mine.add(port)
      if (!cleanupRegistered) {
        cleanupRegistered = true
        process.on('exit', () => { for (const p of mine) rmSync(join(dir, String(p)), { force: true }) })
      }
      return true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    // Held: take it over only when its process is gone (a test process that was killed).
    let holder = NaN
    try { holder = Number(readFileSync(file, 'utf8')) } catch { /* removed meanwhile: try again */ }
    if (Number.isInteger(holder) && holder > 0 && pidAlive(holder)) return false
    try { rmSync(file, { force: true }) } catch { return false } // another user's, in the sticky directory
  }
  return false
}

/** Whether a server can listen on `port` on every address right now. */
async function bindable (port: number): Promise<boolean> {
  return await new Promise(resolve => {
    const server = createServer()
    server.unref()
    server.once('error', () => resolve(false))
    // No host: the unspecified address (IPv6 dual-stack where available), which conflicts with
    // a listener on any address of the port.
    server.listen({ port, exclusive: true }, () => server.close(() => resolve(true)))
  })
}

/** A port below the ephemeral range, reserved against every other test process, free a moment ago. */
export async function freePort (): Promise<number> {
  const [low, high] = pickRange(ephemeralRange())
  for (let attempt = 0; attempt < 10_000; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1))
    if (!reservePort(port)) continue
    if (await bindable(port)) return port
    // Something listens there (not a test process's reservation): leave it reserved so this
    // process does not try it again, and pick another.
  }
  throw new Error(`no free port in ${low}-${high} after 10000 tries`)
}
