/**
 * Requests the admin UI sends through this proxy's own listeners (the trace viewer's "send",
 * the MCP playground): an undici dispatcher whose every connection goes to one listener of
 * this process, whatever host the URL names. The URL's host is only the Host header (and the
 * TLS server name), never resolved — as `porticoctl proxy trace -- URL` does. Only ports of
 * this proxy's listeners are accepted, so the admin server cannot be used to reach anything
 * else.
 */

import type { Agent } from 'undici'
import { PorticoError, undici } from '@portico/engine'
import type { AdminView } from './view.ts'

export interface ListenerTarget {
  /** Where to connect: the bind address, or loopback for a wildcard bind. */
  address: string
  port: number
  protocol: 'HTTP' | 'HTTPS'
}

/** The listener on `port`; PORTICO_NOT_A_LISTENER for a port that is not one of this proxy's listeners. */
export function listenerTarget (view: Pick<AdminView, 'addresses'>, port: unknown): ListenerTarget {
  const binds = view.addresses()
  const bind = binds.find(b => b.port === port)
  if (bind === undefined) {
    const ports = binds.map(b => b.port).join(', ')
    throw new PorticoError('PORTICO_NOT_A_LISTENER', `port ${String(port)} is not a listener of this proxy (listeners: ${ports === '' ? 'none' : ports})`)
  }
  const address = bind.address === '' || bind.address === '0.0.0.0' ? '127.0.0.1' : bind.address === '::' ? '::1' : bind.address
  return { address, port: bind.port, protocol: bind.protocol === 'HTTPS' ? 'HTTPS' : 'HTTP' }
}

/**
 * A dispatcher that connects every request to `target`. `insecure` skips certificate
 * verification (HTTPS listeners with self-signed certificates).
 */
export function listenerDispatcher (target: ListenerTarget, options: { insecure?: boolean, timeoutMs?: number } = {}): Agent {
  const { Agent: UndiciAgent, buildConnector } = undici()
  const connect = buildConnector({ rejectUnauthorized: options.insecure !== true, timeout: 10_000 })
  return new UndiciAgent({
    headersTimeout: options.timeoutMs ?? 30_000,
    bodyTimeout: options.timeoutMs ?? 30_000,
    connect: (opts, callback) => {
      // `host` (the URL's host) stays: undici derives the TLS server name from it.
      connect({ ...opts, hostname: target.address, port: String(target.port) }, callback)
    }
  })
}

/** `http(s)://host[:port]` for a listener, keeping the host people asked for. */
export function listenerOrigin (target: ListenerTarget, host: string): string {
  return `${target.protocol === 'HTTPS' ? 'https' : 'http'}://${host}`
}
