/**
 * Sealed cookies: a JSON value encrypted with AES-256-GCM (random 96-bit IV, 128-bit tag) and
 * written as `v1.<base64url(iv | ciphertext | tag)>`. The additional authenticated data names
 * what the cookie is for (a login in progress, a session) and for which client, so a cookie
 * sealed for one purpose or policy never opens as another. Anything that does not open --
 * tampered, truncated, another key, another purpose, expired -- reads as absent.
 *
 * Also the cookie header plumbing the OIDC policy needs: read one cookie, drop some before
 * forwarding, and write `Set-Cookie` values.
 */

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import { PorticoError } from '../util/errors.ts'

const VERSION = 'v1.'
const IV_BYTES = 12
const TAG_BYTES = 16

/** A 32-byte key from 64 hex digits. */
export function keyFromHex (hex: string): Buffer {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new PorticoError('PORTICO_BAD_SESSION_KEY', 'a session key is 64 hex digits (256 bits)')
  return Buffer.from(hex, 'hex')
}

/** A key for one purpose derived from a process-wide key (HKDF-SHA256), so uses never share a key. */
export function deriveKey (master: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `portico ${purpose}`, 32))
}

/** Encrypts `value` (JSON) for `aad`; `expiresAt` (seconds since the epoch) is sealed with it. */
export function seal (key: Buffer, aad: string, value: unknown, expiresAt: number): string {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(aad))
  const plain = Buffer.from(JSON.stringify({ v: value, e: expiresAt }))
  const body = Buffer.concat([cipher.update(plain), cipher.final()])
  return VERSION + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')
}

/** The sealed value, or null when the text does not open with this key and aad, or has expired. */
export function open<T> (key: Buffer, aad: string, text: string, now = Date.now() / 1000): T | null {
  if (!text.startsWith(VERSION)) return null
  const raw = Buffer.from(text.slice(VERSION.length), 'base64url')
  if (raw.length < IV_BYTES + TAG_BYTES + 2) return null
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES))
    decipher.setAAD(Buffer.from(aad))
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
    const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()])
    const parsed = JSON.parse(plain.toString('utf8')) as { v: T, e: number }
    if (typeof parsed.e !== 'number' || parsed.e <= now) return null
    return parsed.v
  } catch {
    return null
  }
}

/** The value of cookie `name` in a Cookie header (first occurrence), or null. */
export function readCookie (header: string | string[] | undefined, name: string): string | null {
  if (header === undefined) return null
  const text = Array.isArray(header) ? header.join('; ') : header
  for (const part of text.split(';')) {
    const eq = part.indexOf('=')
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return null
}

/** The Cookie header without the cookies named; undefined when none is left. */
export function withoutCookies (header: string | string[] | undefined, names: ReadonlySet<string>): string | undefined {
  if (header === undefined) return undefined
  const text = Array.isArray(header) ? header.join('; ') : header
  const kept = text.split(';').filter(part => {
    const eq = part.indexOf('=')
    const name = (eq === -1 ? part : part.slice(0, eq)).trim()
    return name !== '' && !names.has(name)
  }).map(p => p.trim())
  return kept.length === 0 ? undefined : kept.join('; ')
}

export interface CookieOptions {
  /** Seconds; 0 deletes the cookie. */
  maxAge: number
  secure: boolean
  path?: string
}

/** A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/ unless given, Secure when asked. */
export function setCookie (name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${options.path ?? '/'}`, `Max-Age=${Math.max(0, Math.floor(options.maxAge))}`, 'HttpOnly', 'SameSite=Lax']
  if (options.maxAge <= 0) parts.push('Expires=Thu, 01 Jan 1970 00:00:00 GMT')
  if (options.secure) parts.push('Secure')
  return parts.join('; ')
}
