/**
 * Anthropic's API (`ai.provider.anthropic`): Messages at `/v1/messages`, the model list at
 * `/v1/models`, authorised with `x-api-key` and versioned with `anthropic-version`.
 *
 * The key: `backendAuth: {key}` is applied as `authorization: Bearer <key>` (config/to-ir.ts,
 * as for every backend), and a client of another format (an OpenAI SDK) sends its own token
 * so too. Anthropic's API reference and examples authorise with `x-api-key` (the API also
 * accepts the bearer the SDK 1.x sends), so a bearer token is moved there — replacing a client's own `x-api-key`, since the bearer (when
 * backendAuth set it) is the gateway's key — and `authorization` is not sent on: one key, one
 * header.
 */

import { translationError } from '../canonical.ts'
import type { ProviderAdapter, ProviderRequest } from '../provider.ts'

/** The API version every current Anthropic SDK sends; the Messages API's only one. */
export const ANTHROPIC_VERSION = '2023-06-01'

export interface AnthropicProviderOptions {
  /** `anthropic-version` to send when the client sent none (default `ANTHROPIC_VERSION`). */
  version?: string
}

export function anthropicProvider (options: AnthropicProviderOptions = {}): ProviderAdapter {
  const version = options.version ?? ANTHROPIC_VERSION
  return {
    format: 'anthropic-messages',
    system: 'anthropic',
    path (request: ProviderRequest): string {
      switch (request.operation) {
        case 'chat': return '/v1/messages'
        case 'models': return '/v1/models'
        case 'embeddings': throw translationError(404, 'not_found', 'Anthropic has no embeddings API')
      }
    },
    authorize (request: ProviderRequest): void {
      const headers = request.headers
      const bearer = /^bearer\s+(.+)$/i.exec(headers.authorization ?? '')
      if (bearer !== null) headers['x-api-key'] = bearer[1]!.trim()
      delete headers.authorization
      headers['anthropic-version'] ??= version
      if (request.operation === 'chat') headers['content-type'] = 'application/json'
    }
  }
}
