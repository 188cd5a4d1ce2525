/**
 * The standalone configuration file's schema — the single source of validation (Ajv runs it)
 * and of editor completion (scripts/gen-schema.ts writes it to schema/config.schema.json,
 * and CI checks that file is current). TypeBox gives us the TypeScript types of the same
 * schema, so config/to-ir.ts reads exactly what was validated.
 *
 * Field names follow the seed, then agentgateway's simplified config, then the Gateway API.
 */

import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { DURATION_PATTERN } from '../util/duration.ts'
import { BackendHealthSchema, BackendHttpSchema, BackendTlsSchema, ExtProcSchema, RemoteRateLimitSchema, RequestMirrorSchema, RetrySchema } from './traffic-schema.ts'
import { CorsSchema, CsrfSchema, LocalRateLimitSchema, RequestRedirectSchema, TransformationSchema, UrlRewriteSchema } from './http-policy-schema.ts'
import { HeaderMap, HeaderName as HeaderNameOf, KeyedRecord, NO_WHITESPACE_OR_CONTROLS } from './header-schema.ts'
import { HEADER_NAME_PATTERN } from '../ir/http-grammar.ts'
import { SECRET_FILE, SECRET_VALUE } from './secret-fields.ts'

const strict = { additionalProperties: false } as const

function Opt<T extends TSchema> (schema: T) {
  return Type.Optional(schema)
}

/** A string from a fixed set, as a JSON Schema `enum` (clear errors, editor completion). */
function StringEnum<const T extends readonly string[]> (values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options })
}

const Duration = Type.String({ pattern: DURATION_PATTERN, description: 'A duration such as 500ms, 10s, 1m or 1m30s.' })

const HeaderName = HeaderNameOf()

/** `ip:port`, `localhost:port`, `:port` or `off`. */
const Address = Type.String({
  pattern: '^(off|(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]*):\\d{1,5})$',
  description: 'Address to listen on, as ip:port (use [::] for IPv6) or "off".'
})

export const HeaderModifierSchema = Type.Object({
  add: Opt(HeaderMap('Headers appended to any existing value.')),
  set: Opt(HeaderMap('Headers overwritten (or added).')),
  remove: Opt(Type.Array(HeaderName, { description: 'Header names removed.' }))
}, { ...strict, description: 'Gateway API header filter: set, then add, then remove.' })

export const DirectResponseSchema = Type.Object({
  status: Type.Integer({ minimum: 200, maximum: 599, description: 'HTTP status code of the response.' }),
  body: Opt(Type.String({ description: 'Response body (text).' })),
  headers: Opt(HeaderMap('Response headers.'))
}, { ...strict, description: 'Answer the request from the proxy; no backend is called.' })

/** A duration, or `off` for no limit. */
const DurationOrOff = (description: string) => Type.Union([Duration, Type.Literal('off')], { description })

/** Bytes per second a request body must keep up before the response begins (0: no minimum). */
const MinRate = (description: string) => Type.Integer({ minimum: 0, maximum: 1_073_741_824, description })

export const TimeoutSchema = Type.Object({
  requestTimeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'The whole request, from its arrival to the response headers, across retries; 504 when exceeded. 0s: no limit (the Gateway API\'s zero). Default: none.' })),
  backendRequestTimeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'Each backend call, until its response headers; 504 when exceeded (retried when the route retries). 0s: no limit. Default: the gateway\'s timeout.http.backendRequestTimeout (5m), unless requestTimeout is set.' })),
  requestBodyIdleTimeout: Opt(DurationOrOff('This route\'s request body idle timeout, over the gateway\'s timeout.http.requestBodyIdleTimeout.')),
  requestBodyMinRate: Opt(MinRate('This route\'s request body minimum rate in bytes per second, over the gateway\'s timeout.http.requestBodyMinRate; 0: none.')),
  streamIdleTimeout: Opt(DurationOrOff('This route\'s response stream idle timeout, over the gateway\'s timeout.http.streamIdleTimeout.'))
}, { ...strict, description: 'Gateway API HTTPRouteTimeouts (requestTimeout, backendRequestTimeout) and this route\'s overrides of the gateway\'s timeout.http defaults. See docs/configuration.md#timeouts.' })

const AuthModeSchema = StringEnum(['strict', 'optional', 'permissive'], { description: 'strict: a valid token is required; optional: validated when present; permissive: never rejects.' })

export const JwksSchema = Type.Object({
  url: Opt(Type.String({ pattern: '^https?://', description: 'Where the provider publishes its keys, e.g. {issuer}.well-known/jwks.json.' })),
  file: Opt(Type.String({ minLength: 1, $comment: SECRET_FILE, description: 'A JWKS file (relative to the config file); in cluster resources a secretRef.' })),
  keys: Opt(Type.Array(Type.Record(Type.String(), Type.Unknown()), { description: 'Inline JWK keys.' }))
}, { ...strict, description: 'Exactly one of url, file or keys.' })

const JwtAlgorithm = StringEnum(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'])

const JwtProviderFields = {
  issuer: Type.String({ minLength: 1, description: 'Expected "iss".' }),
  audiences: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'Accepted "aud" values (any one).' }),
  jwks: JwksSchema,
  algorithms: Opt(Type.Array(JwtAlgorithm, { minItems: 1, description: 'Allowed algorithms; default every asymmetric one (never none or HMAC).' })),
  leeway: Opt(Duration)
}

export const JwtProviderSchema = Type.Object(JwtProviderFields, { ...strict, description: 'A token issuer.' })

export const McpAuthenticationSchema = Type.Object({
  mode: Opt(AuthModeSchema),
  ...JwtProviderFields,
  scopesSupported: Opt(Type.Array(Type.String(), { description: 'scopes_supported of the protected-resource metadata.' })),
  resourceMetadata: Opt(Type.Record(Type.String(), Type.Unknown(), { description: 'Extra fields of the RFC 9728 protected-resource metadata document.' }))
}, { ...strict, description: 'Validate JWTs on an MCP route (default mode strict); 401 with WWW-Authenticate resource_metadata.' })

export const JwtAuthSchema = Type.Object({
  mode: Opt(AuthModeSchema),
  providers: Opt(Type.Array(JwtProviderSchema, { minItems: 1 })),
  issuer: Opt(JwtProviderFields.issuer),
  audiences: Opt(JwtProviderFields.audiences),
  jwks: Opt(JwksSchema),
  algorithms: JwtProviderFields.algorithms,
  leeway: JwtProviderFields.leeway,
  location: Opt(Type.Object({
    header: Opt(HeaderName),
    prefix: Opt(Type.String()),
    query: Opt(Type.String({ minLength: 1 })),
    cookie: Opt(Type.String({ minLength: 1 }))
  }, { ...strict, description: 'Where the token is: header (default authorization, prefix "Bearer "), query or cookie.' })),
  keepToken: Opt(Type.Boolean({ description: 'Forward the token to the backend (default false: removed once validated).' })),
  claimsToHeaders: Opt(Type.Array(Type.Object({ claim: Type.String({ minLength: 1 }), header: HeaderName }, strict), { description: 'Copy claims into request headers.' }))
}, { ...strict, description: 'Validate JWTs (default mode optional): providers, or one provider inline (issuer, audiences, jwks).' })

export const BasicAuthSchema = Type.Object({
  htpasswd: Type.Union([
    Type.String({ minLength: 1 }),
    Type.Object({ file: Type.String({ minLength: 1 }) }, strict)
  ], { $comment: SECRET_VALUE, description: 'htpasswd lines inline, or {file: path}; bcrypt, apr1 or SHA hashes. In cluster resources a secretRef to the lines.' }),
  // Sent in the WWW-Authenticate header as a quoted string: no control characters or backslashes.
  realm: Opt(Type.String({ pattern: '^[\\t\\x20-\\x5b\\x5d-\\x7e\\x80-\\xff]*$', description: 'Realm of the challenge; default "portico". Sent in WWW-Authenticate: no control characters (CR, LF, ...) or backslashes.' })),
  mode: Opt(StringEnum(['strict', 'optional'], { description: 'strict (default): credentials required; optional: checked when sent.' }))
}, { ...strict, description: 'HTTP Basic authentication against an htpasswd file.' })

export const ApiKeySchema = Type.Object({
  keys: Type.Array(Type.Object({
    key: Opt(Type.String({ minLength: 8, $comment: SECRET_VALUE, description: 'The key in clear (hashed when the config loads); in cluster resources a secretRef.' })),
    keyHash: Opt(Type.String({ pattern: '^sha256:[0-9a-f]{64}$', description: 'sha256:<hex> of the key.' })),
    name: Opt(Type.String({ minLength: 1, description: 'Name for logs and CEL (apiKey.name).' })),
    metadata: Opt(Type.Record(Type.String(), Type.Unknown(), { description: 'Visible to CEL as apiKey.metadata.' }))
  }, { ...strict, description: 'Exactly one of key or keyHash.' }), { minItems: 1 }),
  location: Opt(Type.Object({
    header: Opt(HeaderName),
    prefix: Opt(Type.String()),
    query: Opt(Type.String({ minLength: 1 }))
  }, { ...strict, description: 'header (default authorization with prefix "Bearer ") or query.' })),
  mode: Opt(AuthModeSchema)
}, { ...strict, description: 'API keys (default mode strict).' })

const CelRule = Type.String({ minLength: 1 })
export const AuthorizationSchema = Type.Object({
  rules: Type.Array(Type.Union([
    CelRule,
    Type.Object({ allow: CelRule }, strict),
    Type.Object({ deny: CelRule }, strict),
    Type.Object({ require: CelRule }, strict)
  ], { description: 'a CEL expression (an allow rule), or {allow}, {deny} or {require} with one' }), { description: 'CEL rules over jwt, request, source, apiKey, basicAuth and mcp. Deny wins; a failed require denies; if allow rules exist one must match.' })
}, { ...strict, description: 'Authorization rules.' })

export const ExtAuthzSchema = Type.Object({
  host: Type.String({ minLength: 1, description: 'The authorization service: host:port or http://host:port (plaintext), https://host:port (TLS).' }),
  protocol: Opt(Type.Object({
    grpc: Opt(Type.Object({}, { ...strict, description: 'Envoy\'s gRPC external authorization protocol: envoy.service.auth.v3.Authorization/Check.' })),
    http: Opt(Type.Object({
      path: Opt(Type.String({ pattern: `^/${NO_WHITESPACE_OR_CONTROLS}$`, description: 'Path prefix on the service; the request\'s own path and query are appended (Envoy\'s path_prefix). Default: none.' })),
      allowedResponseHeaders: Opt(Type.Array(HeaderName, { description: 'Headers of a 2xx answer copied onto the upstream request (overwriting). Default: none.' }))
    }, { ...strict, description: 'A plain HTTP service: it gets the request\'s method, path, headers (and body when included); 2xx allows, any other status denies with that status and body.' }))
  }, { ...strict, description: 'Exactly one of grpc or http. Default grpc.' })),
  failureMode: Opt(StringEnum(['deny', 'allow'], { description: 'When the service fails or does not answer in time: deny (default: 403 "external authorization failed: <why>") or allow the request.' })),
  timeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long to wait for the service\'s answer, e.g. 500ms. Default 1s.' })),
  includeRequestHeaders: Opt(Type.Array(HeaderName, { description: 'Only these request headers are sent (names are case-insensitive). Default: all.' })),
  includeRequestBody: Opt(Type.Object({
    maxBytes: Type.Integer({ minimum: 1, maximum: 67_108_864, description: 'Largest body sent; a larger request is refused with 413.' }),
    packAsBytes: Opt(Type.Boolean({ description: 'gRPC: send the body as bytes (raw_body) instead of a UTF-8 string (body). Default false.' }))
  }, { ...strict, description: 'Buffer the request body and send it to the service (the backend still gets it, intact).' })),
  contextExtensions: Opt(Type.Record(Type.String(), Type.String(), { description: 'gRPC: context_extensions sent with every check.' }))
}, { ...strict, description: 'External authorization: each request is checked by a service (Envoy ext_authz gRPC, or HTTP) that allows, with header changes, or denies.' })

export const OidcSchema = Type.Object({
  issuer: Type.String({ pattern: '^https?://', description: 'The OpenID provider\'s issuer URL; its /.well-known/openid-configuration is read.' }),
  clientId: Type.String({ minLength: 1, description: 'Client id registered with the provider.' }),
  clientSecret: Opt(Type.String({ minLength: 1, $comment: SECRET_VALUE, description: 'Client secret (client_secret_basic); in cluster resources a secretRef. Absent: a public client (PKCE only).' })),
  redirectUri: Type.String({ pattern: `^(/|https?://)${NO_WHITESPACE_OR_CONTROLS}$`, description: 'Where the provider sends the browser back: a path on the gateway (e.g. /oauth/callback; the scheme and host come from the request) or an absolute URL. Must be registered with the provider.' }),
  scopes: Opt(Type.Array(Type.String({ pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$' }), { description: 'Scopes requested; default [openid] (openid is always added).' })),
  cookieName: Opt(Type.String({ pattern: '^[A-Za-z0-9_.-]+$', description: 'Session cookie name; default portico_session (the login in progress uses <name>_login).' })),
  sessionKey: Opt(Type.String({ pattern: '^[0-9a-fA-F]{64}$', $comment: SECRET_VALUE, description: 'Hex AES-256 key that encrypts the cookies (in cluster resources a secretRef). Default: derived from config.session.key / SESSION_KEY, else random per process.' })),
  sessionTtl: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'Session lifetime, e.g. 8h. Default: until the ID token expires.' })),
  logoutPath: Opt(Type.String({ pattern: `^/${NO_WHITESPACE_OR_CONTROLS}$`, description: 'Path that logs out; default /logout.' })),
  postLogoutRedirectUri: Opt(Type.String({ pattern: `^(/|https?://)${NO_WHITESPACE_OR_CONTROLS}$`, description: 'Where the browser goes after logout (sent to the provider\'s end_session_endpoint; used directly when the provider has none). Default /.' }))
}, { ...strict, description: 'Browser login with OpenID Connect (authorization code flow with PKCE) and an encrypted session cookie; the ID token\'s claims are jwt in CEL.' })

const PolicyFields = {
  requestHeaderModifier: Opt(HeaderModifierSchema),
  responseHeaderModifier: Opt(HeaderModifierSchema),
  directResponse: Opt(DirectResponseSchema),
  jwtAuth: Opt(JwtAuthSchema),
  basicAuth: Opt(BasicAuthSchema),
  apiKey: Opt(ApiKeySchema),
  authorization: Opt(AuthorizationSchema),
  extAuthz: Opt(ExtAuthzSchema),
  oidc: Opt(OidcSchema),
  remoteRateLimit: Opt(RemoteRateLimitSchema),
  extProc: Opt(ExtProcSchema),
  localRateLimit: Opt(LocalRateLimitSchema),
  transformation: Opt(TransformationSchema),
  csrf: Opt(CsrfSchema),
  requestRedirect: Opt(RequestRedirectSchema),
  urlRewrite: Opt(UrlRewriteSchema),
  cors: Opt(CorsSchema)
}

/** PolicyFields without the named ones, in the same order (the generated schema reads the same). */
function policyFieldsWithout<K extends keyof typeof PolicyFields> (...names: K[]): Omit<typeof PolicyFields, K> {
  return Object.fromEntries(Object.entries(PolicyFields).filter(([k]) => !(names as string[]).includes(k))) as Omit<typeof PolicyFields, K>
}

export const GatewayPoliciesSchema = Type.Object(policyFieldsWithout('directResponse', 'urlRewrite'), { ...strict, description: 'Policies applied to every request on this gateway, before route selection.' })

export const RoutePoliciesSchema = Type.Object({
  ...PolicyFields,
  mcpAuthentication: Opt(McpAuthenticationSchema),
  timeout: Opt(TimeoutSchema),
  retry: Opt(RetrySchema),
  requestMirror: Opt(RequestMirrorSchema)
}, { ...strict, description: 'Policies of the route.' })

const AzureIdField = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' })

/** agentgateway's `backendAuth.azure`: Microsoft Entra ID access tokens for Azure OpenAI / Azure AI. */
const AzureAuthSchema = Type.Object({
  explicitConfig: Opt(Type.Object({
    clientSecret: Opt(Type.Object({
      tenantId: AzureIdField,
      clientId: AzureIdField,
      clientSecret: Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$', $comment: SECRET_VALUE, description: 'The app registration\'s client secret; in cluster resources a secretRef. Redacted in dumps, logs and traces.' })
    }, { ...strict, description: 'A service principal: the OAuth 2.0 client credentials grant with a client secret.' })),
    managedIdentity: Opt(Type.Object({
      userAssignedIdentity: Opt(Type.Object({
        clientId: Opt(AzureIdField),
        objectId: Opt(AzureIdField),
        resourceId: Opt(Type.String({ minLength: 1, maxLength: 1024, pattern: '^/[\\x21-\\x7e]+$' }))
      }, { ...strict, description: 'A user-assigned identity, by exactly one of clientId, objectId or resourceId; absent = the system-assigned identity.' }))
    }, { ...strict, description: 'The Azure Instance Metadata Service (IMDS) of the VM or container the gateway runs on.' })),
    workloadIdentity: Opt(Type.Object({}, { ...strict, description: 'Azure workload identity (AKS): the federated token file AZURE_FEDERATED_TOKEN_FILE exchanged for AZURE_CLIENT_ID in AZURE_TENANT_ID, as the workload identity webhook sets them.' }))
  }, { ...strict, description: 'Exactly one of clientSecret, managedIdentity or workloadIdentity.' })),
  implicit: Opt(Type.Object({}, { ...strict, description: 'Workload identity when its environment variables are set, else managed identity.' })),
  authorityHost: Opt(Type.String({ pattern: '^https?://[^/?#\\s]+/?$', description: 'The Microsoft Entra authority (Portico\'s field; default AZURE_AUTHORITY_HOST, else https://login.microsoftonline.com): a sovereign cloud\'s, or a test endpoint.' })),
  imdsEndpoint: Opt(Type.String({ pattern: '^https?://[^?#\\s]+$', description: 'The managed identity token endpoint (Portico\'s field; default http://169.254.169.254/metadata/identity/oauth2/token): a test endpoint.' }))
}, { ...strict, description: 'Microsoft Entra ID access tokens (ai provider azure), sent as Authorization: Bearer: exactly one of explicitConfig or implicit.' })

/** agentgateway's `backendAuth`: the credential the gateway presents to the backend. */
export const BackendAuthSchema = Type.Object({
  key: Opt(Type.Union([
    Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$' }),
    Type.Object({ file: Type.String({ minLength: 1 }) }, strict)
  ], { $comment: SECRET_VALUE, description: 'The key inline, or {file: path} (read when the config loads and on every reload; surrounding whitespace trimmed). Sent to the backend as Authorization: Bearer <key> (an ai backend: in its provider\'s key header), replacing what the client sent (for bedrock a Bedrock API key); in cluster resources a secretRef. Redacted in dumps, logs and traces.' })),
  passthrough: Opt(Type.Object({}, { ...strict, description: 'ai backends: the token the client presented, validated by the route\'s jwtAuth or apiKey policy, is sent to the provider in its key header (an Azure backend takes a JWT as Authorization: Bearer). A request without a validated token is refused (401).' })),
  azure: Opt(AzureAuthSchema),
  aws: Opt(Type.Object({
    accessKeyId: Opt(Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$', $comment: SECRET_VALUE, description: 'AWS access key id (with secretAccessKey).' })),
    secretAccessKey: Opt(Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$', $comment: SECRET_VALUE, description: 'AWS secret access key (with accessKeyId).' })),
    sessionToken: Opt(Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$', $comment: SECRET_VALUE, description: 'Session token of temporary credentials.' }))
  }, { ...strict, description: 'ai backends of provider bedrock: requests are signed with AWS Signature Version 4 by these keys; {} (or no backendAuth) uses the AWS default credential chain (environment, shared files, web identity / IRSA, container and instance metadata). Redacted in dumps, logs and traces.' })),
  gcp: Opt(Type.Object({
    credential: Opt(Type.Union([
      Type.String({ minLength: 2 }),
      Type.Object({ file: Type.String({ minLength: 1 }) }, strict)
    ], { $comment: SECRET_VALUE, description: 'A Google Cloud service-account key (its JSON inline, or {file: path}, read when the config loads); in cluster resources a secretRef. Default: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, then the metadata server: workload identity). Redacted in dumps.' }))
  }, { ...strict, description: 'Google Cloud OAuth2 access tokens (ai provider vertex): from credential, else Application Default Credentials.' }))
}, { ...strict, description: 'The credential Portico presents to the backend (agentgateway\'s backendAuth): exactly one of key, passthrough, aws, gcp or azure.' })

/** What a guard's refusal says: the client gets it in its own format's error shape. */
const GuardRejection = Type.Object({
  status: Opt(Type.Integer({ minimum: 400, maximum: 599, description: 'HTTP status of the refusal. Default 403.' })),
  message: Opt(Type.String({ minLength: 1, maxLength: 1024, description: 'The error message the client reads. Default: "the request was rejected by a guardrail (<guard>)" (or "the response ...").' }))
}, { ...strict, description: 'The refusal a reject gives, in the client format\'s error shape (OpenAI: error.type permission_error; Anthropic: permission_error).' })

const GuardFailureMode = Type.Union([Type.Literal('open'), Type.Literal('closed')], { description: 'When the guard service fails (timeout, connection, a status other than 200, an answer not as documented): open lets the text through unchanged, closed refuses it (503). Default closed.' })

export const PromptGuardRegexSchema = Type.Object({
  action: Type.Union([Type.Literal('reject'), Type.Literal('mask')], { description: 'reject: refuse the request (or the answer) when any rule matches; mask: replace every match with <NAME> (the builtin\'s name, e.g. <EMAIL_ADDRESS>, or the rule\'s name upper-cased; <MASKED> without one).' }),
  rules: Type.Array(Type.Object({
    builtin: Opt(Type.Union([Type.Literal('Email'), Type.Literal('PhoneNumber'), Type.Literal('CreditCard'), Type.Literal('Ssn'), Type.Literal('ApiKey')], { description: 'A built-in detector: Email, PhoneNumber (North American and +country numbers), CreditCard (13-19 digits passing the Luhn check), Ssn (US, ddd-dd-dddd with valid area, group and serial), ApiKey (OpenAI sk-, Anthropic sk-ant-, AWS AKIA, GitHub ghp_/gho_/ghu_/ghs_/ghr_, Slack xox?-, Google AIza).' })),
    pattern: Opt(Type.String({ minLength: 1, maxLength: 4096, description: 'A regular expression in RE2 syntax, run in linear time (what only a backtracking engine can run — lookaround, backreferences — is refused at load).' })),
    name: Opt(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'A pattern\'s name: its mask is <NAME> (upper-cased), and traces name it.' })),
    maxLength: Opt(Type.Integer({ minimum: 1, maximum: 65536, description: 'A pattern\'s longest match, in characters (default 256): longer matches are not seen, and a streamed answer holds back at most this much text while a match may still be forming.' }))
  }, { ...strict, description: 'Exactly one of builtin or pattern.' }), { minItems: 1 }),
  rejection: Opt(GuardRejection)
}, { ...strict, description: 'Regular expressions over the messages\' text (requests: system prompts, message text and tool results; answers: the text, streamed or whole).' })

export const PromptGuardWebhookSchema = Type.Object({
  url: Type.String({ pattern: '^https?://[^/?#]+', description: 'Where the messages are POSTed (docs/llm.md: the JSON asked and answered).' }),
  timeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long the service may take. Default 5s.' })),
  failureMode: Opt(GuardFailureMode),
  maxResponseSize: Opt(Type.Integer({ minimum: 1024, maximum: 67_108_864, description: 'Largest answer read from the service, in bytes (default 1048576): a larger one is a failure.' })),
  rejection: Opt(GuardRejection)
}, { ...strict, description: 'A service that answers pass, mask (with the messages rewritten) or reject.' })

export const PromptGuardModerationSchema = Type.Object({
  baseURL: Opt(Type.String({ pattern: '^https?://[^/?#]+', description: 'The API\'s base URL: POST {baseURL}/v1/moderations. Default https://api.openai.com.' })),
  model: Opt(Type.String({ minLength: 1, description: 'Default omni-moderation-latest.' })),
  auth: Opt(Type.Object({
    key: Type.Union([
      Type.String({ minLength: 1, pattern: '^[\\x21-\\x7e]+$' }),
      Type.Object({ file: Type.String({ minLength: 1 }) }, strict)
    ], { $comment: SECRET_VALUE, description: 'The API key inline, or {file: path} (read at load and on every reload). Sent as Authorization: Bearer. Redacted in dumps, logs and traces.' })
  }, strict)),
  timeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'Default 5s.' })),
  failureMode: Opt(GuardFailureMode),
  rejection: Opt(GuardRejection)
}, { ...strict, description: 'OpenAI\'s moderation endpoint: text it flags (results[].flagged) is refused.' })

export const PromptGuardSchema = Type.Object({
  regex: Opt(PromptGuardRegexSchema),
  webhook: Opt(PromptGuardWebhookSchema),
  openAIModeration: Opt(PromptGuardModerationSchema)
}, { ...strict, description: 'Exactly one of regex, webhook or openAIModeration.' })

export const PromptGuardsSchema = Type.Object({
  request: Opt(Type.Array(PromptGuardSchema, { description: 'Guards run in order on the request before it is sent to the provider.' })),
  response: Opt(Type.Array(PromptGuardSchema, { description: 'Guards run in order on the answer before the client gets it (streamed answers: regex guards only, as the text goes).' }))
}, { ...strict, description: 'ai backends: guardrails on the messages (agentgateway\'s promptGuard). The request goes through the neutral shape (docs/llm.md) when a guard is set, whatever the formats.' })

export const BackendPoliciesSchema = Type.Object({
  ...policyFieldsWithout('directResponse', 'oidc'),
  backendAuth: Opt(BackendAuthSchema),
  backendTLS: Opt(BackendTlsSchema),
  health: Opt(BackendHealthSchema),
  http: Opt(BackendHttpSchema),
  promptGuard: Opt(PromptGuardsSchema)
}, { ...strict, description: 'Policies applied when this backend is chosen.' })

const ValueMatch = Type.Object({
  exact: Opt(Type.String()),
  regex: Opt(Type.String())
}, { ...strict, description: 'Exactly one of exact or regex.' })

const NamedValueMatch = Type.Object({
  name: Type.String({ minLength: 1 }),
  value: ValueMatch
}, strict)

/** A header no request can carry could never match: its name is checked like a header name. */
const HeaderValueMatch = Type.Object({
  name: HeaderName,
  value: ValueMatch
}, strict)

export const RouteMatchSchema = Type.Object({
  path: Opt(Type.Object({
    exact: Opt(Type.String({ pattern: '^/' })),
    pathPrefix: Opt(Type.String({ pattern: '^/' })),
    regex: Opt(Type.String())
  }, { ...strict, description: 'Exactly one of exact, pathPrefix (segment-aware) or regex (whole path). Default pathPrefix: /.' })),
  headers: Opt(Type.Array(HeaderValueMatch, { description: 'All must match.' })),
  query: Opt(Type.Array(NamedValueMatch, { description: 'All must match (first value of a repeated parameter).' })),
  method: Opt(Type.String({ pattern: '^[A-Z]+$', description: 'HTTP method, upper case.' })),
  grpc: Opt(Type.Object({
    service: Opt(Type.String({ minLength: 1, description: 'Fully qualified service, e.g. helloworld.Greeter (a regex with type RegularExpression).' })),
    method: Opt(Type.String({ minLength: 1, description: 'Method name, e.g. SayHello (a regex with type RegularExpression).' })),
    type: Opt(Type.Union([Type.Literal('Exact'), Type.Literal('RegularExpression')], { description: 'Default Exact.' }))
  }, { ...strict, description: 'A gRPC method (Gateway API GRPCRoute\'s GRPCMethodMatch): service and/or method; matched on the request path /service/method. Not with path.' }))
}, { ...strict, description: 'A request matches when every condition given holds.' })

const TargetName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9-]*$', description: 'Target name: letters, digits and dashes (it becomes the <name>_ prefix of tools and prompts).' })

const McpUrlTarget = Type.Object({
  host: Type.String({ pattern: '^https?://', description: 'URL of the server\'s endpoint, e.g. http://127.0.0.1:3001/mcp.' })
}, strict)

export const McpTargetSchema = Type.Object({
  name: TargetName,
  stdio: Opt(Type.Object({
    cmd: Type.String({ minLength: 1, description: 'Executable; a relative path with a slash is resolved against the config file\'s directory.' }),
    args: Opt(Type.Array(Type.String())),
    env: Opt(KeyedRecord(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'An environment variable name: letters, digits and _, not starting with a digit.' }), Type.String(), { description: 'Extra environment (added to a minimal safe environment).' })),
    cwd: Opt(Type.String({ minLength: 1 })),
    maxProcesses: Opt(Type.Integer({ minimum: 1, maximum: 100_000, description: 'Most processes of this server at once on one proxy: one per session, the warm spare included. Default 8. At the cap a new session first closes the least recently active one with no GET stream open and nothing in flight; with none, initialize gets HTTP 503 and JSON-RPC error -32000.' }))
  }, { ...strict, description: 'A server the proxy launches and talks to over stdin/stdout.' })),
  mcp: Opt(McpUrlTarget),
  sse: Opt(McpUrlTarget),
  maxMessageSize: Opt(Type.Integer({ minimum: 1024, maximum: 1_073_741_824, description: 'Largest message the target may send, in bytes: a stdout line (stdio), a JSON response body or one SSE event. Default 4194304 (4 MiB). A stdio server past it is killed (and restarted on next use); over HTTP that response is dropped. Either way its callers get JSON-RPC error -32000.' })),
  requestTimeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long a request to this target may go unanswered (a progress notification restarts the clock); then the caller gets JSON-RPC error -32001 and the target a cancellation. Default 60s (as the MCP SDK\'s).' }))
}, { ...strict, description: 'An MCP server: exactly one of stdio, mcp (streamable HTTP) or sse (legacy HTTP+SSE).' })

export const McpBackendSchema = Type.Object({
  targets: Type.Array(McpTargetSchema, { minItems: 1 }),
  statefulMode: Opt(StringEnum(['stateful', 'stateless'], { description: 'Default stateful.' })),
  prefixMode: Opt(StringEnum(['conditional', 'always'], { description: 'conditional (default): prefix names with <target>_ only when there are several targets.' })),
  failureMode: Opt(StringEnum(['failClosed', 'failOpen'], { description: 'failClosed (default): a failing target fails list calls; failOpen: it is left out.' })),
  dnsRebindingProtection: Opt(Type.Boolean({ description: 'Validate Origin (localhost, the listener hostname, the route cors policy or allowedOrigins) and, on loopback connections, Host (DNS rebinding protection). Default true.' })),
  allowedOrigins: Opt(Type.Array(Type.String({ minLength: 1 }), { description: 'Origins allowed to call the endpoint (browser clients). Empty: any.' })),
  maxMessageSize: Opt(Type.Integer({ minimum: 1024, maximum: 1_073_741_824, description: 'Largest POST body in bytes; default 4194304 (4 MiB).' })),
  sessionIdleTimeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long a session whose client closed its GET stream, with no request in flight, is kept before its upstream sessions are closed (the client then gets 404 and initializes again). Default 60s.' })),
  maxSessions: Opt(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Most live sessions of this backend on one proxy; past it the least recently active one is closed. Default 1000.' })),
  stdioSessionIdleTimeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long a session holding stdio server processes is kept without a request while its client has no GET stream open and nothing is in flight (a client that left without DELETE); then it is closed and its processes stopped. Default 5m.' }))
}, { ...strict, description: 'MCP servers behind one endpoint ({base_url}/mcp, and /sse for legacy clients).' })

const AiModel = Opt(Type.String({ minLength: 1, description: 'Model that replaces the request\'s model; default: the request\'s own.' }))

const OpenAICompatibleSchema = (what: string) => Type.Object({ model: AiModel }, { ...strict, description: what })

/** Cloud regions and project ids go into host names: letters, digits and dashes only. */
const DNS_LABEL = '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$'

export const AiProviderSchema = Type.Object({
  openAI: Opt(OpenAICompatibleSchema('OpenAI (api.openai.com): chat completions, embeddings, models; or any server that speaks its API (point hostOverride at it).')),
  azure: Opt(Type.Object({
    resourceName: Opt(Type.String({ pattern: DNS_LABEL, description: 'The Azure resource: requests go to <resourceName>.openai.azure.com (resourceType openAI) or <resourceName>.services.ai.azure.com (foundry). Or set hostOverride.' })),
    resourceType: Opt(StringEnum(['openAI', 'foundry'], { description: 'openAI (default): an Azure OpenAI resource; foundry: an Azure AI Foundry project, paths /api/projects/<projectName>/openai/v1/...' })),
    projectName: Opt(Type.String({ pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'The Foundry project (resourceType foundry); default: resourceName.' })),
    deploymentName: Opt(Type.String({ minLength: 1, description: 'The deployment (with a dated apiVersion: in the path /openai/deployments/<name>/...; with the v1 API: the model sent).' })),
    model: AiModel,
    apiVersion: Opt(Type.String({ pattern: '^(v1|preview|\\d{4}-\\d{2}-\\d{2}(-preview)?)$', description: 'v1 (default): the v1 API, /openai/v1/chat/completions; preview: the same with ?api-version=preview; a dated version (2024-10-21): /openai/deployments/<deploymentName>/chat/completions?api-version=<it>.' }))
  }, { ...strict, description: 'Azure OpenAI: the key (backendAuth) goes in the api-key header.' })),
  anthropic: Opt(Type.Object({ model: AiModel }, { ...strict, description: 'Anthropic\'s Messages API (api.anthropic.com): the key (backendAuth) goes in x-api-key.' })),
  gemini: Opt(Type.Object({ model: AiModel }, { ...strict, description: 'Google\'s Gemini API (generativelanguage.googleapis.com): the key (backendAuth) goes in x-goog-api-key.' })),
  vertex: Opt(Type.Object({
    model: AiModel,
    projectId: Type.String({ pattern: '^[a-z][a-z0-9-]{4,28}[a-z0-9]$', description: 'The Google Cloud project.' }),
    region: Type.String({ pattern: DNS_LABEL, description: 'The Vertex AI region (us-central1, europe-west4, global).' })
  }, { ...strict, description: 'Gemini and Anthropic models on Google Vertex AI, OAuth2 access tokens from backendAuth.gcp (default: Application Default Credentials). A model named claude-* speaks Anthropic Messages (rawPredict), any other Gemini (generateContent).' })),
  bedrock: Opt(Type.Object({
    model: AiModel,
    region: Type.String({ pattern: DNS_LABEL, description: 'The AWS region (us-east-1): requests go to bedrock-runtime.<region>.amazonaws.com and are signed for it.' }),
    guardrailIdentifier: Opt(Type.String({ minLength: 1, description: 'A Bedrock guardrail (its id or ARN) applied to every request (Converse guardrailConfig); with guardrailVersion.' })),
    guardrailVersion: Opt(Type.String({ minLength: 1, description: 'The guardrail\'s version (a number or DRAFT); with guardrailIdentifier.' }))
  }, { ...strict, description: 'Amazon Bedrock\'s Converse API: signed with SigV4 (backendAuth aws keys, else the AWS default credential chain) or a Bedrock API key (backendAuth key).' })),
  custom: Opt(Type.Object({
    format: StringEnum(['openai-chat', 'openai-responses', 'anthropic-messages', 'gemini'], { description: 'The wire format the server speaks.' }),
    model: AiModel
  }, { ...strict, description: 'Any server speaking one of the formats: set hostOverride (and pathPrefix: its base path, default /v1; /v1beta for gemini).' })),
  ollama: Opt(OpenAICompatibleSchema('Ollama\'s OpenAI-compatible API (http://localhost:11434/v1).')),
  vllm: Opt(OpenAICompatibleSchema('vLLM\'s OpenAI-compatible server (http://localhost:8000/v1).')),
  llamaCpp: Opt(OpenAICompatibleSchema('llama.cpp\'s server (http://localhost:8080/v1).')),
  mistral: Opt(OpenAICompatibleSchema('Mistral AI (https://api.mistral.ai/v1).')),
  groq: Opt(OpenAICompatibleSchema('Groq (https://api.groq.com/openai/v1).')),
  deepseek: Opt(OpenAICompatibleSchema('DeepSeek (https://api.deepseek.com).')),
  xai: Opt(OpenAICompatibleSchema('xAI (https://api.x.ai/v1).')),
  openrouter: Opt(OpenAICompatibleSchema('OpenRouter (https://openrouter.ai/api/v1).')),
  together: Opt(OpenAICompatibleSchema('Together AI (https://api.together.ai/v1).')),
  fireworks: Opt(OpenAICompatibleSchema('Fireworks AI (https://api.fireworks.ai/inference/v1).')),
  cerebras: Opt(OpenAICompatibleSchema('Cerebras (https://api.cerebras.ai/v1).'))
}, { ...strict, description: 'The LLM provider: exactly one of these.' })

const AiRate = (what: string) => Type.Union([
  Type.String({ pattern: '^\\s*[0-9]{1,12}(\\.[0-9]{1,6})?\\s*$' }),
  Type.Number({ minimum: 0 })
], { description: `${what}, per million tokens: a decimal with at most 6 decimals ("2.5", "0.075"); a string keeps it exact.` })

const AiRateFields = {
  input: AiRate('Input (prompt) tokens'),
  output: AiRate('Output (completion) tokens'),
  cacheRead: Opt(AiRate('Input tokens read from a prompt cache (default: the input rate)')),
  cacheWrite: Opt(AiRate('Input tokens written to a prompt cache (default: the input rate)')),
  reasoning: Opt(AiRate('Output tokens spent on reasoning (default: the output rate)'))
}

export const AiPricingSchema = Type.Object({
  currency: Opt(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_]{0,15}$', description: 'The currency of the rates, carried as a label with every cost; default USD.' })),
  input: Opt(AiRateFields.input),
  output: Opt(AiRateFields.output),
  cacheRead: AiRateFields.cacheRead,
  cacheWrite: AiRateFields.cacheWrite,
  reasoning: AiRateFields.reasoning,
  models: Opt(Type.Array(Type.Object({
    model: Type.String({ minLength: 1, maxLength: 256, description: 'The model, * matching any characters (gpt-4o-mini*); matched against the model sent to the provider and the one it answered with.' }),
    ...AiRateFields
  }, { ...strict, description: 'Rates for the models this matches.' }), { maxItems: 1000, description: 'Per-model rates; the first entry that matches wins; a model no entry matches takes the backend-wide rates (input, output, ...), if any.' }))
}, { ...strict, description: 'What the answer\'s tokens cost (agentgateway\'s model catalog rates): the cost of each call goes to the access log, the trace and the portico_gen_ai_client_cost_total metric.' })

const AI_NAME = '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$'

/** Where one provider is and how it is called: the fields an `ai` backend and a provider of its `groups` share. */
const aiProviderFields = {
  provider: AiProviderSchema,
  hostOverride: Opt(Type.String({ minLength: 1, description: 'Where to send requests instead of the provider\'s API: host:port or http(s)://host[:port].' })),
  pathOverride: Opt(Type.String({ pattern: '^/[^?#\\s\\x00-\\x1f\\x7f]*$', description: 'Path chat requests are sent to instead of the provider\'s (/v1/chat/completions for OpenAI).' })),
  pathPrefix: Opt(Type.String({ pattern: '^(/[^?#\\s\\x00-\\x1f\\x7f]*)?$', description: 'The provider\'s base path, operations appended (/chat/completions, /embeddings, /models); default the provider\'s (/v1 for OpenAI, /openai/v1 for Groq).' })),
  tokenize: Opt(Type.Boolean({ description: 'Estimate each request\'s prompt tokens (o200k_base tokenizer) before it is sent, and answer 429 when a localRateLimit bucket of type tokens holds fewer; the answer\'s real usage is still what is taken. Default false.' })),
  pricing: Opt(AiPricingSchema)
}

export const AiGroupProviderSchema = Type.Object({
  name: Type.String({ minLength: 1, pattern: AI_NAME, description: 'The provider\'s name (unique in the backend): its backend is <ai name>/<name> in traces, metrics and porticoctl.' }),
  ...aiProviderFields,
  policies: Opt(BackendPoliciesSchema)
}, { ...strict, description: 'One provider of a failover group, with its own key (policies.backendAuth) and backend policies; they replace the backend entry\'s policies of the same name.' })

export const AiBackendSchema = Type.Object({
  name: Type.String({ minLength: 1, pattern: AI_NAME, description: 'Backend name (unique among ai backends); shown in traces, metrics and porticoctl.' }),
  ...aiProviderFields,
  provider: Opt(AiProviderSchema),
  groups: Opt(Type.Array(Type.Object({
    providers: Type.Array(AiGroupProviderSchema, { minItems: 1, description: 'Providers of this group, balanced round robin among those not ejected.' })
  }, { ...strict }), { minItems: 1, description: 'Failover across providers (instead of provider): priority groups, the first group with a provider not ejected by passive health serves; a request that fails (429, 5xx, connection error, backend timeout) before any byte reached the client is sent to the next provider, in its format.' }))
}, { ...strict, description: 'An LLM provider (or failover groups of them): requests in OpenAI chat completions, OpenAI Responses or Anthropic Messages format (told by the path) are sent to it, translated when it speaks another; the token usage of each answer is read (for localRateLimit type tokens, traces, metrics and logs).' })

/** A model name as clients send it: printable ASCII, no spaces (gpt-4o, anthropic.claude-3-haiku-20240307-v1:0, meta-llama/Llama-3-8B). */
const MODEL_NAME = '^[\\x21-\\x7e]+$'

/** Wildcards only as agentgateway allows them: `*`, a prefix `x-*` or a suffix `*-x` (no other `*`). */
const MODEL_MATCH = '^(\\*|[\\x21-\\x29\\x2b-\\x7e]+\\*?|\\*[\\x21-\\x29\\x2b-\\x7e]+)$'

/** A model's name in the file (a PorticoModel's is its metadata.name): what virtual models and parentRefs name. */
const MODEL_RESOURCE_NAME = '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$'

/** Gateway API ParentReference, as agentgateway's AgentgatewayModel takes it. */
export const ModelParentRefSchema = Type.Object({
  group: Opt(Type.String({ maxLength: 253, pattern: '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$', description: 'API group of the parent: gateway.networking.k8s.io (default) for Gateway and HTTPRoute, gateway.networking.x-k8s.io for ListenerSet. Cluster mode only.' })),
  kind: Opt(StringEnum(['Gateway', 'ListenerSet', 'HTTPRoute'], { description: 'Gateway (default): the model serves on every listener of the gateway (or the one sectionName names); HTTPRoute: on the requests of that route, which has no backends of its own (cluster: one rule with a single model backend *); ListenerSet: cluster mode only.' })),
  name: Type.String({ minLength: 1, maxLength: 253, pattern: MODEL_RESOURCE_NAME, description: 'The gateway\'s (standalone: its key under gateways) or route\'s name.' }),
  namespace: Opt(Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', description: 'Cluster mode: the parent\'s namespace (default the model\'s). Not used in the file.' })),
  sectionName: Opt(Type.String({ minLength: 1, maxLength: 253, pattern: MODEL_RESOURCE_NAME, description: 'Cluster mode: a listener of the Gateway / ListenerSet, or a rule name of the HTTPRoute. In the file a gateway is one listener and a route one rule: not used.' }))
}, { ...strict, description: 'Where the model is served (Gateway API ParentReference).' })

const ModelTargetName = Type.String({ minLength: 1, maxLength: 253, pattern: MODEL_RESOURCE_NAME, description: 'Another model (its name: the file\'s models[].name, or the PorticoModel\'s in the same namespace).' })

/** How a virtual model chooses a model per request: exactly one of weighted, failover or conditional. */
export const VirtualModelSchema = Type.Object({
  weighted: Opt(Type.Array(Type.Object({
    model: ModelTargetName,
    weight: Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Relative weight; 0 never chosen.' })
  }, strict), { minItems: 1, maxItems: 256, description: 'A model chosen at random per request, in proportion to the weights.' })),
  failover: Opt(Type.Object({
    groups: Type.Array(Type.Object({
      models: Type.Array(ModelTargetName, { minItems: 1, maxItems: 64, description: 'Models of this group, round robin among those not ejected.' })
    }, strict), { minItems: 1, maxItems: 16, description: 'Priority groups: the first group with a model not ejected by passive health (429, 5xx, connection errors, backend timeouts) serves; a request that fails before any byte reached the client goes to the next model.' })
  }, { ...strict, description: 'Failover across concrete models.' })),
  conditional: Opt(Type.Object({
    rules: Type.Array(Type.Object({
      when: Type.String({ minLength: 1, maxLength: 4096, description: 'CEL over request (headers, path), jwt (claims), apiKey and llm.request (model, messageCount): the first rule that is true picks its model.' }),
      model: ModelTargetName
    }, strict), { minItems: 1, maxItems: 256 }),
    fallback: ModelTargetName
  }, { ...strict, description: 'Ordered conditions; the fallback serves when none is true (or one fails to evaluate).' }))
}, { ...strict, description: 'Request-time routing among other models (concrete or virtual, no cycles): exactly one of weighted, failover or conditional.' })

/** One set of body-field edits: field path → CEL (`set`), and fields removed. */
const BodyEditSchema = Type.Object({
  set: Opt(KeyedRecord(Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$', description: 'A body field, dotted for nested ones (max_tokens, metadata.user_id).' }), Type.String({ minLength: 1, maxLength: 4096 }), { description: 'Field → CEL expression over llm.request (the body), request, jwt and apiKey; its value replaces the field.' })),
  remove: Opt(Type.Array(Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$' }), { maxItems: 256, description: 'Body fields removed.' }))
}, strict)

export const ModelTransformationsSchema = Type.Object({
  request: Opt(Type.Object({
    beforeConversion: Opt(BodyEditSchema),
    afterConversion: Opt(BodyEditSchema)
  }, { ...strict, description: 'Edits of the request body: in the client\'s format before it is converted, or in the provider\'s after.' }))
}, { ...strict, description: 'CEL transformations of request-body fields.' })

export const ModelPoliciesSchema = Type.Object({
  ...BackendPoliciesSchema.properties,
  transformations: Opt(ModelTransformationsSchema)
}, { ...strict, description: 'Policies of a concrete model: the backend policies (backendAuth, headers, backendTLS, health, authorization, localRateLimit, ...) and transformations.' })

/**
 * A model's fields but its name: `PorticoModel.spec` in a cluster (scripts/gen-crds.ts), a
 * `models[]` entry in the file (with `name`).
 */
const modelSpecFields = {
  parentRefs: Opt(Type.Array(ModelParentRefSchema, { minItems: 1, maxItems: 32, description: 'Where the model is served. Default: the gateway named "default".' })),
  match: Opt(Type.Object({
    model: Type.String({ minLength: 1, maxLength: 256, pattern: MODEL_MATCH, description: 'The model clients ask for: exact (gpt-4o), a prefix (gpt-*), a suffix (*-latest) or * (any). Exact beats prefix and suffix (the longer literal part first) beats *.' })
  }, { ...strict, description: 'Which requested models this serves. Default: the name.' })),
  visibility: Opt(StringEnum(['Public', 'Internal'], { description: 'Public (default): listed by GET /v1/models and reachable by name; Internal: only through a virtual model.' })),
  provider: Opt(AiProviderSchema),
  baseURL: Opt(Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://[^/?#@\\s]+(/[^?#\\s]*)?$', description: 'Where the provider\'s API is, instead of its documented one: an absolute http(s) URL with a host; its path is the base path operations are appended to (default the provider\'s, /v1 for OpenAI).' })),
  pathOverride: aiProviderFields.pathOverride,
  tokenize: aiProviderFields.tokenize,
  pricing: aiProviderFields.pricing,
  policies: Opt(ModelPoliciesSchema),
  virtualModel: Opt(VirtualModelSchema)
}

export const ModelSpecSchema = Type.Object(modelSpecFields, { ...strict, description: 'A model (agentgateway\'s AgentgatewayModel): exactly one of provider (a concrete model) or virtualModel.' })

export const ModelSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 253, pattern: MODEL_RESOURCE_NAME, description: 'The model\'s name (unique): what virtual models and logs name it by, and the model clients ask for unless match says otherwise.' }),
  ...modelSpecFields
}, { ...strict, description: 'A model: exactly one of provider (a concrete model) or virtualModel.' })

/** A standalone InferencePool (Gateway API Inference Extension): model-server endpoints behind an endpoint picker. */
export const InferencePoolSchema = Type.Object({
  name: Opt(Type.String({ minLength: 1, maxLength: 253, pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'The pool\'s name in traces and metrics. Default: inference-pool.' })),
  endpoints: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
    minItems: 1,
    maxItems: 1024,
    description: 'The pool\'s model servers: IP addresses (each served on every targetPort) or ip:port. The endpoint picker names one of them per request; the gateway connects to no other address.'
  }),
  targetPorts: Opt(Type.Array(Type.Object({ number: Type.Integer({ minimum: 1, maximum: 65535 }) }, strict), { minItems: 1, maxItems: 8, description: 'Ports of the endpoints given without one (InferencePool targetPorts).' })),
  appProtocol: Opt(StringEnum(['http', 'kubernetes.io/h2c'], { description: 'How the model servers are spoken to: http (HTTP/1.1, default) or kubernetes.io/h2c (HTTP/2 with prior knowledge).' })),
  endpointPicker: Type.Object({
    host: Type.String({ minLength: 1, description: 'The endpoint picker\'s ext_proc gRPC service as host:port.' }),
    tls: Opt(Type.Union([Type.Literal(false), Type.Object({
      insecureSkipVerify: Opt(Type.Boolean({ description: 'Do not verify the picker\'s certificate (the reference picker serves a self-signed one). Default false.' })),
      ca: Opt(Type.String({ minLength: 1, $comment: SECRET_FILE, description: 'PEM file of the CA the picker\'s certificate must chain to (relative to the config file). Default: the system\'s roots.' }))
    }, strict)], { description: 'TLS to the picker; false: plaintext. Default: TLS with insecureSkipVerify (the reference picker\'s self-signed certificate).' })),
    failureMode: Opt(StringEnum(['FailOpen', 'FailClose'], { description: 'When the picker is unreachable, fails or is too slow: FailClose (default) answers 503; FailOpen sends the request to an endpoint of the pool chosen round robin.' })),
    timeout: Opt(Type.String({ pattern: DURATION_PATTERN, description: 'How long the picker may take: each answer at most this long, and no answer is awaited once the pick has taken this long (the response headers\' answer likewise). Default 10s.' })),
    maxBodyBytes: Opt(Type.Integer({ minimum: 0, maximum: 64 * 1024 * 1024, description: 'Largest request body sent to the picker (it reads the model and prompt from it); 413 above. Default 10 MiB (the reference picker\'s limit).' })),
    subsetHint: Opt(Type.Boolean({ description: 'Send the pool\'s endpoints to the picker as the x-gateway-destination-endpoint-subset hint (envoy.lb.subset_hint), so it picks only among them. Default false.' }))
  }, { ...strict, description: 'The pool\'s endpoint picker (EPP): asked over Envoy\'s ext_proc protocol which endpoint serves each request.' })
}, { ...strict, description: 'An InferencePool: each request goes to the model server its endpoint picker chooses (docs/inference.md).' })

export const BackendMeshSchema = Type.Object({
  identity: Type.String({ pattern: '^spiffe://[a-z0-9._-]+/[!-~]+$', maxLength: 2048, description: 'The SPIFFE ID the workload must present (spiffe://<trust domain>/ns/<namespace>/sa/<service account> in Istio).' }),
  hbonePort: Opt(Type.Integer({ minimum: 1, maximum: 65535, description: 'The HBONE port of the workload; default 15008.' }))
}, { ...strict, description: 'host and endpoints backends (of HTTP and connection routes): the endpoints are mesh (Istio ambient) workloads, reached through HBONE — HTTP/2 CONNECT over mTLS to the HBONE port, with the gateway\'s mesh certificate (config.mesh.certificate) — never in the clear (docs/mesh.md).' })

export const RouteBackendSchema = Type.Object({
  host: Opt(Type.String({
    minLength: 1,
    description: 'Plain HTTP backend as host:port, or a URL http://host:port / https://host:port.'
  })),
  endpoints: Opt(Type.Array(Type.String({ minLength: 1 }), {
    minItems: 1,
    description: 'One backend with several endpoints (host:port, or URLs of one scheme), balanced round robin; passive health (policies.health) ejects failing ones.'
  })),
  mcp: Opt(McpBackendSchema),
  ai: Opt(AiBackendSchema),
  inferencePool: Opt(InferencePoolSchema),
  mesh: Opt(BackendMeshSchema),
  weight: Opt(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Relative weight; default 1; 0 = never chosen.' })),
  policies: Opt(BackendPoliciesSchema)
}, { ...strict, description: 'A backend of the route: exactly one kind (host, endpoints, mcp, ai or inferencePool).' })

export const RouteSchema = Type.Object({
  name: Opt(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'Route name (unique); shown in traces, logs and metrics.' })),
  namespace: Opt(Type.String({ minLength: 1 })),
  gateways: Opt(Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1 })], { description: 'a gateway name or a list of them; default: the gateway named "default".' })),
  hostnames: Opt(Type.Array(Type.String({ pattern: '^(\\*\\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$' }), { description: 'Host names the route serves; a leading *. is a wildcard. Empty: any.' })),
  matches: Opt(Type.Array(RouteMatchSchema, { description: 'Any match selects the route. Default: pathPrefix /.' })),
  policies: Opt(RoutePoliciesSchema),
  backends: Opt(Type.Array(RouteBackendSchema, { description: 'Backends; one is chosen by weight per request.' }))
}, { ...strict, description: 'An HTTP route.' })

export const StreamBackendSchema = Type.Object({
  host: Opt(Type.String({ minLength: 1, description: 'The backend as host:port (no scheme: the bytes go as they are; policies.backendTLS wraps them in TLS).' })),
  endpoints: Opt(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'Several host:port endpoints, taken in turn per connection.' })),
  mesh: Opt(BackendMeshSchema),
  weight: Opt(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Relative weight per connection; default 1; 0 = never chosen.' })),
  policies: Opt(Type.Object({
    backendTLS: Opt(BackendTlsSchema)
  }, { ...strict, description: 'Only backendTLS applies to connections.' }))
}, { ...strict, description: 'Where a connection goes: exactly one of host or endpoints.' })

export const StreamRouteSchema = Type.Object({
  name: Opt(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'Route name (unique among routes of its kind); shown in traces, logs and metrics.' })),
  namespace: Opt(Type.String({ minLength: 1 })),
  gateways: Opt(Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1 })], { description: 'a gateway name or a list of them; default: the gateway named "default".' })),
  hostnames: Opt(Type.Array(Type.String({ pattern: '^(\\*\\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$' }), { description: 'SNI names the route takes (TLS gateways only; a leading *. is a wildcard; the most specific match wins). Empty: any.' })),
  backends: Type.Array(StreamBackendSchema, { minItems: 1, description: 'Backends; one is chosen by weight per connection.' })
}, { ...strict, description: 'A route for whole connections (Gateway API TCPRoute / TLSRoute).' })

export const UdpBackendSchema = Type.Object({
  host: Opt(Type.String({ minLength: 1, description: 'The backend as host:port (UDP).' })),
  endpoints: Opt(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'Several host:port endpoints, taken in turn per flow.' })),
  weight: Opt(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Relative weight per flow; default 1; 0 = never chosen.' }))
}, { ...strict, description: 'Where a flow\'s datagrams go: exactly one of host or endpoints.' })

export const UdpRouteSchema = Type.Object({
  name: Opt(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'Route name (unique among udpRoutes); shown in traces, logs and metrics.' })),
  namespace: Opt(Type.String({ minLength: 1 })),
  gateways: Opt(Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1 })], { description: 'a gateway name or a list of them (protocol UDP); default: the gateway named "default".' })),
  backends: Type.Array(UdpBackendSchema, { minItems: 1, description: 'Backends; one is chosen by weight per flow (a client address:port).' })
}, { ...strict, description: 'A route for UDP datagrams (Gateway API UDPRoute).' })

const SamplingSchema = Type.Union([
  Type.Boolean(),
  Type.Number({ minimum: 0, maximum: 1 })
], { description: 'true, false, or the share of requests to sample (0.0 to 1.0).' })

export const GatewaySchema = Type.Object({
  port: Type.Integer({ minimum: 1, maximum: 65535, description: 'Listener port.' }),
  protocol: Opt(StringEnum(['HTTP', 'HTTPS', 'TLS', 'TCP', 'UDP'], { description: 'Listener protocol; default HTTP. HTTP and HTTPS serve routes; TCP forwards connections to tcpRoutes; TLS forwards them to tlsRoutes (or tcpRoutes with hostnames) chosen by the SNI name, passed through encrypted or, with tls.cert and tls.key, decrypted first; UDP forwards datagrams to udpRoutes, per client flow.' })),
  address: Opt(Type.String({ minLength: 1, description: 'Bind address; default 0.0.0.0 (all IPv4 interfaces).' })),
  hostname: Opt(Type.String({ pattern: '^(\\*\\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$', description: 'Only requests for this host (wildcard *. allowed) use this gateway; gateways on one port are told apart by it.' })),
  http2: Opt(Type.Boolean({ description: 'Serve HTTP/2 besides HTTP/1.1: h2 chosen by ALPN on HTTPS, h2c with prior knowledge on HTTP. Default true; false serves HTTP/1.1 only. Gateways sharing a port must agree.' })),
  tls: Opt(Type.Object({
    cert: Opt(Type.String({ minLength: 1, description: 'Path to the PEM certificate chain (relative to the config file). Required for HTTPS and for TLS in mode Terminate.' })),
    key: Opt(Type.String({ minLength: 1, description: 'Path to the PEM private key (relative to the config file). Required with cert.' })),
    mode: Opt(StringEnum(['Terminate', 'Passthrough'], { description: 'Protocol TLS only. Passthrough (the default without cert): the encrypted connection goes to the backend as it came, chosen by its SNI name. Terminate (the default with cert): Portico completes the handshake and forwards the plaintext.' })),
    root: Opt(Type.String({ minLength: 1, description: 'Path to PEM CA certificates client certificates must chain to (relative to the config file): mutual TLS, named as agentgateway names it. Gateways sharing an HTTPS port must agree.' })),
    clientCertMode: Opt(StringEnum(['AllowValidOnly', 'AllowInsecureFallback'], { description: 'With root: AllowValidOnly (default) refuses, in the TLS handshake, a client without a certificate that chains to root; AllowInsecureFallback asks for one but serves every client (Gateway API FrontendValidationModeType).' })),
    minTLSVersion: Opt(StringEnum(['1.2', '1.3'], { description: 'Oldest TLS version accepted; default 1.2 (TLS 1.0 and 1.1 are never offered). Gateways sharing an HTTPS port must agree.' })),
    maxTLSVersion: Opt(StringEnum(['1.2', '1.3'], { description: 'Newest TLS version offered; default 1.3.' })),
    cipherSuites: Opt(Type.Array(Type.String({ pattern: '^[A-Za-z0-9_-]+$' }), { minItems: 1, description: 'TLS 1.2 cipher suites allowed, in order of preference, by IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) or OpenSSL name (ECDHE-RSA-AES128-GCM-SHA256); TLS 1.3 suites (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256) may be listed to restrict those too. Default: Node\'s defaults.' }))
  }, { ...strict, description: 'Server TLS: required for HTTPS; for TLS, a certificate makes the gateway terminate.' })),
  path: Opt(Type.Object({
    escapedSlashesAction: Opt(StringEnum(['UnescapeAndRedirect', 'UnescapeAndForward', 'RejectRequest', 'KeepUnchanged'], {
      description: 'What %2F, %5C and \\ in a path do: UnescapeAndRedirect (default: 307 to the path with /), UnescapeAndForward, RejectRequest (400), or KeepUnchanged (unsafe with path-based policies: a backend that decodes %2F serves a path the gateway never checked).'
    })),
    disableMergeSlashes: Opt(Type.Boolean({ description: 'Keep runs of slashes (//a) instead of merging them (default false: merged).' }))
  }, { ...strict, description: 'Path normalisation before routing (as Envoy Gateway\'s ClientTrafficPolicy path settings). Escapes of unreserved characters are always decoded and . / .. segments resolved; routes, policies and the backend all see the normalised path.' })),
  // Client-connection settings, named as Envoy Gateway's ClientTrafficPolicy names them.
  timeout: Opt(Type.Object({
    http: Opt(Type.Object({
      requestHeadersTimeout: Opt(Type.Union([Duration, Type.Literal('off')], { description: 'How long a client has to send a whole request head (request line and headers), counted from the connection or the end of the previous request; past it the client gets 408 and the connection is closed. Default 10s; "off" disables it. Gateways sharing a port must agree (it runs before the Host header is read).' })),
      requestBodyIdleTimeout: Opt(Type.Union([Duration, Type.Literal('off')], { description: 'How long a request body being sent to a backend may go without a byte from the client, and the window requestBodyMinRate is measured over. Past it the backend call is cut (its connection released) and the client gets 408 unless response headers were already sent. Default 5m, as Envoy\'s stream idle timeout; "off" disables it.' })),
      requestBodyMinRate: Opt(MinRate('Until the response begins, a request body being sent to a backend must bring at least this many bytes per second, measured over each requestBodyIdleTimeout (a client trickling a byte every few seconds is cut there: 408). Not applied to gRPC. Default 240 (Kestrel\'s MinRequestBodyDataRate); 0: no minimum.')),
      backendRequestTimeout: Opt(DurationOrOff('Default for routes that set neither requestTimeout nor backendRequestTimeout: how long each backend call may take to send its response headers; then 504. Default 5m; "off" disables it.')),
      streamIdleTimeout: Opt(DurationOrOff('How long a response being streamed to the client may go without a byte from the backend (or, while the client is not reading, without the client taking one). Past it the stream ends: HTTP/1.1 closes the connection without the last chunk, HTTP/2 resets the stream; the backend connection is closed. Default 5m, as Envoy\'s stream_idle_timeout; SSE keep-alives and LLM tokens keep a stream alive. "off" disables it.'))
    }, strict))
  }, { ...strict, description: 'Default time limits of this gateway\'s requests (routes override all but requestHeadersTimeout in policies.timeout). See docs/configuration.md#timeouts.' })),
  clientIPDetection: Opt(Type.Object({
    xForwardedFor: Opt(Type.Object({
      numTrustedHops: Type.Integer({ minimum: 0, maximum: 32, description: 'Proxies in front of this gateway that set X-Forwarded-* headers. 0 (default): the client is not trusted, its X-Forwarded-Proto and X-Forwarded-Host are replaced by what the gateway saw; 1 or more: they are kept when present. X-Forwarded-For always gets the peer address appended.' })
    }, strict))
  }, { ...strict, description: 'Whether X-Forwarded-* headers the client sent are trusted.' })),
  upgrades: Opt(Type.Array(Type.String({ pattern: HEADER_NAME_PATTERN }), { description: 'HTTP/1.1 Upgrade protocols passed on to backends (case-insensitive). Default [websocket]. A request that asks for any other (h2c, ...) is forwarded as a plain request without its Upgrade headers.' })),
  tracing: Opt(Type.Object({
    randomSampling: Opt(SamplingSchema),
    clientSampling: Opt(SamplingSchema)
  }, { ...strict, description: 'This gateway\'s sampling, over config.tracing\'s (agentgateway\'s frontend tracing): e.g. every request of an internal listener, 1 % of a public one. Has effect only when tracing is on (config.tracing, or TRACING in a cluster).' })),
  policies: Opt(GatewayPoliciesSchema),
  filters: Opt(Type.Object({
    requests: Type.Array(Type.Object({
      extAuthz: ExtAuthzSchema
    }, { ...strict, description: 'One pre-routing filter: an external authorization call (as policies.extAuthz).' }), { minItems: 1, maxItems: 16, description: 'Run in this order on every request of this gateway, before policies and route selection; the first that denies answers. Headers an allow adds, sets or removes are what route matching and the next filter see (Host and :authority never change). At most 16 (Gateway API ListenerFilters.requests).' })
  }, { ...strict, description: 'Pre-routing filters of an HTTP or HTTPS gateway, as Gateway API listener filters (GatewayListenerFilters).' })),
  udp: Opt(Type.Object({
    idleTimeout: Opt(Duration),
    maxFlows: Opt(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Most flows at once; a new client past it evicts the flow quiet longest (counted in portico_udp_flows_closed_total{reason="Evicted"}). Default 10000.' }))
  }, { ...strict, description: 'Protocol UDP only. A flow is one client address:port with its own upstream socket to the backend chosen for it. idleTimeout: a flow with no datagram either way for this long is closed (default 60s, as Envoy\'s udp_proxy idle_timeout).' }))
}, { ...strict, description: 'A listener.' })

export const LoggingSchema = Type.Object({
  level: Opt(Type.String({ description: 'error, warn, info, debug, trace, or a filter such as info,engine=debug. Env LOG_LEVEL.' })),
  format: Opt(StringEnum(['json', 'text'], { description: 'Default: text on a terminal, json otherwise. Env LOG_FORMAT.' }))
}, strict)

const OtlpExportFields = {
  otlpEndpoint: Type.String({ pattern: '^https?://[^\\s/?#]+/?$', description: 'The OTLP collector: http://host:port (plaintext) or https://host:port. gRPC usually listens on 4317, OTLP/HTTP on 4318.' }),
  otlpProtocol: Opt(StringEnum(['grpc', 'http'], { description: 'grpc (default): OTLP over gRPC; http: OTLP/HTTP with protobuf bodies, POSTed to <otlpEndpoint><path>.' })),
  headers: Opt(Type.Record(Type.String({ pattern: HEADER_NAME_PATTERN }), Type.String({ pattern: '^[\\t\\x20-\\x7e\\x80-\\xff]*$' }), { description: 'Sent with every export (gRPC metadata or HTTP headers): an API key, a tenant id. Redacted in /config_dump.' }))
}

const CelExpression = Type.String({ minLength: 1, description: 'A CEL expression.' })

/** agentgateway's `config.tracing` field names. */
export const TracingSchema = Type.Object({
  ...OtlpExportFields,
  path: Opt(Type.String({ pattern: `^/${NO_WHITESPACE_OR_CONTROLS}$`, description: 'OTLP/HTTP path; default /v1/traces.' })),
  randomSampling: Opt(SamplingSchema),
  clientSampling: Opt(SamplingSchema),
  resources: Opt(Type.Record(Type.String({ minLength: 1 }), Type.String(), { description: 'OpenTelemetry resource attributes of every span (plain strings, not CEL), e.g. deployment.environment.name: prod. service.name defaults to portico.' })),
  fields: Opt(Type.Object({
    add: Opt(Type.Record(Type.String({ minLength: 1, maxLength: 128 }), CelExpression, { description: 'Attribute name → CEL expression, set on each request\'s server span when it ends; the same variables as accessLog.fields.add. An attribute whose expression fails is left out.' })),
    remove: Opt(Type.Array(Type.String({ minLength: 1 }), { description: 'Built-in attributes left off every server span (e.g. client.address, user_agent.original).' }))
  }, { ...strict, description: 'Server-span attributes added with CEL or removed (agentgateway\'s tracing.fields).' }))
}, { ...strict, description: 'OpenTelemetry distributed tracing: a server span per request, child spans for the calls it makes, W3C trace context and baggage read from the request and propagated upstream.' })


/** agentgateway's access-log `filter` and `fields.add` / `fields.remove`. */
export const AccessLogSchema = Type.Object({
  filter: Opt(Type.String({ minLength: 1, description: 'CEL: only requests for which it is true are logged (e.g. response.code >= 400). An evaluation error logs the request.' })),
  fields: Opt(Type.Object({
    add: Opt(Type.Record(Type.String({ minLength: 1, maxLength: 128 }), CelExpression, { description: 'Field name → CEL expression over request, source, jwt, apiKey, basicAuth, mcp (method, target, tool/prompt/resource {name, target}), response (code, headers) and llm (requestModel, model, responseModel, inputTokens, outputTokens, totalTokens, streaming, cost). A field whose expression fails is left out.' })),
    remove: Opt(Type.Array(Type.String({ minLength: 1 }), { description: 'Built-in fields left out of every line (e.g. src, duration).' }))
  }, strict)),
  otlp: Opt(Type.Object({
    ...OtlpExportFields,
    path: Opt(Type.String({ pattern: `^/${NO_WHITESPACE_OR_CONTROLS}$`, description: 'OTLP/HTTP path; default /v1/logs.' }))
  }, { ...strict, description: 'Also export every access-log line as an OpenTelemetry log record (the fields as attributes, the trace id set).' }))
}, { ...strict, description: 'The request access log (component request, one line per request at info): fields added with CEL or removed, a filter, and optional OTLP logs export. JSON or text as logging.format.' })

export const StaticConfigSchema = Type.Object({
  session: Opt(Type.Object({
    key: Type.String({ pattern: '^[0-9a-fA-F]{64}$', description: 'Hex AES-256 key that encrypts MCP session ids, so any replica with the same key can resume a session. Env SESSION_KEY. Default: a random key per process.' })
  }, strict)),
  mcp: Opt(Type.Object({
    sessionTtl: Opt(Duration)
  }, { ...strict, description: 'sessionTtl: idle MCP sessions are closed after this long (default 30m).' })),
  adminAddr: Opt(Address),
  adminWrites: Opt(Type.Boolean({ description: 'Whether the admin web UI may change things: fire requests through the gateway, use MCP routes, set the log level (default false: read-only). Env ADMIN_WRITES.' })),
  publicHeaders: Opt(Type.Array(Type.String({ minLength: 1, pattern: HEADER_NAME_PATTERN }), { description: 'Request header names whose values, when a policy sets them, are shown in /config_dump, the UI and traces (default: only standard headers such as content-type, user-agent, x-request-id; every other value a policy sets is redacted). Credential-like names (x-api-key, *-token) stay redacted. Env PUBLIC_HEADERS (comma-separated).' })),
  adminAllowedHosts: Opt(Type.Array(Type.String({ pattern: '^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$' }), { description: 'DNS names the admin server may be reached by (its Host header), besides localhost, IP addresses and the name in adminAddr; any other name is refused (DNS rebinding protection). Env ADMIN_ALLOWED_HOSTS (comma-separated).' })),
  statsAddr: Opt(Address),
  readinessAddr: Opt(Address),
  logging: Opt(LoggingSchema),
  drainTimeout: Opt(Duration),
  debugTrace: Opt(Type.Boolean({ description: 'Whether /debug/trace can be used (default true). Env DEBUG_TRACE=off.' })),
  traceBodyLimit: Opt(Type.Integer({ minimum: 0, maximum: 16_777_216, description: 'Bytes of a request or response body kept in a trace body snapshot (default 65536). Env TRACE_BODY_LIMIT.' })),
  workers: Opt(Type.Integer({ minimum: 1, maximum: 256, description: 'Serving event loops sharing the listening ports: the main thread and workers - 1 worker threads. Default: the CPUs available to the process, cgroup quota aware. 1: one event loop serves everything. Env WORKERS (a number or auto).' })),
  tracing: Opt(TracingSchema),
  accessLog: Opt(AccessLogSchema),
  mesh: Opt(Type.Object({
    certificate: Opt(Type.Object({
      cert: Type.String({ minLength: 1, description: 'PEM file: the gateway\'s workload certificate (a spiffe:// URI SAN), then any intermediates. Env MESH_CERT_FILE.' }),
      key: Type.String({ minLength: 1, description: 'PEM file: its private key. Env MESH_KEY_FILE.' }),
      root: Type.String({ minLength: 1, description: 'PEM file: the mesh root certificate(s) peers must chain to. Env MESH_ROOT_FILE.' })
    }, { ...strict, description: 'The gateway\'s mesh identity from files, read again whenever they change (relative paths: from the working directory). Not with ca.' })),
    ca: Opt(Type.Object({
      address: Opt(Type.String({ minLength: 1, maxLength: 300, description: 'host:port of the mesh CA (istiod\'s certificate service, TLS). Default istiod.istio-system.svc:15012. Env CA_ADDRESS.' })),
      serverName: Opt(Type.String({ minLength: 1, maxLength: 253, description: 'The name the CA\'s serving certificate is checked against; default the address\'s host without the cluster suffix (istiod.<ns>.svc). Set it when address is an IP. Env CA_SERVER_NAME.' })),
      trustDomain: Opt(Type.String({ minLength: 1, maxLength: 253, description: 'The mesh\'s SPIFFE trust domain; default cluster.local. Env TRUST_DOMAIN.' })),
      clusterId: Opt(Type.String({ minLength: 1, maxLength: 253, description: 'The cluster ID istiod knows this cluster by (its --clusterID); default Kubernetes. Env CLUSTER_ID.' })),
      network: Opt(Type.String({ maxLength: 253, description: 'The mesh network the gateway is on (Istio\'s topology.istio.io/network). Env NETWORK.' })),
      namespace: Opt(Type.String({ minLength: 1, maxLength: 63, description: 'The gateway pod\'s namespace (the ns of its SPIFFE ID). Env POD_NAMESPACE; required.' })),
      serviceAccount: Opt(Type.String({ minLength: 1, maxLength: 253, description: 'The gateway pod\'s service account (the sa of its SPIFFE ID). Env SERVICE_ACCOUNT; required.' })),
      tokenFile: Opt(Type.String({ minLength: 1, description: 'The projected service-account token with audience istio-ca, read again at each request. Default /var/run/secrets/tokens/istio-token. Env MESH_TOKEN_FILE.' })),
      rootFile: Opt(Type.String({ minLength: 1, description: 'PEM: the mesh root (the istio-ca-root-cert ConfigMap\'s root-cert.pem, mounted), trusted for the CA and for peers; read again when it changes. Default /var/run/secrets/istio/root-cert.pem. Env MESH_ROOT_FILE.' })),
      certificateTtl: Opt(Duration),
      renewFraction: Opt(Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1, description: 'Renew when this fraction of the certificate\'s life has passed; default 0.5.' }))
    }, { ...strict, description: 'The gateway\'s mesh identity from the mesh CA (istiod): a key in memory, a CSR for spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>, renewed before expiry (docs/mesh.md "Mesh identity"). certificateTtl: the lifetime asked for (default 24h; istiod caps it). Env MESH_ENABLED=true turns it on. Not with certificate.' }))
  }, { ...strict, description: 'Mesh (Istio ambient) integration: the identity HBONE tunnels to mesh backends are made with (docs/mesh.md): certificate (files) or ca (the mesh CA), one or the other.' })),
  hbone: Opt(Type.Object({
    poolMaxStreamsPerConn: Opt(Type.Integer({ minimum: 1, maximum: 65535, description: 'Most HBONE tunnels (CONNECT streams) on one HTTP/2 connection to a mesh peer, whatever the peer allows; default 100 (ztunnel\'s and agentgateway\'s).' })),
    poolUnusedReleaseTimeout: Opt(Duration)
  }, { ...strict, description: 'HBONE connection pool (agentgateway\'s hbone settings): poolUnusedReleaseTimeout — an HBONE connection with no tunnel closes after this long (default 5m, as ztunnel).' }))
}, { ...strict, description: 'Process settings, read at start (not hot-reloaded). Each also has an environment variable.' })

export const ConfigFileSchema = Type.Object({
  config: Opt(StaticConfigSchema),
  gateways: Opt(KeyedRecord(Type.String({ pattern: '^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$', description: 'A gateway name: letters, digits, dots, dashes and underscores, starting and ending with a letter or digit.' }), GatewaySchema, { description: 'Listeners by gateway name.' })),
  routes: Opt(Type.Array(RouteSchema)),
  tcpRoutes: Opt(Type.Array(StreamRouteSchema, { description: 'Connections on TCP gateways (the first route takes them all), or on TLS gateways by SNI name (as agentgateway\'s tcpRoutes).' })),
  tlsRoutes: Opt(Type.Array(StreamRouteSchema, { description: 'Connections on TLS gateways, chosen by SNI name (Gateway API TLSRoute).' })),
  udpRoutes: Opt(Type.Array(UdpRouteSchema, { description: 'Datagrams on UDP gateways (Gateway API UDPRoute): the first route takes every flow.' })),
  models: Opt(Type.Array(ModelSchema, { maxItems: 10_000, description: 'LLM models served on gateways and routes, chosen by the model a request asks for (docs/models.md).' }))
}, {
  ...strict,
  $id: 'https://portico.dev/schema/config.schema.json',
  title: 'Portico configuration file'
})

export type ConfigFile = Static<typeof ConfigFileSchema>
export type RouteConfig = Static<typeof RouteSchema>
export type GatewayConfig = Static<typeof GatewaySchema>
export type RouteBackendConfig = Static<typeof RouteBackendSchema>
export type RouteMatchConfig = Static<typeof RouteMatchSchema>
export type StreamRouteConfig = Static<typeof StreamRouteSchema>
export type UdpRouteConfig = Static<typeof UdpRouteSchema>
export type StaticConfig = Static<typeof StaticConfigSchema>
export type RoutePoliciesConfig = Static<typeof RoutePoliciesSchema>
export type McpBackendConfig = Static<typeof McpBackendSchema>
export type AiBackendConfig = Static<typeof AiBackendSchema>
export type JwtAuthConfig = Static<typeof JwtAuthSchema>
export type McpAuthenticationConfig = Static<typeof McpAuthenticationSchema>
export type JwksConfig = Static<typeof JwksSchema>
export type AuthorizationConfig = Static<typeof AuthorizationSchema>
export type BasicAuthConfig = Static<typeof BasicAuthSchema>
export type ApiKeyConfig = Static<typeof ApiKeySchema>
export type ExtAuthzConfig = Static<typeof ExtAuthzSchema>
export type OidcConfig = Static<typeof OidcSchema>
export type AiGroupProviderConfig = Static<typeof AiGroupProviderSchema>
export type ModelConfig = Static<typeof ModelSchema>
export type ModelSpecConfig = Static<typeof ModelSpecSchema>
export type VirtualModelConfig = Static<typeof VirtualModelSchema>
