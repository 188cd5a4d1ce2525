/**
 * What HTTP can carry in a header, as patterns (JSON Schema and RegExp alike): the config
 * schema (config/header-schema.ts) checks the YAML file with them, ir/validate.ts checks
 * every IR, so no config source can install a name or value Node would refuse to send
 * (ERR_INVALID_HTTP_TOKEN / ERR_INVALID_CHAR: every request that applies it would fail).
 */

/** RFC 9110 §5.1: field-name = token; tchar = "!" / "#" / "$" / ... / DIGIT / ALPHA. */
export const HEADER_NAME_PATTERN = '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$'

/**
 * RFC 9110 §5.5 field-value: field-vchars (VCHAR / obs-text, i.e. up to U+00FF) with spaces
 * or tabs only between them. No CR, LF, NUL or other control characters (header injection;
 * Node refuses them), and no leading or trailing whitespace (recipients strip it, so the value
 * sent would not be the one written).
 */
export const HEADER_VALUE_PATTERN = '^(?:[\\x21-\\x7e\\x80-\\xff](?:[\\t\\x20-\\x7e\\x80-\\xff]*[\\x21-\\x7e\\x80-\\xff])?)?$'

const HEADER_NAME = new RegExp(HEADER_NAME_PATTERN)
const HEADER_VALUE = new RegExp(HEADER_VALUE_PATTERN)

export function isHeaderName (name: string): boolean {
  return HEADER_NAME.test(name)
}

export function isHeaderValue (value: string): boolean {
  return HEADER_VALUE.test(value)
}

/** tchar over ASCII, 1 where allowed: isToken loops over it (names and methods are short and flat). */
export const TCHAR = new Uint8Array(128)
for (const c of '!#$%&\'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz') TCHAR[c.charCodeAt(0)] = 1

/** A token (a header name, a method), checked as the HTTP/1.1 client writes and reads heads. */
export function isToken (s: string): boolean {
  const n = s.length
  if (n === 0) return false
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 128 || TCHAR[c] === 0) return false
  }
  return true
}

/** A character no field value may carry (hasInvalidFieldChar). */
const INVALID_FIELD_CHAR = /[^\t\x20-\x7e\x80-\xff]/

/**
 * True when `s` holds a character no field value may carry: a control character other than
 * HTAB (CR, LF and NUL among them: header injection), DEL, or anything above U+00FF.
 *
 * A RegExp rather than a charCodeAt loop: values Portico builds (a `traceparent`, a joined
 * X-Forwarded-For) are concatenations and slices, which a loop reads a character at a time
 * through V8's slow path for such strings, while the RegExp flattens a concatenation once
 * and scans natively. The `traceparent` of a traced request cost the HTTP/1.1 client ~3,300
 * instructions with the loop, ~1,600 with this (bench/tracing-instructions.ts).
 */
export function hasInvalidFieldChar (s: string): boolean {
  return INVALID_FIELD_CHAR.test(s)
}

/** The traceparent vouchTraceparent last vouched for ('' before any), and its header line ('' until asked for). */
let vouched = ''
let vouchedLine = ''

/**
 * Vouches for a `traceparent` value tracing wrote itself from hex ids (trace/otel-sdk.ts), so
 * the HTTP/1.1 client (http/h1-request.ts) writes it without checking name or value. One
 * slot: the backend call's head is built right after the header is set
 * (pipeline/backend-call.ts); if another request vouched in between, this one's header is
 * checked like any other. Only for a value valid by how it was made: any string equal to it
 * passes, whoever wrote that one. `line`, when tracing has it already, is the header as the
 * head carries it (`traceparent: <value>\r\n`, a slice of the unsampled ids' pool), so the
 * head adds one string rather than three. Kept here, beside the checks it skips, because both
 * rooms import this one and trace/ may not import http/ (docs/architecture.md).
 *
 * Why: checking the header's name and scanning its value were ~1,600 of the ~5,200
 * instructions that configuring tracing added to every proxied request
 * (bench/tracing-instructions.ts; docs/tracing-cost-log.md, second and sixth rounds).
 */
export function vouchTraceparent (value: string, line?: string): void {
  vouched = value
  vouchedLine = line ?? ''
}

/** The header line (`traceparent: <value>\r\n`) of `value` if it is the traceparent last vouched for; null if not. */
export function vouchedTraceparentLine (value: string): string | null {
  if (value !== vouched) return null
  return vouchedLine !== '' ? vouchedLine : (vouchedLine = 'traceparent: ' + value + '\r\n')
}
