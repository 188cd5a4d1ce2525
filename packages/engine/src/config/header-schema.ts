/**
 * Schemas of config strings that end up on the wire as HTTP header names or values. A name or
 * value HTTP cannot carry would pass a loose schema and then fail every request that applies
 * it (Node refuses to send it: ERR_INVALID_HTTP_TOKEN / ERR_INVALID_CHAR, so a 503), so the
 * grammar is checked when the config loads, with the field's file:line:col.
 */

import { Type, type TSchema, type TString, type SchemaOptions } from '@sinclair/typebox'
import { HEADER_NAME_PATTERN, HEADER_VALUE_PATTERN } from '../ir/http-grammar.ts'

export const HEADER_NAME_DESCRIPTION = 'An HTTP header name (an RFC 9110 token: letters, digits and !#$%&\'*+-.^_`|~ only; no spaces, colons or control characters).'
export const HEADER_VALUE_DESCRIPTION = 'An HTTP header value (visible characters up to U+00FF with spaces or tabs between them; no CR, LF, NUL or other control characters, no leading or trailing whitespace).'

/** A header name; `description` says what the name is for (the grammar is appended). */
export function HeaderName (description?: string): TString {
  return Type.String({
    minLength: 1,
    pattern: HEADER_NAME_PATTERN,
    description: description === undefined ? HEADER_NAME_DESCRIPTION : `${description} ${HEADER_NAME_DESCRIPTION}`
  })
}

export function HeaderValue (description?: string): TString {
  return Type.String({
    pattern: HEADER_VALUE_PATTERN,
    description: description === undefined ? HEADER_VALUE_DESCRIPTION : `${description} ${HEADER_VALUE_DESCRIPTION}`
  })
}

/**
 * A map whose keys must match `key`'s pattern. `Type.Record` alone emits only
 * `patternProperties`, which constrains the values of matching keys and lets every other key
 * through unchecked (so `"x bad": v` passed); `propertyNames` makes a non-matching key an
 * error, reported with `key`'s description.
 */
export function KeyedRecord<V extends TSchema> (key: TString, value: V, options: SchemaOptions = {}) {
  const names: Record<string, unknown> = { pattern: key.pattern }
  if (key.description !== undefined) names.description = key.description
  return Type.Record(key, value, { ...options, propertyNames: names })
}

/** A map of header names to values (modifiers, direct responses). */
export function HeaderMap (description: string) {
  return KeyedRecord(HeaderName(), HeaderValue(), { description })
}

/**
 * A URL or path that is sent as-is in a Location header or a request line: whitespace and
 * control characters can never be sent there.
 */
export const NO_WHITESPACE_OR_CONTROLS = '[^\\s\\x00-\\x1f\\x7f]*'
