/**
 * Azure OpenAI. Path shapes (Azure's docs, "API version lifecycle"; agentgateway's as well):
 * - the v1 API (the default, `apiVersion: v1`): `/openai/v1/chat/completions`, the
 *   deployment named as `model` in the body, no `api-version` (`preview`: the same with
 *   `?api-version=preview`);
 * - a dated `apiVersion` (`2024-10-21`): `/openai/deployments/{deployment}/chat/completions?api-version=...`;
 * - an AI Foundry project (`resourceType: foundry`): `/api/projects/{project}/openai/v1/chat/completions`.
 * The key (backendAuth) goes in the `api-key` header (the header policy the config adds);
 * with backendAuth.azure a Microsoft Entra ID token goes as `Authorization: Bearer` instead
 * (azure-token.ts), the client's credential headers removed.
 */

import type { AiBackendSpecIR } from '../../ir/types.ts'
import type { LlmOperation, ProviderAdapter, ProviderRequest } from '../provider.ts'
import { azureAccessTokens } from './azure-token.ts'
import type { AccessTokenSource } from './google-token.ts'

/** Credentials a client may have sent; never forwarded with an Entra token. */
const FOREIGN_CREDENTIALS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key']

export const AZURE_DEFAULT_PREFIX = '/openai/v1'

export function azureAdapter (spec: AiBackendSpecIR, tokens?: AccessTokenSource): ProviderAdapter {
  // One token cache per backend (the adapter is made once per backend IR).
  const entra = tokens ?? (spec.azure?.auth !== undefined ? azureAccessTokens({ auth: spec.azure.auth }) : undefined)
  const version = spec.azure?.apiVersion
  const project = spec.azure?.project
  const dated = version !== undefined && version !== 'v1' && version !== 'preview' && project === undefined
  const suffix: Record<LlmOperation, string> = { chat: '/chat/completions', embeddings: '/embeddings', models: '/models' }
  const query = version !== undefined && version !== 'v1' && project === undefined ? `?api-version=${encodeURIComponent(version)}` : ''
  // The v1 API's base: a Foundry project's, else the resource's (`/openai/v1`, or pathPrefix).
  const base = project !== undefined ? `/api/projects/${encodeURIComponent(project)}/openai/v1` : spec.pathPrefix
  return {
    format: 'openai-chat',
    // The Responses API: `/openai/v1/responses`, or `/openai/responses?api-version=` (dated).
    passThrough: ['openai-responses'],
    system: 'azure.ai.openai',
    path: (request: ProviderRequest) => {
      if (request.format === 'openai-responses') return dated ? `/openai/responses${query}` : `${base}/responses${query}`
      if (request.operation === 'chat' && spec.path !== undefined) return spec.path + query
      if (!dated) return base + suffix[request.operation] + query
      // Dated API: models are per resource, the rest per deployment.
      if (request.operation === 'models') return `/openai/models${query}`
      const deployment = encodeURIComponent(spec.azure?.deployment ?? request.model)
      return `/openai/deployments/${deployment}${suffix[request.operation]}${query}`
    },
    authorize: entra === undefined
      ? () => {}
      : async (request: ProviderRequest) => {
        const token = await entra.token()
        for (const name of FOREIGN_CREDENTIALS) delete request.headers[name]
        request.headers.authorization = `Bearer ${token}`
      }
  }
}
