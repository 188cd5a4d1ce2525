/**
 * AWS Bedrock (`ai.provider.bedrock`): Converse and ConverseStream on
 * `bedrock-runtime.{region}.amazonaws.com`, the model in the path
 * (`/model/{modelId}/converse`, `/model/{modelId}/converse-stream`).
 *
 * Authorisation is one of:
 * - a Bedrock API key (`backendAuth.key`, what AWS calls `AWS_BEARER_TOKEN_BEDROCK`), sent as
 *   `Authorization: Bearer <key>` — no signing;
 * - AWS Signature Version 4 over the final body, with the AWS SDK's own signer
 *   (`@smithy/signature-v4`, service `bedrock`) and credentials from explicit keys in the config
 *   or the SDK's default chain (`fromNodeProviderChain`: environment, shared config and
 *   credentials files, web identity / EKS IRSA, ECS container and EC2 instance metadata). The
 *   chain caches credentials and refreshes them before they expire; they are never logged.
 *
 * The AWS modules are loaded at the first Bedrock request, so a gateway without Bedrock never
 * loads them.
 */

import type * as SignatureV4Module from '@smithy/signature-v4'
import type * as HashNode from '@smithy/hash-node'
import type * as CredentialProviders from '@aws-sdk/credential-providers'
import { translationError } from '../canonical.ts'
import type { ProviderAdapter, ProviderRequest } from '../provider.ts'
import type { AiBackendSpecIR } from '../../ir/types.ts'
import { lazyRequire } from '../../util/lazy-require.ts'

const signatureV4 = lazyRequire<typeof SignatureV4Module>('@smithy/signature-v4')
const hashNode = lazyRequire<typeof HashNode>('@smithy/hash-node')
const credentialProviders = lazyRequire<typeof CredentialProviders>('@aws-sdk/credential-providers')

export interface AwsCredentials {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

export interface BedrockProviderOptions {
  /** AWS region (`us-east-1`): the endpoint's host and the signature's scope. */
  region: string
  /** A Bedrock API key: sent as a bearer token instead of signing. */
  apiKey?: string
  /** Explicit keys; without them (and without `apiKey`) the SDK's default credential chain is used. */
  credentials?: AwsCredentials
  /** Credentials source for tests or other identities; takes precedence over `credentials`. */
  credentialProvider?: () => Promise<AwsCredentials>
  /** The signing time (tests); default: now. */
  now?: () => Date
}

/** Bedrock Runtime's public endpoint in a region. */
export function bedrockHost (region: string): string {
  return `bedrock-runtime.${region}.amazonaws.com`
}

/** A Bedrock guardrail applied to every request of a backend (agentgateway's `guardrailIdentifier` / `guardrailVersion`). */
export interface BedrockGuardrail {
  identifier: string
  version: string
}

/**
 * The encoded Converse body with the backend's guardrail (`guardrailConfig`), to be called
 * before signing. Bedrock then checks prompt and answer; a blocked one ends with `stopReason:
 * guardrail_intervened` (a content filter for the client). Streams use the default
 * synchronous processing, so nothing unchecked reaches the client.
 */
export function withBedrockGuardrail (body: Record<string, unknown>, guardrail: BedrockGuardrail): Record<string, unknown> {
  return { ...body, guardrailConfig: { guardrailIdentifier: guardrail.identifier, guardrailVersion: guardrail.version } }
}

/** Path segment encoding as the AWS SDK does it (RFC 3986: also `!'()*`), so `:` and `/` in model ids and ARNs are escaped. */
function encodeSegment (value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

/** Headers that carry a client's key for another provider. */
const CLIENT_KEY_HEADERS = new Set(['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'])

/**
 * The adapter for an `ai` backend of provider bedrock: its region, its guardrail (added to
 * every encoded body by `adaptBody`, so it is signed with it) and its credentials — a Bedrock
 * API key, explicit AWS keys, or the AWS default credential chain.
 */
export function bedrockAdapter (spec: AiBackendSpecIR): ProviderAdapter | string {
  const bedrock = spec.bedrock
  if (bedrock === undefined) return 'provider bedrock needs a region'
  const auth = bedrock.auth ?? { kind: 'chain' }
  const adapter = bedrockProvider({
    region: bedrock.region,
    ...(auth.kind === 'apiKey' ? { apiKey: auth.apiKey } : {}),
    ...(auth.kind === 'keys' ? { credentials: { accessKeyId: auth.accessKeyId, secretAccessKey: auth.secretAccessKey, ...(auth.sessionToken !== undefined ? { sessionToken: auth.sessionToken } : {}) } } : {})
  })
  const guardrail = bedrock.guardrail
  if (guardrail === undefined) return adapter
  // Converse bodies only: an embeddings body is the model's own (a guardrail there is InvokeModel's header, not sent).
  return { ...adapter, adaptBody: (body: Record<string, unknown>, request) => request.operation === 'chat' ? withBedrockGuardrail(body, guardrail) : body }
}

export function bedrockProvider (options: BedrockProviderOptions): ProviderAdapter {
  let signer: SignatureV4Module.SignatureV4 | undefined
  const getSigner = (): SignatureV4Module.SignatureV4 => {
    if (signer !== undefined) return signer
    const explicit = options.credentials
    const credentials = options.credentialProvider ??
      (explicit !== undefined ? async () => explicit : credentialProviders().fromNodeProviderChain())
    const { Hash } = hashNode()
    signer = new (signatureV4().SignatureV4)({
      service: 'bedrock',
      region: options.region,
      credentials,
      sha256: Hash.bind(null, 'sha256'),
      // Bedrock is not S3: the path is escaped once more in the canonical request, as the SDK does.
      uriEscapePath: true
    })
    return signer
  }

  const path = (request: ProviderRequest): string => {
    // Embeddings: InvokeModel with the model's own body (Titan, Cohere; llm/operations.ts).
    if (request.operation === 'embeddings') return `/model/${encodeSegment(request.model)}/invoke`
    // The model list is the control plane's (bedrock.{region}, ListFoundationModels), not Bedrock Runtime's.
    if (request.operation === 'models') throw translationError(404, 'not_found', 'Bedrock Runtime has no model list (ListFoundationModels is the Bedrock control plane\'s API, on another host)')
    return `/model/${encodeSegment(request.model)}/${request.streaming ? 'converse-stream' : 'converse'}`
  }

  return {
    format: 'bedrock-converse',
    system: 'aws.bedrock',
    embeddings: 'bedrock-invoke',
    // The signature covers the query: a client's query (an SDK's api-version) must not be sent.
    ownQuery: true,
    path,
    async authorize (request, origin) {
      const headers = request.headers
      // The client's own credentials are not AWS's business (an Anthropic SDK's x-api-key, an
      // OpenAI key in Authorization, replaced below), and x-amz-* headers it sent would be
      // sent unsigned beside the signer's: none of them go on.
      for (const name of Object.keys(headers)) {
        if (name.startsWith('x-amz-') || CLIENT_KEY_HEADERS.has(name)) delete headers[name]
      }
      headers['content-type'] = 'application/json'
      headers.accept = request.streaming ? 'application/vnd.amazon.eventstream' : 'application/json'
      if (options.apiKey !== undefined) {
        headers.authorization = `Bearer ${options.apiKey}`
        return
      }
      const defaultPort = origin.protocol === 'https' ? 443 : 80
      const host = origin.port === defaultPort ? origin.host : `${origin.host}:${origin.port}`
      headers.host = host
      // Only headers the gateway will not change are signed (host, content type, accept and the
      // signer's own x-amz-*): hop-by-hop and tracing headers added later must not break it.
      const toSign = {
        method: 'POST',
        protocol: `${origin.protocol}:`,
        hostname: origin.host,
        port: origin.port,
        path: path(request),
        query: {},
        headers: { host, 'content-type': headers['content-type'], accept: headers.accept },
        body: request.body
      }
      let signed: { headers: Record<string, string> }
      try {
        signed = await getSigner().sign(toSign, { signingDate: options.now?.() ?? new Date() })
      } catch (err) {
        // The chain's messages name the sources it tried, never a secret.
        throw translationError(500, 'api_error', `no AWS credentials to sign the Bedrock request: ${(err as Error).message}`)
      }
      for (const [name, value] of Object.entries(signed.headers)) {
        const lower = name.toLowerCase()
        if (lower === 'authorization' || lower.startsWith('x-amz-')) headers[lower] = value
      }
    }
  }
}
