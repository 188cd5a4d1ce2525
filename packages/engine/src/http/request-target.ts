/**
 * The request target as the gateway routes and forwards it. Route matching, every policy and
 * the upstream request see one normalised path, so a backend can never be handed a path the
 * gateway did not check (`/x/../admin`, `/%61dmin`, `//admin`, `/admin%2fsecret`).
 *
 * Normalisation follows Envoy's defaults as Envoy Gateway configures them:
 *  - RFC 3986 §6.2.2: percent-escapes of unreserved characters are decoded (`%61` -> `a`,
 *    `%2E` -> `.`), every other escape has its hex upper-cased, and characters a path cannot
 *    carry raw (`"`, `<`, `{`, bytes above 0x7F, ...) are escaped;
 *  - RFC 3986 §5.2.4: `.` and `..` segments are resolved (never above the root);
 *  - runs of slashes are merged (`mergeSlashes`, default on);
 *  - `%2F` and `%5C` (and a raw `\`, which some servers treat as `/`) follow the listener's
 *    `escapedSlashesAction`: unescape to `/` and redirect the client to the clean path
 *    (default), unescape and forward, reject with 400, or keep them escaped (opt-in, unsafe
 *    with prefix-based policies: a backend that decodes `%2F` serves a path never checked).
 *
 * Request targets (RFC 9112 §3.2): origin-form (`/path?query`) and absolute-form
 * (`http://host/path`, which proxies and some clients send). An absolute-form target is
 * routed on its path, its authority replaces the Host header (§3.2.2), and the request goes
 * upstream in origin-form. Anything else -- asterisk-form, a fragment, a bad escape, userinfo
 * in the authority, a NUL (raw or `%00`) in the path -- is refused with 400.
 *
 * The query is forwarded as received; it is not part of the path policies see.
 */

import type { EscapedSlashesAction, PathNormalizationIR } from '../ir/types.ts'
import { hexValue } from '../util/hex.ts'

/** A listener's normalisation settings with the defaults filled in. */
export interface PathNormalization {
  escapedSlashesAction: EscapedSlashesAction
  mergeSlashes: boolean
}

export const DEFAULT_PATH_NORMALIZATION: PathNormalization = Object.freeze({
  escapedSlashesAction: 'UnescapeAndRedirect',
  mergeSlashes: true
})

export function pathNormalization (ir: PathNormalizationIR | undefined): PathNormalization {
  if (ir === undefined) return DEFAULT_PATH_NORMALIZATION
  return {
    escapedSlashesAction: ir.escapedSlashesAction ?? DEFAULT_PATH_NORMALIZATION.escapedSlashesAction,
    mergeSlashes: ir.mergeSlashes ?? DEFAULT_PATH_NORMALIZATION.mergeSlashes
  }
}

export type RequestTarget =
  | {
    ok: true
    /** Normalised path (what routes match and what goes upstream). */
    path: string
    /** Query without `?`, as received; '' when absent. */
    query: string
    /** Authority of an absolute-form target (it replaces Host); null for origin-form. */
    authority: string | null
    /** The path held escaped slashes that were unescaped and the listener redirects such requests. */
    redirect: boolean
  }
  | { ok: false, why: string }

const HEX = '0123456789ABCDEF'

/**
 * Per ASCII code: 0 = never allowed raw in a path (escape it), 1 = an ordinary path character
 * (RFC 3986 pchar and `/`), 2 = unreserved (an escape of it is decoded).
 */
const CLASS = new Uint8Array(128)
for (const c of "!$&'()*+,;=:@/") CLASS[c.charCodeAt(0)] = 1
for (const c of '-._~') CLASS[c.charCodeAt(0)] = 2
for (let c = 0x30; c <= 0x39; c++) CLASS[c] = 2
for (let c = 0x41; c <= 0x5a; c++) CLASS[c] = 2
for (let c = 0x61; c <= 0x7a; c++) CLASS[c] = 2

const PERCENT = 0x25
const SLASH = 0x2f
const DOT = 0x2e
const BACKSLASH = 0x5c


/**
 * True when `path` is already in normal form: only ordinary characters, no escapes, no
 * backslash, no empty or dot segments. Almost every request takes this exit (one scan, no
 * allocation).
 */
function isClean (path: string, mergeSlashes: boolean): boolean {
  const n = path.length
  for (let i = 0; i < n; i++) {
    const c = path.charCodeAt(i)
    if (c >= 128 || CLASS[c] === 0) return false
    if (c === SLASH && i + 1 < n) {
      const next = path.charCodeAt(i + 1)
      if (next === SLASH && mergeSlashes) return false
      if (next === DOT) {
        // `/.` starts a dot segment when followed by `/`, the end, or `./` / `.` end.
        const after = i + 2 < n ? path.charCodeAt(i + 2) : SLASH
        if (after === SLASH) return false
        if (after === DOT && (i + 3 >= n || path.charCodeAt(i + 3) === SLASH)) return false
      }
    }
  }
  return true
}

/**
 * Normalises an origin-form path (starting with `/`). Returns the path and whether escaped
 * slashes were unescaped, or a reason to refuse the request.
 */
export function normalizePath (raw: string, options: PathNormalization = DEFAULT_PATH_NORMALIZATION): { path: string, unescapedSlash: boolean } | string {
  if (raw.length === 0 || raw.charCodeAt(0) !== SLASH) return 'the path must start with /'
  if (isClean(raw, options.mergeSlashes)) return { path: raw, unescapedSlash: false }
  return normalizeUnclean(raw, options)
}

/**
 * A path isClean did not pass, normalised. Its own function so that normalizePath, called
 * on every request, stays small: V8 tiers a function up by the bytecode it runs against its
 * size, and with this body in it a clean path's few bytecodes left normalizePath in
 * Sparkplug's code after thousands of requests (bench/README.md, 2026-12-06).
 */
function normalizeUnclean (raw: string, options: PathNormalization): { path: string, unescapedSlash: boolean } | string {
  // Pass 1: percent-encoding normalisation and slash handling, into segments.
  let out = ''
  let unescapedSlash = false
  const n = raw.length
  for (let i = 0; i < n; i++) {
    const c = raw.charCodeAt(i)
    if (c === PERCENT) {
      const hi = i + 2 < n ? hexValue(raw.charCodeAt(i + 1)) : -1
      const lo = hi === -1 ? -1 : hexValue(raw.charCodeAt(i + 2))
      if (lo === -1) return 'the path has a % that does not start a %XX escape'
      const byte = hi * 16 + lo
      i += 2
      // A NUL ends a string in C: a backend (or a file system) would see a shorter path than
      // the one routed and authorised. llhttp already refuses a raw one.
      if (byte === 0) return 'the path has an escaped NUL (%00)'
      if (byte === SLASH || byte === BACKSLASH) {
        switch (options.escapedSlashesAction) {
          case 'RejectRequest': return 'the path has an escaped slash (%2F or %5C)'
          case 'KeepUnchanged': out += byte === SLASH ? '%2F' : '%5C'; continue
          default: out += '/'; unescapedSlash = true; continue
        }
      }
      if (byte < 128 && CLASS[byte] === 2) out += String.fromCharCode(byte)
      else out += '%' + HEX[hi]! + HEX[lo]!
      continue
    }
    if (c === BACKSLASH) {
      switch (options.escapedSlashesAction) {
        case 'RejectRequest': return 'the path has a backslash'
        case 'KeepUnchanged': out += '%5C'; continue
        default: out += '/'; unescapedSlash = true; continue
      }
    }
    if (c < 128 && CLASS[c] !== 0) {
      out += raw[i]
      continue
    }
    // A character a path cannot carry raw. Node hands us the target as latin1, one char per
    // byte, so each is one byte to escape.
    if (c > 0xff) return 'the path has a character that is not a byte'
    if (c === 0) return 'the path has a NUL'
    out += '%' + HEX[c >> 4]! + HEX[c & 15]!
  }

  // Pass 2: merge slashes and resolve dot segments (RFC 3986 §5.2.4), segment by segment.
  const segments = out.split('/')
  const kept: string[] = []
  const last = segments.length - 1
  // segments[0] is '' (the path starts with '/').
  for (let i = 1; i <= last; i++) {
    const s = segments[i]!
    if (s === '.' || s === '..') {
      if (s === '..' && kept.length > 0) kept.pop()
      // A trailing dot segment leaves a directory path: `/a/b/..` -> `/a/`.
      if (i === last) kept.push('')
      continue
    }
    if (s === '' && options.mergeSlashes && i !== last) continue
    kept.push(s)
  }
  return { path: '/' + kept.join('/'), unescapedSlash }
}

/** `scheme://` at the start of a request target (absolute-form). */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//

/** The parts of a request target before normalisation. */
export type SplitTarget =
  | {
    ok: true
    /** Authority of an absolute-form target (it replaces Host); null for origin-form. */
    authority: string | null
    /** The path as received (starts with `/`). */
    rawPath: string
    /** Query without `?`, as received; '' when absent. */
    query: string
  }
  | { ok: false, why: string }

/**
 * Splits `req.url` into authority (absolute-form only), path and query, refusing forms a
 * gateway cannot route. Origin-form targets, nearly every request, cost one indexOf.
 */
export function splitRequestTarget (url: string): SplitTarget {
  let authority: string | null = null
  let rest = url
  if (url.charCodeAt(0) !== SLASH) {
    if (!ABSOLUTE_FORM.test(url)) return { ok: false, why: url === '*' ? 'asterisk-form is only for OPTIONS to the server itself' : 'the request target must be a path or an absolute http(s) URI' }
    const schemeEnd = url.indexOf('://')
    const scheme = url.slice(0, schemeEnd).toLowerCase()
    if (scheme !== 'http' && scheme !== 'https') return { ok: false, why: `scheme ${scheme} cannot be proxied here` }
    const start = schemeEnd + 3
    let end = start
    while (end < url.length) {
      const c = url.charCodeAt(end)
      if (c === SLASH || c === 0x3f /* ? */ || c === 0x23 /* # */) break
      end++
    }
    authority = url.slice(start, end)
    if (authority === '') return { ok: false, why: 'the absolute URI has no host' }
    if (authority.includes('@')) return { ok: false, why: 'userinfo is not allowed in the request target' }
    if (!isValidHost(authority)) return { ok: false, why: 'the absolute URI has an invalid host' }
    rest = url.slice(end)
    if (rest === '' || rest.charCodeAt(0) === 0x3f) rest = '/' + rest
  }
  const q = rest.indexOf('?')
  const rawPath = q === -1 ? rest : rest.slice(0, q)
  if (rest.includes('#')) return { ok: false, why: 'the request target has a fragment' }
  return { ok: true, authority, rawPath, query: q === -1 ? '' : rest.slice(q + 1) }
}

/** `splitRequestTarget` then `normalizePath`: the whole target in one call (tests, tools). */
export function parseRequestTarget (url: string, options: PathNormalization = DEFAULT_PATH_NORMALIZATION): RequestTarget {
  const split = splitRequestTarget(url)
  if (!split.ok) return split
  const normal = normalizePath(split.rawPath, options)
  if (typeof normal === 'string') return { ok: false, why: normal }
  return {
    ok: true,
    path: normal.path,
    query: split.query,
    authority: split.authority,
    redirect: redirectsToNormalPath(normal, options)
  }
}

/** Whether the client is sent to the normalised path (escaped slashes under UnescapeAndRedirect). */
export function redirectsToNormalPath (normal: { unescapedSlash: boolean }, options: PathNormalization): boolean {
  return normal.unescapedSlash && options.escapedSlashesAction === 'UnescapeAndRedirect'
}

/** Characters of a reg-name (RFC 3986 §3.2.2): unreserved, sub-delims and `%` of escapes. */
const REG_NAME = new Uint8Array(128)
for (let c = 0; c < 128; c++) REG_NAME[c] = CLASS[c] === 2 ? 1 : 0
for (const c of "!$&'()*+,;=%") REG_NAME[c.charCodeAt(0)] = 1

/**
 * RFC 9110 §7.2 / RFC 3986 §3.2.2: `uri-host [ ":" port ]`, where uri-host is an IP literal
 * in brackets, or a reg-name of unreserved characters, escapes and sub-delims. A char-code
 * scan: it runs on every request.
 */
export function isValidHost (value: string): boolean {
  const n = value.length
  let i = 0
  if (n > 0 && value.charCodeAt(0) === 0x5b /* [ */) {
    i = 1
    for (; i < n; i++) {
      const c = value.charCodeAt(i)
      if (c === 0x5d /* ] */) break
      if (!((c >= 0x30 && c <= 0x3a) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66) || c === DOT)) return false
    }
    if (i === n) return false
    i++
  } else {
    for (; i < n; i++) {
      const c = value.charCodeAt(i)
      if (c === 0x3a /* : */) break
      if (c >= 128 || REG_NAME[c] === 0) return false
    }
  }
  if (i === n) return true
  if (value.charCodeAt(i) !== 0x3a) return false
  for (i++; i < n; i++) {
    const c = value.charCodeAt(i)
    if (c < 0x30 || c > 0x39) return false
  }
  return true
}

/** Is `name` "host" in any case? (No toLowerCase: this runs for every header of every request.) */
function isHostName (name: string): boolean {
  return name.length === 4 &&
    (name.charCodeAt(0) | 0x20) === 0x68 && (name.charCodeAt(1) | 0x20) === 0x6f &&
    (name.charCodeAt(2) | 0x20) === 0x73 && (name.charCodeAt(3) | 0x20) === 0x74
}

/**
 * Checks the Host header lines of a request (RFC 9112 §3.2: more than one, or an invalid
 * value, is a 400). Reads `rawHeaders`, because Node keeps only the first Host in `headers`.
 */
export function hostHeaderProblem (rawHeaders: readonly string[]): string | null {
  let seen: string | null = null
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!isHostName(rawHeaders[i]!)) continue
    if (seen !== null) return 'more than one Host header'
    seen = rawHeaders[i + 1]!
  }
  if (seen !== null && !isValidHost(seen)) return 'the Host header is not a valid host[:port]'
  return null
}
