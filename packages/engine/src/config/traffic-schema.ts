/**
 * Config schemas of the traffic policies that call out to services (remoteRateLimit,
 * extProc) and of route and backend resiliency (retry, requestMirror, backendTLS, health).
 * Part of the config file's schema (config/schema.ts places them).
 */

import { Type } from '@sinclair/typebox'
import { DURATION_PATTERN } from '../util/duration.ts'
import { SECRET_FILE } from './secret-fields.ts'

const strict = { additionalProperties: false } as const

function StringEnum<const T extends readonly string[]> (values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })
}

function Duration (description: string) {
  return Type.String({ pattern: DURATION_PATTERN, description: `${description} A duration such as 500ms, 10s or 1m.` })
}

const ServiceHost = Type.String({ minLength: 1, description: 'The gRPC service: host:port or http://host:port (plaintext), https://host:port (TLS).' })

const FailureMode = (what: string) => StringEnum(['failClosed', 'failOpen'], { description: `When the ${what} fails, is unreachable or does not answer in time: failClosed (default) answers 500; failOpen lets the request through.` })

export const RemoteRateLimitSchema = Type.Object({
  host: ServiceHost,
  domain: Type.String({ minLength: 1, description: 'RateLimitRequest.domain: the service\'s configuration the descriptors are matched in.' }),
  descriptors: Type.Array(Type.Object({
    entries: Type.Array(Type.Object({
      key: Type.String({ minLength: 1, description: 'Descriptor key, as in the service\'s configuration.' }),
      value: Type.String({ minLength: 1, description: 'CEL expression giving the value (a string, number or bool), e.g. request.headers["x-user"], jwt.sub or "static"; in descriptors of type tokens also llm (requestModel, model, streaming, operation, provider), e.g. llm.model: such a descriptor is sent once the ai backend has read the request. A value that fails to evaluate or is empty leaves the whole descriptor out.' })
    }, strict), { minItems: 1, description: 'Hierarchical key/value entries.' }),
    type: Opt(StringEnum(['requests', 'tokens'], { description: 'What the descriptor counts: requests (default; one hit per request) or tokens (LLM tokens of ai backends: checked without a hit on the request, then the answer\'s total tokens sent as hits_addend).' })),
    limitOverride: Opt(Type.String({ minLength: 1, maxLength: 4096, description: 'CEL expression giving a map {requestsPerUnit, unit} (unit: second, minute, hour, day, month or year), sent as the descriptor\'s limit: the service applies it instead of its configured limit (agentgateway\'s limitOverride), e.g. jwt.tier == "gold" ? {"requestsPerUnit": 100000, "unit": "day"} : {"requestsPerUnit": 1000, "unit": "day"}. A value that is not one leaves the override off.' }))
  }, strict), { minItems: 1, description: 'Descriptors sent with each request; the request is over the limit when any is.' }),
  failureMode: Opt(FailureMode('rate limit service')),
  timeout: Opt(Duration('How long to wait for the service; default 1s.'))
}, { ...strict, description: 'Global rate limiting by Envoy\'s rate limit service (gRPC envoy.service.ratelimit.v3.RateLimitService): OVER_LIMIT answers 429 "rate limit exceeded" with the service\'s headers.' })

const HeaderSendMode = StringEnum(['send', 'skip'], { description: 'send (default) or skip.' })
const BodySendMode = StringEnum(['none', 'buffered', 'streamed', 'fullDuplexStreamed'], { description: 'none (default): not sent; buffered: read whole (up to maxBodyBytes) and sent in one message; streamed: each chunk sent as it arrives and answered before the next (a body mutation replaces that chunk); fullDuplexStreamed: chunks and answers flow both ways at once, the processor\'s streamed_response chunks are the new body. In every mode the body is held (up to maxBodyBytes) until the processor has answered all of it.' })
/** Envoy Gateway's spelling (EnvoyExtensionPolicy extProc processingMode.request.body / response.body). */
const EgBodyMode = Type.Object({
  body: Opt(StringEnum(['Buffered', 'Streamed', 'FullDuplexStreamed'], { description: 'Envoy Gateway\'s name for requestBodyMode / responseBodyMode: Buffered, Streamed or FullDuplexStreamed (BufferedPartial is not supported).' }))
}, { ...strict, description: 'Envoy Gateway\'s form of the body mode (set this or the flat ...BodyMode field, not both).' })

export const ExtProcSchema = Type.Object({
  host: ServiceHost,
  failureMode: Opt(FailureMode('processor')),
  timeout: Opt(Duration('How long to wait for each answer of the processor; default 1s.')),
  processingMode: Opt(Type.Object({
    requestHeaderMode: Opt(HeaderSendMode),
    responseHeaderMode: Opt(HeaderSendMode),
    requestBodyMode: Opt(BodySendMode),
    responseBodyMode: Opt(BodySendMode),
    request: Opt(EgBodyMode),
    response: Opt(EgBodyMode),
    allowModeOverride: Opt(Type.Boolean({ description: 'Honour the processor\'s mode_override on the request headers answer (its body modes, response header mode; never to or from fullDuplexStreamed). Default false.' }))
  }, { ...strict, description: 'Which parts of the exchange the processor gets (Envoy\'s ProcessingMode; BUFFERED_PARTIAL and trailers are not supported).' })),
  maxBodyBytes: Opt(Type.Integer({ minimum: 1, maximum: 67_108_864, description: 'Largest body held for or from the processor, in every body mode; default 1048576. A larger request body is refused with 413; a larger response body, or a larger body from the processor, is a failure of the processor (failureMode decides).' }))
}, { ...strict, description: 'External processing (Envoy\'s gRPC envoy.service.ext_proc.v3.ExternalProcessor): a service sees and may change request and response headers and bodies, or answer itself.' })

export const RetrySchema = Type.Object({
  attempts: Opt(Type.Integer({ minimum: 0, maximum: 10, description: 'Retries after the first try (Gateway API HTTPRouteRetry attempts): 2 means at most 3 calls. Default 1.' })),
  codes: Opt(Type.Array(Type.Integer({ minimum: 400, maximum: 599 }), { description: 'Backend response statuses that are retried; default [500, 502, 503, 504]. Connection failures are always retried.' })),
  backoff: Opt(Duration('Wait before each retry; default 25ms.'))
}, { ...strict, description: 'Retry failed backend calls (Gateway API HTTPRouteRetry). Each retry picks a backend by weight again. Requests whose body does not fit 1 MiB are not retried.' })

const MirrorSchema = Type.Object({
  backend: Type.Object({
    host: Type.String({ minLength: 1, description: 'The mirror: host:port, http://host:port or https://host:port.' })
  }, { ...strict, description: 'Where the copies go.' }),
  percentage: Opt(Type.Number({ minimum: 0, maximum: 100, description: 'Share of requests mirrored, 0-100; default 100.' }))
}, { ...strict, description: 'One mirror.' })

export const RequestMirrorSchema = Type.Union([MirrorSchema, Type.Array(MirrorSchema, { minItems: 1 })], {
  description: 'Gateway API RequestMirror: a copy of each request (headers and body) goes to another backend too, fire and forget; its answer is ignored. One mirror or a list.'
})

export const BackendTlsSchema = Type.Object({
  root: Opt(Type.String({ minLength: 1, $comment: SECRET_FILE, description: 'PEM file of the CA certificates the backend\'s certificate must chain to (relative to the config file; in cluster resources a secretRef). Default: the system\'s roots.' })),
  hostname: Opt(Type.String({ minLength: 1, description: 'Name sent as SNI and checked against the backend\'s certificate. Default: the backend\'s host.' })),
  cert: Opt(Type.String({ minLength: 1, $comment: SECRET_FILE, description: 'PEM client certificate file for mutual TLS (with key); in cluster resources a secretRef.' })),
  key: Opt(Type.String({ minLength: 1, $comment: SECRET_FILE, description: 'PEM private key file of the client certificate; in cluster resources a secretRef.' })),
  insecure: Opt(Type.Boolean({ description: 'Do not verify the backend\'s certificate (testing only). Default false.' }))
}, { ...strict, description: 'TLS to this backend (the backend is called over HTTPS even without https://): trusted roots, server name, client certificate.' })

export const BackendHealthSchema = Type.Object({
  consecutiveFailures: Opt(Type.Integer({ minimum: 1, maximum: 1000, description: 'Consecutive failures (connection errors, timeouts, 5xx answers) that eject an endpoint; default 5.' })),
  ejectionDuration: Opt(Duration('How long an ejected endpoint gets no requests; default 30s.'))
}, { ...strict, description: 'Passive health (outlier ejection) of the backend\'s endpoints: failing endpoints are skipped for a while; with every endpoint ejected the backend answers 503 "no healthy backends".' })

export const BackendHttpSchema = Type.Object({
  version: Opt(Type.Union([Type.Literal('HTTP1'), Type.Literal('HTTP2')], { description: 'HTTP1 (default): HTTP/1.1 (gRPC requests still go over HTTP/2). HTTP2: h2c with prior knowledge to an http backend, h2 by ALPN to an https one (HTTP/1.1 if the server does not offer h2).' }))
}, { ...strict, description: 'How the backend is spoken to (agentgateway\'s backend `http` policy).' })

function Opt<T extends Parameters<typeof Type.Optional>[0]> (schema: T) {
  return Type.Optional(schema)
}
