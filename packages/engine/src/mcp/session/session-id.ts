/**
 * MCP session ids that carry their own state: which targets the session spans, each
 * target's upstream session id, and the client's initialize parameters. The state is
 * encrypted and authenticated (AES-256-GCM), so the id is opaque to clients and cannot be
 * forged, and any replica holding the same key can rebuild a session it has never seen —
 * no shared store between replicas.
 *
 * Format: `p1.<base64url(iv ‖ ciphertext ‖ tag)>` — visible ASCII, as the spec requires.
 */

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { PorticoError } from '../../util/errors.ts'

export interface SessionState {
  /** Random, so two sessions with the same content have different ids. */
  nonce: string
  /** Backend key the session belongs to (a resumed id must come back to the same backend). */
  backend: string
  /**
   * Per target: its upstream session id (null for targets without one, e.g. stdio), the
   * protocol version it negotiated and the capabilities it announced (names only) — what a
   * replica needs to use an upstream session it did not open.
   */
  targets: Array<{ name: string, session: string | null, version?: string, caps?: string[] }>
  /** What the client sent in `initialize`, to re-initialize targets on another replica. */
  init: { protocolVersion: string, capabilities: Record<string, unknown>, clientInfo: Record<string, unknown> }
}

const PREFIX = 'p1.'

export class SessionIdCodec {
  private readonly key: Buffer

  /** `keyHex`: 64 hex digits; omitted = a random key (ids resumable only by this process). */
  constructor (keyHex?: string) {
    this.key = keyHex !== undefined ? Buffer.from(keyHex, 'hex') : randomBytes(32)
    if (this.key.length !== 32) throw new PorticoError('PORTICO_BAD_SESSION_KEY', 'session key must be 32 bytes (64 hex digits)')
  }

  encode (state: SessionState): string {
    return this.seal(PREFIX, state)
  }

  /** The state in an id, or null if it is not one of ours (wrong key, tampered, garbage). */
  decode (id: string): SessionState | null {
    const state = this.open(PREFIX, id) as SessionState | null
    return state !== null && typeof state.backend === 'string' && Array.isArray(state.targets) ? state : null
  }

  /**
   * Any JSON value as `<prefix><base64url(iv ‖ ciphertext ‖ tag)>`, under the same key: the
   * other tokens Portico hands clients and must get back unchanged (2026-07-28 requestState).
   */
  seal (prefix: string, value: unknown): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()])
    return prefix + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')
  }

  /** What `seal(prefix, …)` sealed, or null (another prefix or key, tampered, garbage, longer than `maxLength`). */
  open (prefix: string, token: string, maxLength = 16_384): unknown {
    if (!token.startsWith(prefix) || token.length > maxLength) return null
    const raw = Buffer.from(token.slice(prefix.length), 'base64url')
    if (raw.length < 12 + 16 + 2) return null
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12))
      decipher.setAuthTag(raw.subarray(raw.length - 16))
      const text = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8')
      return JSON.parse(text) as unknown
    } catch {
      return null
    }
  }

  static nonce (): string {
    return randomBytes(9).toString('base64url')
  }
}
