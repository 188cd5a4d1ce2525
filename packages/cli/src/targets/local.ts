/**
 * The `--local` target: one standalone instance whose admin server is at `--admin-addr`
 * (127.0.0.1:15000 by default for a proxy, 127.0.0.1:9095 for a controller run by hand).
 * Its listeners are on 127.0.0.1.
 */

import { usageError } from '../errors.ts'
import type { Address, Connection, Target } from './types.ts'

export const DEFAULT_PROXY_ADMIN = '127.0.0.1:15000'
export const DEFAULT_CONTROLLER_ADMIN = '127.0.0.1:9095'

/** Parses `HOST:PORT`, `[v6]:PORT` or `:PORT` (host 127.0.0.1). */
export function parseAdminAddr (text: string): Address {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text.trim())
  const port = m === null ? NaN : Number(m[3])
  if (m === null || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw usageError(`invalid admin address "${text}": use HOST:PORT, e.g. 127.0.0.1:15000`)
  }
  const host = m[1] ?? (m[2] === '' || m[2] === undefined ? '127.0.0.1' : m[2])
  return { host, port }
}

export function formatAddr (a: Address): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`
}

export interface LocalTargetOptions {
  /** `HOST:PORT` of the admin server. */
  adminAddr: string
  /** Who listens there, for the "cannot reach" message. */
  role: 'proxy' | 'controller'
}

export function localTarget (options: LocalTargetOptions): Target {
  const addr = parseAdminAddr(options.adminAddr)
  const shown = formatAddr(addr)
  const unreachable = options.role === 'proxy'
    ? `cannot reach the admin server at ${shown} (is portico running? use --admin-addr)`
    : `cannot reach the controller's admin server at ${shown} (is the controller running? use --admin-addr)`
  return {
    kind: 'local',
    description: shown,
    async connect (): Promise<Connection> {
      return {
        instances: [{
          label: shown,
          adminUrl: `http://${shown}`,
          unreachable,
          reach: async port => ({ host: '127.0.0.1', port })
        }],
        close: async () => {}
      }
    }
  }
}
