/**
 * What may be shown of a secret: nothing. The one place that decides which values are
 * secrets, for every view of config and traffic the proxy gives out -- /config_dump, the web
 * UI, porticoctl, trace snapshots, logs. Secrets are replaced by `<redacted>`:
 *
 * - fields that always hold secrets (private keys, client secrets, passwords, htpasswd
 *   entries, tokens, session keys, API keys), by field name (with the parent for
 *   ambiguous names such as `key`), plus any PEM private key wherever it sits;
 * - every value a policy sets on a request header (`requestHeaderModifier.set/add`; in
 *   `transformation.request.set/add`, the string literals of the CEL expression): the
 *   gateway adds them for the backend, the client never sees them, and a provider key or
 *   upstream token is exactly that. Only names in PUBLIC_HEADERS (content-type, user-agent,
 *   x-request-id, ...) are shown. Response headers a policy sets go to every client anyway:
 *   they are shown unless the name is credential-like;
 * - every `env` value of a process a target runs (stdio MCP targets: anything with `cmd`),
 *   and in its `args` the values that look like credentials (see redactArgs);
 * - in URLs (config fields, trace snapshots), a userinfo password and the values of query
 *   parameters named like credentials (token, access_token, api_key, key, sig, code, ...);
 * - in trace snapshots, the values of credential-like headers (authorization, cookie,
 *   x-auth-token, x-goog-api-key, private-token, ...) and of request headers the gateway
 *   set or changed, unless public.
 */

export const REDACTED_VALUE = '<redacted>'

/** Headers whose values are never shown (traces, dumps): credentials and session material. */
export const SENSITIVE_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key'
])

/** Name words that mark a credential: `x-auth-token`, `x-goog-api-key`, `private-token`, `client_secret`. */
const CREDENTIAL_WORDS = new Set([
  'auth', 'authorization', 'authn', 'bearer', 'token', 'secret', 'password', 'passwd', 'pwd', 'pass',
  'apikey', 'key', 'credential', 'credentials', 'cookie', 'signature', 'sig', 'jwt', 'pat', 'otp'
])

/** Word endings that mark one too, for run-together names (`accesstoken`, `clientsecret`). */
const CREDENTIAL_SUFFIXES = ['token', 'secret', 'password', 'passwd', 'apikey', 'credential', 'credentials', 'signature']

/** Query parameter names that hold credentials without saying so (OAuth's authorization code). */
const CREDENTIAL_PARAMS = new Set(['code'])

/**
 * Whether a header, query parameter or flag name looks like it carries a credential. Words
 * are split at `-`, `_`, `.` and camelCase humps: `x-goog-api-key`, `accessToken`.
 */
export function isCredentialName (name: string): boolean {
  const lower = name.toLowerCase()
  if (SENSITIVE_HEADERS.has(lower)) return true
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase().split(/[^a-z0-9]+/)
  return words.some(w => w !== '' && (CREDENTIAL_WORDS.has(w) || CREDENTIAL_SUFFIXES.some(s => w.endsWith(s))))
}

/**
 * Request headers whose values are shown even when a policy set them: standard headers that
 * describe the message, never authenticate it. Any other name a policy sets is redacted.
 */
export const PUBLIC_HEADERS = new Set([
  'accept', 'accept-charset', 'accept-encoding', 'accept-language', 'cache-control', 'connection',
  'content-disposition', 'content-encoding', 'content-language', 'content-length', 'content-type',
  'date', 'expect', 'forwarded', 'from', 'host', 'if-match', 'if-modified-since', 'if-none-match',
  'if-range', 'if-unmodified-since', 'max-forwards', 'origin', 'pragma', 'prefer', 'range', 'referer',
  'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'via', 'traceparent', 'tracestate',
  'baggage', 'b3', 'x-request-id', 'x-correlation-id', 'x-real-ip', 'x-requested-with', 'grpc-timeout'
])

const PUBLIC_PREFIXES = ['x-forwarded-', 'x-b3-', 'access-control-request-']

/**
 * Names the operator marked non-secret (`config.publicHeaders`, env PUBLIC_HEADERS): a
 * process setting, so every view of this process (dumps, traces) agrees. Credential-like
 * names stay redacted whatever is listed.
 */
const markedPublic = new Set<string>()

/** Marks request header names as non-secret for this process (replaces earlier marks). */
export function setPublicHeaders (names: readonly string[]): void {
  markedPublic.clear()
  for (const name of names) markedPublic.add(name.toLowerCase())
}

export function isPublicHeader (name: string): boolean {
  const lower = name.toLowerCase()
  return !isCredentialName(lower) && (PUBLIC_HEADERS.has(lower) || markedPublic.has(lower) || PUBLIC_PREFIXES.some(p => lower.startsWith(p)))
}

/** A query string (no `?`) with credential-named parameters' values redacted; the rest as is. */
export function redactQuery (query: string): string {
  if (query === '') return query
  let changed = false
  const parts = query.split('&').map(part => {
    const eq = part.indexOf('=')
    if (eq === -1) return part
    let name: string
    try {
      name = decodeURIComponent(part.slice(0, eq).replace(/\+/g, ' '))
    } catch {
      name = part.slice(0, eq)
    }
    if (!isCredentialName(name) && !CREDENTIAL_PARAMS.has(name.toLowerCase())) return part
    changed = true
    return `${part.slice(0, eq)}=${REDACTED_VALUE}`
  })
  return changed ? parts.join('&') : query
}

/**
 * A URL, `path?query` or `scheme://user:password@host/...` with the password and any
 * credential-named query parameters redacted (the fragment goes too: it can hold tokens).
 */
export function redactUrl (url: string): string {
  let out = url
  const userinfo = /^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*):[^/?#@]*@/i.exec(out)
  if (userinfo !== null) out = `${userinfo[1]}:${REDACTED_VALUE}@${out.slice(userinfo[0].length)}`
  const q = out.indexOf('?')
  if (q === -1) return out
  const hash = out.indexOf('#', q)
  const query = hash === -1 ? out.slice(q + 1) : out.slice(q + 1, hash)
  const redacted = redactQuery(query)
  return redacted === query ? out : `${out.slice(0, q + 1)}${redacted}${hash === -1 ? '' : out.slice(hash)}`
}

/** Values that are credentials by their shape: provider key prefixes, JWTs, long random strings. */
const CREDENTIAL_SHAPES = [
  /^(sk|pk|rk)[-_][A-Za-z0-9_-]{8,}/, // OpenAI, Stripe, Anthropic (sk-ant-...)
  /^(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{10,}/, // GitHub
  /^glpat-[A-Za-z0-9_-]{10,}/, // GitLab
  /^xox[abposr]-[A-Za-z0-9-]{10,}/, // Slack
  /^AKIA[0-9A-Z]{12,}/, // AWS access key id
  /^AIza[0-9A-Za-z_-]{20,}/, // Google API key
  /^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\./, // a JWT
  /^Bearer\s+\S/i,
  // 32+ characters of letters and digits (hex or base64-ish, no path or dots): a key.
  /^(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_+=-]{32,}$/
]

export function looksLikeCredential (value: string): boolean {
  return CREDENTIAL_SHAPES.some(re => re.test(value))
}

/**
 * A process's arguments with credentials redacted, the rest kept (the command line is what a
 * person debugging a stdio target needs to see): the value after a credential-named flag
 * (`--token X`, `-p X` is not guessed), the value of `--api-key=X` or `API_KEY=X`, a URL's
 * password and credential query parameters, and any argument shaped like a credential.
 * Secrets belong in `env`, which is always redacted.
 */
export function redactArgs (args: readonly string[]): string[] {
  const out: string[] = []
  let afterSecretFlag = false
  for (const arg of args) {
    if (afterSecretFlag && !arg.startsWith('-')) {
      out.push(REDACTED_VALUE)
      afterSecretFlag = false
      continue
    }
    afterSecretFlag = false
    const assignment = /^(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=(.*)$/s.exec(arg)
    if (assignment !== null && isCredentialName(assignment[1]!.replace(/^-+/, ''))) {
      out.push(`${assignment[1]}=${REDACTED_VALUE}`)
    } else if (/^-{1,2}[A-Za-z]/.test(arg) && !arg.includes('=')) {
      afterSecretFlag = isCredentialName(arg.replace(/^-+/, ''))
      out.push(arg)
    } else if (looksLikeCredential(arg)) {
      out.push(REDACTED_VALUE)
    } else {
      out.push(/^[a-z][a-z0-9+.-]*:\/\//i.test(arg) ? redactUrl(arg) : arg)
    }
  }
  return out
}

/**
 * A CEL expression with its string and bytes literals redacted -- a secret written into an
 * expression is a literal -- except an index (`request.headers["x-user"]`, `jwt["sub"]`) and
 * the empty string: the expression's shape, variables and functions stay readable.
 */
export function redactCelLiterals (expr: string): string {
  let out = ''
  let i = 0
  while (i < expr.length) {
    const c = expr[i]!
    let prefix = ''
    if (/[A-Za-z_]/.test(c)) {
      const ident = /^[A-Za-z_][A-Za-z0-9_]*/.exec(expr.slice(i))![0]
      if (!(/^(r|b|rb|br)$/i.test(ident) && (expr[i + ident.length] === '"' || expr[i + ident.length] === "'"))) {
        out += ident
        i += ident.length
        continue
      }
      prefix = ident
      i += ident.length
    } else if (c !== '"' && c !== "'") {
      out += c
      i++
      continue
    }
    const quote = expr.startsWith(expr[i]!.repeat(3), i) ? expr[i]!.repeat(3) : expr[i]!
    const raw = /r/i.test(prefix)
    let j = i + quote.length
    while (j < expr.length && !expr.startsWith(quote, j)) j += !raw && expr[j] === '\\' ? 2 : 1
    const end = Math.min(j + quote.length, expr.length)
    const literal = expr.slice(i, end)
    const index = /\[\s*$/.test(out) && /^\s*\]/.test(expr.slice(end))
    out += index || j === i + quote.length ? prefix + literal : `${prefix}${quote}${REDACTED_VALUE}${quote}`
    i = end
  }
  return out
}

/** Field names that always hold secrets. */
const SECRET_FIELDS = new Set(['clientSecret', 'client_secret', 'password', 'htpasswd', 'token', 'secret', 'sessionKey', 'privateKey', 'accessKeyId', 'secretAccessKey', 'sessionToken'])

/** Field names that hold secrets under a given parent field. */
const SECRET_UNDER: Record<string, Set<string>> = {
  tls: new Set(['key']),
  backendTLS: new Set(['key']),
  // apiKey policy: each entry's key (keyHash stays: it is what the file already shows).
  keys: new Set(['key']),
  // An ai backend's credentials (bedrock: a Bedrock API key); the apiKey policy elsewhere is no secret as a whole.
  auth: new Set(['apiKey'])
}

export function redactSecrets<T> (value: T): T {
  return walk(value, []) as T
}

/**
 * How a header map at `path` (the field names leading to it) is redacted: `request` --
 * headers a policy adds to the request for the backend (all but public names);
 * `shown` -- response and direct-response headers, which every client gets (credential-like
 * names only); null -- not a header map.
 */
function headerMapKind (path: readonly string[]): 'request' | 'shown' | null {
  const parent = path.at(-1)
  const grand = path.at(-2)
  if (parent === 'set' || parent === 'add') {
    if (grand === 'requestHeaderModifier') return 'request'
    if (grand === 'request' && path.at(-3) === 'transformation') return 'request'
    return 'shown'
  }
  return parent === 'headers' ? 'shown' : null
}

function walk (value: unknown, path: string[]): unknown {
  if (typeof value === 'string') {
    if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(value)) return REDACTED_VALUE
    return /^[a-z][a-z0-9+.-]*:\/\/\S*[?@]/i.test(value) ? redactUrl(value) : value
  }
  // An array's items keep its field name, marked, so `headers: [{name, value}]` (a route
  // match) is not taken for a header map.
  if (Array.isArray(value)) return value.map(v => walk(v, [...path, '[]']))
  if (value === null || typeof value !== 'object') return value
  const o = value as Record<string, unknown>
  const parent = path.at(-1) ?? ''
  const headers = headerMapKind(path)
  // A process a target runs (stdio MCP): every env value, credential-like args.
  const process = typeof o.cmd === 'string'
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(o)) {
    if (v === null || v === undefined) {
      out[k] = v
    } else if (SECRET_FIELDS.has(k) || SECRET_UNDER[parent]?.has(k) === true) {
      out[k] = REDACTED_VALUE
    } else if (headers !== null && (typeof v === 'string' || Array.isArray(v))) {
      const secret = headers === 'request' ? !isPublicHeader(k) : isCredentialName(k)
      // A transformation's values are CEL: only their literals are hidden.
      if (secret && headers === 'request' && typeof v === 'string' && path.at(-2) === 'request') out[k] = redactCelLiterals(v)
      else out[k] = secret ? REDACTED_VALUE : walk(v, [...path, k])
    } else if (process && k === 'env' && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.keys(v).map(name => [name, REDACTED_VALUE]))
    } else if (process && k === 'args' && Array.isArray(v)) {
      out[k] = redactArgs(v.map(String))
    } else {
      out[k] = walk(v, [...path, k])
    }
  }
  return out
}

/**
 * Header values for a trace snapshot. Credential-like names are always redacted; with
 * `sentByClient` (a request after policies ran), so is any value the client did not send
 * itself -- set or changed by the gateway -- unless the name is public.
 */
export function redactHeaderValues (headers: Record<string, string>, sentByClient?: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    let secret = isCredentialName(name)
    if (!secret && sentByClient !== undefined && !isPublicHeader(name)) {
      const sent = sentByClient[name]
      secret = (Array.isArray(sent) ? sent.join(', ') : sent) !== value
    }
    out[name] = secret ? REDACTED_VALUE : URL_HEADERS.has(name) ? redactUrl(value) : value
  }
  return out
}

/** Headers whose values are URLs, which can carry a credential query parameter (a redirect's). */
const URL_HEADERS = new Set(['location', 'content-location', 'referer'])
