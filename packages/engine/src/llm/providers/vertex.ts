/**
 * Vertex AI: Google's Gemini models and Anthropic's Claude models in a Google Cloud project,
 * authorised by an OAuth2 access token (`Authorization: Bearer`, see google-token.ts).
 *
 * - Gemini (`publisher: google`): the Gemini API's body and answers, at
 *   `/v1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent`
 *   or `:streamGenerateContent?alt=sse`.
 * - Claude (`publisher: anthropic`): the Anthropic Messages body at
 *   `.../publishers/anthropic/models/{model}:rawPredict` or `:streamRawPredict`, without `model`
 *   (it is in the path) and with `anthropic_version: "vertex-2023-10-16"` in the body — Anthropic's
 *   and Google's "Claude on Vertex AI" guides; answers and streams are the Messages API's own.
 * - Host: `{region}-aiplatform.googleapis.com`, `aiplatform.googleapis.com` for the `global`
 *   region (the default), `aiplatform.{us|eu}.rep.googleapis.com` for the multi-regions.
 * - Embeddings go to Google's text-embedding models' `:predict`
 *   (`.../publishers/google/models/{model}:predict`, `instances` / `predictions`), translated
 *   from and to OpenAI's shape (llm/operations.ts), as agentgateway does; Vertex has no list of
 *   callable models, so `models` is refused (404).
 */

import { translationError, type WireFormatName } from '../canonical.ts'
import type { ProviderAdapter, ProviderRequest } from '../provider.ts'
import { googleAccessTokens, type AccessTokenSource, type ServiceAccountKey } from './google-token.ts'
import { PorticoError } from '../../util/errors.ts'

export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16'

export interface VertexProviderOptions {
  /** The Google Cloud project id. */
  project: string
  /** The location: `us-central1`, `europe-west4`, ..., or `global` (default). */
  region?: string
  /**
   * Whose model: `google` (Gemini) or `anthropic` (Claude). Default: `anthropic` when `model`
   * starts with `claude`, else `google`.
   */
  publisher?: 'google' | 'anthropic'
  /** The backend's model override, if any (only used to infer `publisher`). */
  model?: string
  /** A service-account key, parsed; or `keyFile`; with neither, Application Default Credentials (metadata server). */
  key?: ServiceAccountKey
  keyFile?: string
  /** A token source instead of the above (tests, or tokens managed elsewhere). */
  tokens?: AccessTokenSource
}

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/

/** Multi-region locations, served from regional endpoints of their own (as the Google Gen AI SDK addresses them). */
const MULTI_REGIONS = new Set(['us', 'eu'])

export function vertexHost (region: string): string {
  if (region === 'global') return 'aiplatform.googleapis.com'
  if (MULTI_REGIONS.has(region)) return `aiplatform.${region}.rep.googleapis.com`
  return `${region}-aiplatform.googleapis.com`
}

/** Credentials of other providers a client may have sent; never forwarded to Google. */
const FOREIGN_CREDENTIALS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key']

export function vertexProvider (options: VertexProviderOptions): ProviderAdapter & { readonly defaultOrigin: { host: string, port: number, protocol: 'https' } } {
  const region = options.region ?? 'global'
  if (!NAME.test(options.project)) throw new PorticoError('PORTICO_LLM_PROVIDER_SETTINGS', `vertex project ${JSON.stringify(options.project)} is not a Google Cloud project id`)
  if (!NAME.test(region)) throw new PorticoError('PORTICO_LLM_PROVIDER_SETTINGS', `vertex region ${JSON.stringify(region)} is not a Google Cloud location`)
  const publisher = options.publisher ?? (options.model?.startsWith('claude') === true ? 'anthropic' : 'google')
  const format: WireFormatName = publisher === 'anthropic' ? 'anthropic-messages' : 'gemini'
  const base = `/v1/projects/${options.project}/locations/${region}`
  const tokens = options.tokens ?? googleAccessTokens({ key: options.key, keyFile: options.keyFile })

  return {
    format,
    system: 'gcp.vertex_ai',
    embeddings: 'vertex-predict',
    defaultOrigin: { host: vertexHost(region), port: 443, protocol: 'https' },
    path (request: ProviderRequest): string {
      // Embeddings: Google's text-embedding models' `:predict` (translated, llm/operations.ts), whatever the chat publisher.
      if (request.operation === 'embeddings') return `${base}/publishers/google/models/${encodeURIComponent(request.model.replace(/^publishers\/google\/models\//, ''))}:predict`
      if (request.operation === 'models') throw translationError(404, 'not_found', 'Vertex AI has no model list of the models a project can call (its Model Garden lists publishers\' models under another API)')
      // A leading publisher path in the model (`publishers/google/models/x`, as Vertex names models) is accepted.
      const name = request.model.replace(/^publishers\/[a-z]+\/models\//, '')
      const model = `${base}/publishers/${publisher}/models/${encodeURIComponent(name)}`
      if (publisher === 'anthropic') return `${model}:${request.streaming ? 'streamRawPredict' : 'rawPredict'}`
      return request.streaming ? `${model}:streamGenerateContent?alt=sse` : `${model}:generateContent`
    },
    async authorize (request: ProviderRequest): Promise<void> {
      const token = await tokens.token()
      for (const name of FOREIGN_CREDENTIALS) delete request.headers[name]
      request.headers.authorization = `Bearer ${token}`
    },
    ...(publisher === 'anthropic'
      ? {
          adaptBody (body: Record<string, unknown>, request: Pick<ProviderRequest, 'operation'>): Record<string, unknown> {
            if (request.operation !== 'chat') return body
            const { model: _model, ...rest } = body
            return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest }
          }
        }
      : {})
  }
}
