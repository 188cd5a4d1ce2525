/**
 * Which endpoint of a backend a new TCP/TLS connection (stream-proxy.ts) or UDP flow
 * (udp-proxy.ts) goes to: each in turn, per backend. One rotation for both, so the two
 * spread load the same way.
 */

import type { BackendIR, EndpointIR } from '../ir/types.ts'

export class EndpointRotation {
  /** Round robin position per backend key, over its endpoints. */
  private readonly next = new Map<string, number>()

  /** The backend's next endpoint (it has at least one: the callers refuse a backend without). */
  pick (backend: BackendIR): EndpointIR {
    const n = backend.endpoints.length
    if (n === 1) return backend.endpoints[0]!
    const i = this.next.get(backend.key) ?? 0
    this.next.set(backend.key, (i + 1) % n)
    return backend.endpoints[i % n]!
  }
}
