/**
 * Config schemas of the HTTP policies that shape requests and responses in the proxy
 * itself: localRateLimit, transformation, csrf, requestRedirect, urlRewrite and cors. Part of
 * the config file's schema (config/schema.ts places them at each attachment level).
 * Redirect, rewrite and CORS follow the Gateway API's HTTPRoute filters field for field, so
 * the controller maps those filters onto them one to one.
 */

import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { DURATION_PATTERN } from '../util/duration.ts'
import { HEADER_NAME_DESCRIPTION, KeyedRecord, NO_WHITESPACE_OR_CONTROLS } from './header-schema.ts'
import { HEADER_NAME_PATTERN } from '../ir/http-grammar.ts'

const strict = { additionalProperties: false } as const

function Opt<T extends TSchema> (schema: T) {
  return Type.Optional(schema)
}

function StringEnum<const T extends readonly string[]> (values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })
}

const HeaderNamePattern = HEADER_NAME_PATTERN
const HeaderName = (description: string) => Type.String({ minLength: 1, pattern: HeaderNamePattern, description })

/** A Gateway API PreciseHostname: no wildcard, no port. */
const PreciseHostname = (description: string) => Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$',
  description
})

/** A cost budget: a decimal of the pricing currency with at most 6 decimals (a string keeps it as written). */
const CostAmount = (description: string) => Type.Union([
  Type.String({ pattern: '^\\s*[0-9]{1,9}(\\.[0-9]{1,6})?\\s*$', description }),
  Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000_000, description })
], { description })

export const LocalRateLimitSchema = Type.Array(Type.Object({
  maxTokens: Opt(Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Size of the bucket: the largest burst admitted. Buckets start full. Required for requests and tokens buckets.' })),
  tokensPerFill: Opt(Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Tokens added at each fill (the bucket never holds more than maxTokens). Required for requests and tokens buckets.' })),
  fillInterval: Type.String({ pattern: DURATION_PATTERN, description: 'Time between fills, e.g. 1s, 100ms, 1m or 24h.' }),
  type: Opt(StringEnum(['requests', 'tokens', 'cost'], { description: 'What a token counts: requests (default; one per request, taken on admission), tokens (LLM tokens of ai backends: a request needs the bucket not empty, and the answer\'s total tokens are taken when it reports its usage) or cost (the cost of ai backends\' answers from their pricing, in currency: a request needs the budget not spent, and the answer\'s exact cost is taken; maxCost says the budget).' })),
  maxCost: Opt(CostAmount('type cost: the budget (the bucket\'s size), in the pricing currency, e.g. "5" or "0.25". Buckets start full.')),
  costPerFill: Opt(CostAmount('type cost: what each fill adds back (never above maxCost); default maxCost, a whole budget per fillInterval.')),
  currency: Opt(Type.String({ minLength: 1, maxLength: 16, pattern: '^[A-Za-z0-9_-]+$', description: 'type cost: the currency of the budget (default USD); answers priced in another currency are not charged.' })),
  key: Opt(Type.String({ minLength: 1, maxLength: 1024, description: 'CEL expression naming the bucket per request: one bucket per distinct value (a string, number or bool), e.g. jwt.sub, apiKey.name or llm.model. Buckets of type tokens and cost also see llm (requestModel, model, streaming, operation, provider) and are decided when the ai backend has read the request. A request whose key does not evaluate to a non-empty value is not limited by this bucket.' })),
  maxKeys: Opt(Type.Integer({ minimum: 8, maximum: 1_000_000, description: 'With key: most buckets kept (default 10000, 64 bytes each); a new key beyond that replaces the least recently used bucket of its set of 8.' }))
}, { ...strict, description: 'A token bucket.' }), {
  minItems: 1,
  description: 'Rate limit kept in this proxy: token buckets, all of which must have a token for a request to pass; otherwise 429 "rate limit exceeded" with x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset and retry-after.'
})

const transformSide = (side: 'request' | 'response') => {
  const vars = side === 'request'
    ? 'request, source, jwt, apiKey, basicAuth and mcp'
    : 'request, source, jwt, apiKey, basicAuth, mcp and response (code, headers)'
  const cel = (what: string) => Type.String({ minLength: 1, description: `CEL expression over ${vars}: ${what}` })
  return Type.Object({
    set: Opt(KeyedRecord(Type.String({ pattern: HeaderNamePattern, description: HEADER_NAME_DESCRIPTION }), cel('its value overwrites the header (null: header left as it is).'), { description: 'Headers overwritten (or added) with the value of a CEL expression.' })),
    add: Opt(KeyedRecord(Type.String({ pattern: HeaderNamePattern, description: HEADER_NAME_DESCRIPTION }), cel('its value is appended to the header (null: nothing added).'), { description: 'Headers appended to (comma-joined) with the value of a CEL expression.' })),
    remove: Opt(Type.Array(HeaderName('A header name.'), { description: 'Header names removed.' })),
    body: Opt(cel(`its value replaces the ${side} body (a string or bytes as is; a number or bool as text; a list or map as JSON; null: body left as it is). content-length is set to match.`))
  }, { ...strict, description: `Changes to the ${side}: set, then add, then remove, then body.` })
}

export const TransformationSchema = Type.Object({
  request: Opt(transformSide('request')),
  response: Opt(transformSide('response'))
}, { ...strict, description: 'Headers and bodies computed with CEL expressions (compiled when the config loads).' })

export const CsrfSchema = Type.Object({
  additionalOrigins: Opt(Type.Array(Type.String({ pattern: '^https?://[^/?#\\s]+$', description: 'An origin: scheme://host[:port].' }), { description: 'Origins allowed besides the request\'s own host.' }))
}, { ...strict, description: 'Refuse cross-origin state-changing requests (not GET, HEAD or OPTIONS) with 403 "CSRF validation failed": their Origin (or, without one, Sec-Fetch-Site) must name the request\'s own host or one of additionalOrigins.' })

export const PathModifierSchema = Type.Object({
  // Sent as-is in a Location header or the request line: no whitespace or control characters.
  full: Opt(Type.String({ pattern: `^/${NO_WHITESPACE_OR_CONTROLS}$`, maxLength: 1024, description: 'ReplaceFullPath: the path becomes this value (no whitespace or control characters).' })),
  prefix: Opt(Type.String({ pattern: `^(/${NO_WHITESPACE_OR_CONTROLS})?$`, maxLength: 1024, description: 'ReplacePrefixMatch: the path prefix the route matched is replaced by this value (may be empty; no whitespace or control characters). Needs every path match of the route to be a pathPrefix; not at gateway level.' }))
}, { ...strict, description: 'Gateway API HTTPPathModifier: exactly one of full or prefix. The query string is kept.' })

export const RequestRedirectSchema = Type.Object({
  scheme: Opt(StringEnum(['http', 'https'], { description: 'Scheme of the Location; default the request\'s. Without a port, a scheme also sets the port to its default (80, 443).' })),
  hostname: Opt(PreciseHostname('Host of the Location; default the request\'s Host header without its port.')),
  port: Opt(Type.Integer({ minimum: 1, maximum: 65535, description: 'Port of the Location; default the scheme\'s well-known port when scheme is given, else the listener\'s port. Left out of the Location when it is the scheme\'s default.' })),
  path: Opt(PathModifierSchema),
  status: Opt(Type.Unsafe<301 | 302 | 303 | 307 | 308>({ type: 'integer', enum: [301, 302, 303, 307, 308], description: 'Redirect status: 301, 302 (default), 303, 307 or 308.' }))
}, { ...strict, description: 'Answer with a redirect (Gateway API RequestRedirect filter); no backend is called.' })

export const UrlRewriteSchema = Type.Object({
  hostname: Opt(PreciseHostname('Host header sent to the backend.')),
  path: Opt(PathModifierSchema)
}, { ...strict, description: 'Rewrite the request before it goes to the backend (Gateway API URLRewrite filter).' })

export const CorsSchema = Type.Object({
  allowOrigins: Opt(Type.Array(Type.String({ minLength: 1, pattern: '^(\\*|https?://[^/?#\\s]+)$', description: 'An origin scheme://host[:port] (no port: the scheme\'s default), * for any origin, or a host with a * wildcard matching any labels on its left (https://*.example.com).' }), { maxItems: 64, description: 'Origins allowed; * alone allows every origin. Default none.' })),
  allowMethods: Opt(Type.Array(Type.String({ pattern: '^(\\*|[!#$%&\'*+.^_`|~0-9A-Za-z-]+)$', description: 'A method (case-sensitive) or *.' }), { description: 'Access-Control-Allow-Methods of preflights; * alone allows any (with credentials the requested method is echoed). GET, HEAD and POST are always allowed by browsers.' })),
  allowHeaders: Opt(Type.Array(HeaderName('A header name, or *.'), { maxItems: 64, description: 'Access-Control-Allow-Headers of preflights; * alone allows any (with credentials the requested headers are echoed).' })),
  exposeHeaders: Opt(Type.Array(HeaderName('A header name, or *.'), { maxItems: 64, description: 'Access-Control-Expose-Headers: response headers scripts may read besides the safelisted ones; * alone exposes all (with credentials the response\'s header names are listed).' })),
  maxAge: Opt(Type.Union([
    Type.Integer({ minimum: 1, description: 'Seconds.' }),
    Type.String({ pattern: DURATION_PATTERN, description: 'A duration such as 10m (whole seconds are sent).' })
  ], { description: 'Access-Control-Max-Age: how long browsers may cache a preflight answer, in seconds or as a duration. Default: no header (browsers use 5 s).' })),
  allowCredentials: Opt(Type.Boolean({ description: 'Send Access-Control-Allow-Credentials: true (default false); * values are then never sent literally.' }))
}, { ...strict, description: 'Cross-origin resource sharing (Gateway API CORS filter): preflights are answered by the proxy; responses to allowed origins get the CORS headers.' })

export type LocalRateLimitConfig = Static<typeof LocalRateLimitSchema>
export type TransformationConfig = Static<typeof TransformationSchema>
export type CsrfConfig = Static<typeof CsrfSchema>
export type RequestRedirectConfig = Static<typeof RequestRedirectSchema>
export type UrlRewriteConfig = Static<typeof UrlRewriteSchema>
export type CorsConfig = Static<typeof CorsSchema>
export type PathModifierConfig = Static<typeof PathModifierSchema>
