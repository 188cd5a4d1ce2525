/**
 * The Gemini API (generativelanguage.googleapis.com): `POST /v1beta/models/{model}:generateContent`,
 * or `:streamGenerateContent?alt=sse` for a stream (server-sent events, one
 * GenerateContentResponse per event), authorised by an API key in `x-goog-api-key`.
 *
 * Embeddings and the model list go to the Gemini API's OpenAI-compatible endpoints
 * (`/v1beta/openai/embeddings`, `/v1beta/openai/models`), which take OpenAI's bodies as they are,
 * with the key as a bearer token (Google's OpenAI-compatibility guide).
 */

import type { ProviderAdapter, ProviderRequest } from '../provider.ts'
import { PorticoError } from '../../util/errors.ts'

export const GEMINI_DEFAULT_ORIGIN = { host: 'generativelanguage.googleapis.com', port: 443, protocol: 'https' } as const

export interface GeminiProviderOptions {
  /** The API key. Without one, requests go with whatever credentials the client's headers carry. */
  apiKey?: string
  /** The API version in the path: `v1beta` (default; every current feature) or `v1`. */
  apiVersion?: string
}

/** Credentials of other providers a client may have sent; never forwarded to Google. */
const FOREIGN_CREDENTIALS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key']

/**
 * `models/{model}` for a model name from config or a client: a leading `models/` is accepted,
 * `tunedModels/{id}` kept as a collection, anything else one escaped path segment — a model name
 * never changes the path beyond its own segment.
 */
export function geminiModelPath (model: string): string {
  const name = model.startsWith('models/') ? model.slice(7) : model
  const tuned = /^tunedModels\/([A-Za-z0-9._-]+)$/.exec(name)
  if (tuned !== null) return `tunedModels/${tuned[1] as string}`
  return `models/${encodeURIComponent(name)}`
}

export function geminiProvider (options: GeminiProviderOptions = {}): ProviderAdapter & { readonly defaultOrigin: typeof GEMINI_DEFAULT_ORIGIN } {
  const version = options.apiVersion ?? 'v1beta'
  if (!/^v1(beta|alpha)?$/.test(version)) throw new PorticoError('PORTICO_LLM_PROVIDER_SETTINGS', `gemini apiVersion must be v1, v1beta or v1alpha, not ${JSON.stringify(version)}`)
  return {
    format: 'gemini',
    system: 'gcp.gemini',
    defaultOrigin: GEMINI_DEFAULT_ORIGIN,
    path (request: ProviderRequest): string {
      if (request.operation === 'embeddings') return `/${version}/openai/embeddings`
      if (request.operation === 'models') return `/${version}/openai/models`
      const model = geminiModelPath(request.model)
      return request.streaming ? `/${version}/${model}:streamGenerateContent?alt=sse` : `/${version}/${model}:generateContent`
    },
    authorize (request: ProviderRequest): void {
      if (options.apiKey === undefined) return
      for (const name of FOREIGN_CREDENTIALS) delete request.headers[name]
      if (request.operation === 'chat') request.headers['x-goog-api-key'] = options.apiKey
      else request.headers.authorization = `Bearer ${options.apiKey}`
    }
  }
}
