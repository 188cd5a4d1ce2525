/**
 * htpasswd files (Apache's format): `user:hash` per line, with bcrypt (`$2y$`, `$2a$`,
 * `$2b$`), apr1 MD5 (`$apr1$`) and SHA-1 (`{SHA}`) hashes. bcryptjs and apache-md5 do the
 * hashing; verified credentials are remembered briefly so a busy client does not pay for a
 * deliberately slow bcrypt on every request.
 */

import { createHash, timingSafeEqual } from 'node:crypto'
import type Bcrypt from 'bcryptjs'
import { lazyRequire } from '../util/lazy-require.ts'

// The hashing libraries load when a verifier is made for a file with such hashes (the config's
// compile step), never by a request, and not at all for a config without basic auth (issue 54).
const bcryptjs = lazyRequire<typeof Bcrypt>('bcryptjs')
// apache-md5 is CommonJS exporting the function itself; its types claim an ES default.
const apacheMd5 = lazyRequire<(password: string, salt?: string) => string>('apache-md5')

export interface HtpasswdEntry {
  user: string
  hash: string
}

/** One line that is not `user:hash` with a supported hash: its number and what is wrong, never its text. */
export interface HtpasswdLineError {
  line: number
  problem: string
}

/**
 * Parses the file; returns entries and the lines that are not entries. Errors name a line by
 * its number only: the text may be a secret (a password hash, or a file such as /etc/shadow
 * named by mistake), and errors end up in logs and in --validate's output.
 */
export function parseHtpasswd (text: string): { entries: HtpasswdEntry[], errors: HtpasswdLineError[] } {
  const entries: HtpasswdEntry[] = []
  const errors: HtpasswdLineError[] = []
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) return
    const colon = line.indexOf(':')
    if (colon <= 0) {
      errors.push({ line: i + 1, problem: 'expected user:hash' })
      return
    }
    const hash = line.slice(colon + 1)
    if (!/^\$2[aby]\$\d\d\$/.test(hash) && !hash.startsWith('$apr1$') && !hash.startsWith('{SHA}')) {
      errors.push({ line: i + 1, problem: 'unsupported hash (use bcrypt, apr1 or SHA)' })
      return
    }
    entries.push({ user: line.slice(0, colon), hash })
  })
  return { entries, errors }
}

function equal (a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

async function matches (password: string, hash: string): Promise<boolean> {
  if (hash.startsWith('$2')) return await bcryptjs().compare(password, hash.replace(/^\$2y\$/, '$2b$'))
  if (hash.startsWith('$apr1$')) return equal(apacheMd5()(password, hash), hash)
  return equal(`{SHA}${createHash('sha1').update(password).digest('base64')}`, hash)
}

const CACHE_TTL_MS = 5 * 60_000
const CACHE_MAX = 1000

export class HtpasswdVerifier {
  private readonly users: Map<string, string>
  /** sha256(user:password) of recently verified pairs → expiry. */
  private readonly verified = new Map<string, number>()

  constructor (entries: HtpasswdEntry[]) {
    this.users = new Map(entries.map(e => [e.user, e.hash]))
    if (entries.some(e => e.hash.startsWith('$2'))) bcryptjs()
    if (entries.some(e => e.hash.startsWith('$apr1$'))) apacheMd5()
  }

  async verify (user: string, password: string): Promise<boolean> {
    const hash = this.users.get(user)
    if (hash === undefined) return false
    const key = createHash('sha256').update(`${user}:${password}`).digest('base64')
    const until = this.verified.get(key)
    if (until !== undefined && until > Date.now()) return true
    if (!(await matches(password, hash))) return false
    if (this.verified.size >= CACHE_MAX) this.verified.delete(this.verified.keys().next().value as string)
    this.verified.set(key, Date.now() + CACHE_TTL_MS)
    return true
  }
}
