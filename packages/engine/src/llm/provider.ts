/**
 * What the `ai` backend needs of each provider besides its wire format: where an operation
 * goes (path and query, per model and streaming) and how a request is authorised (a header
 * with a key, an OAuth2 access token, an AWS SigV4 signature over the final body).
 *
 * One module per provider under `llm/providers/` exports a `ProviderAdapter`; the OpenAI-
 * compatible presets (Ollama, vLLM, Groq, ...) are data on top of the `openAI` adapter
 * (a base URL and a path prefix), not modules of their own.
 */

import type { WireFormatName } from './canonical.ts'

/** Operations an `ai` route serves, told apart by the client's path. */
export type LlmOperation = 'chat' | 'embeddings' | 'models'

export interface ProviderRequest {
  operation: LlmOperation
  /** The wire format of `body`: the adapter's `format`, or one of its `passThrough` formats. Absent = `format`. */
  format?: WireFormatName
  /** The model the provider is asked for (after the backend's override). */
  model: string
  streaming: boolean
  /** The final body, already in the provider's format (signers hash it). */
  body: Buffer
  /** Headers to send; the adapter adds its authorisation here. Lower-case names. */
  headers: Record<string, string>
}

export interface ProviderAdapter {
  /** Wire format of the provider's chat API. */
  readonly format: WireFormatName
  /**
   * Other client formats the provider takes as they are (OpenAI's and Azure's Responses
   * API): a client speaking one of them is passed through, not translated; `path` gets the
   * request's `format` to choose the endpoint.
   */
  readonly passThrough?: readonly WireFormatName[]
  /**
   * The query sent is only the one `path` gives (none when it gives none), never the client's:
   * set by providers whose signature covers the query (Bedrock's SigV4). Absent: a path
   * without a query keeps the client's.
   */
  readonly ownQuery?: boolean
  /**
   * How the provider takes embeddings when its API for them is not OpenAI's: Bedrock's
   * InvokeModel bodies (Titan, Cohere) or Vertex AI's `:predict` (llm/operations.ts translates).
   * Absent: an OpenAI embeddings body, passed as it is (or `path` refuses the operation).
   */
  readonly embeddings?: 'bedrock-invoke' | 'vertex-predict'
  /** `gen_ai.provider.name` (OpenTelemetry semantic conventions): `openai`, `anthropic`, `gcp.gemini`, `gcp.vertex_ai`, `aws.bedrock`, `azure.ai.openai`, ... */
  readonly system: string
  /** Path and query for the request (`/v1/messages`, `/v1beta/models/m:streamGenerateContent?alt=sse`). */
  path (request: ProviderRequest): string
  /**
   * Adds the provider's authorisation to `request.headers` (and any fixed headers such as
   * `anthropic-version`). Async: an access token may have to be fetched or refreshed. Errors
   * are thrown as `TranslationError`-shaped objects (status 500/503: the gateway's own
   * credentials failed, never the client's fault).
   */
  authorize (request: ProviderRequest, origin: { host: string, port: number, protocol: 'http' | 'https' }): void | Promise<void>
  /**
   * Optional last change to the JSON body, already in the provider's format (translated or
   * passed through), before it is serialised and authorised: Vertex AI's Anthropic models take
   * the Messages body without `model` (it is in the path) and with `anthropic_version`.
   * Adapters without it send the body as it is.
   */
  adaptBody? (body: Record<string, unknown>, request: Pick<ProviderRequest, 'operation' | 'model' | 'streaming'>): Record<string, unknown>
}
