/**
 * Anthropic's API (`ai.provider.anthropic`): Messages at `/v1/messages`, the model list at
 * `/v1/models`, authorised with `x-api-key` and versioned with `anthropic-version`.
 *
 * The key: `backendAuth: {key}` is put in `x-api-key` by the header policy the config derives
 * from the provider table (llm/providers/index.ts), which also removes the client's
 * `authorization` and other providers' key headers — one place for keys, so this adapter
 * moves none. Without backendAuth the client's own credentials pass as sent (the API takes a
 * key as `x-api-key` or `authorization: Bearer`).
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
      headers['anthropic-version'] ??= version
      if (request.operation === 'chat') headers['content-type'] = 'application/json'
    }
  }
}
