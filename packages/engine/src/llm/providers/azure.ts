/**
 * Azure OpenAI. Two path shapes (Azure's docs, "API version lifecycle"):
 * - the v1 API (the default, `apiVersion: v1`): `/openai/v1/chat/completions`, the
 *   deployment named as `model` in the body, no `api-version`;
 * - a dated `apiVersion` (`2024-10-21`): `/openai/deployments/{deployment}/chat/completions?api-version=...`.
 * The key (backendAuth) goes in the `api-key` header (the header policy the config adds).
 */

import type { AiBackendSpecIR } from '../../ir/types.ts'
import type { LlmOperation, ProviderAdapter, ProviderRequest } from '../provider.ts'

export const AZURE_DEFAULT_PREFIX = '/openai/v1'

export function azureAdapter (spec: AiBackendSpecIR): ProviderAdapter {
  const version = spec.azure?.apiVersion
  const dated = version !== undefined && version !== 'v1'
  const suffix: Record<LlmOperation, string> = { chat: '/chat/completions', embeddings: '/embeddings', models: '/models' }
  const query = dated ? `?api-version=${encodeURIComponent(version)}` : ''
  return {
    format: 'openai-chat',
    // The Responses API: `/openai/v1/responses`, or `/openai/responses?api-version=` (dated).
    passThrough: ['openai-responses'],
    system: 'azure.ai.openai',
    path: (request: ProviderRequest) => {
      if (request.format === 'openai-responses') return dated ? `/openai/responses${query}` : `${spec.pathPrefix}/responses`
      if (request.operation === 'chat' && spec.path !== undefined) return spec.path + query
      if (!dated) return spec.pathPrefix + suffix[request.operation]
      // Dated API: models are per resource, the rest per deployment.
      if (request.operation === 'models') return `/openai/models${query}`
      const deployment = encodeURIComponent(spec.azure?.deployment ?? request.model)
      return `/openai/deployments/${deployment}${suffix[request.operation]}${query}`
    },
    authorize: () => {}
  }
}
