/**
 * The provider adapters this build has, and each provider's defaults: where its API is, its
 * base path, its wire format and how its key is sent. A provider without an adapter here is
 * refused at load ("not available in this build"), not accepted and broken.
 *
 * Keys: backendAuth's key is put in the provider's header by ONE place, the header policy
 * config/to-ir.ts derives from `key` below (per backend reference, redacted in dumps and
 * traces like every header a policy sets). That policy also removes the credentials of the
 * other providers' headers (`CREDENTIAL_HEADERS`) a client sent, so a client's key for the
 * gateway never reaches a provider. The adapters therefore place no key of their own
 * (gemini's `apiKey` stays unset); only Vertex, which has no key, mints its own token.
 */

import type { AiBackendSpecIR, AiProviderName, AiWireFormatIR } from '../../ir/types.ts'
import type { ProviderAdapter } from '../provider.ts'
import { formatByName } from '../formats/index.ts'
import { openaiAdapter, openaiResponsesAdapter } from './openai.ts'
import { azureAdapter, AZURE_DEFAULT_PREFIX } from './azure.ts'
import { bedrockAdapter } from './bedrock.ts'
import { anthropicProvider } from './anthropic.ts'
import { geminiProvider } from './gemini.ts'
import { vertexProvider } from './vertex.ts'

export interface ProviderDefaults {
  /** `https://host[:port]` (or http for local servers); null when it depends on the config (azure, vertex, bedrock, custom). */
  baseUrl: string | null
  pathPrefix: string
  format: AiWireFormatIR
  /** `gen_ai.provider.name`. */
  system: string
  /** How backendAuth's key is sent: a header, with `Bearer ` or as is; null when the provider signs requests instead. */
  key: { header: string, bearer: boolean } | null
}

const BEARER = { header: 'authorization', bearer: true }

/** Headers the providers take keys in: with backendAuth, those but the provider's own are removed. */
export const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'x-goog-api-key'] as const

function compatible (baseUrl: string, pathPrefix: string, system: string): ProviderDefaults {
  return { baseUrl, pathPrefix, format: 'openai-chat', system, key: BEARER }
}

/**
 * Documented base URLs (each provider's OpenAI-compatibility page; see docs/llm.md). The
 * local servers' are their default listen ports.
 */
export const PROVIDERS: Readonly<Record<Exclude<AiProviderName, 'custom'>, ProviderDefaults>> = {
  openAI: compatible('https://api.openai.com', '/v1', 'openai'),
  azure: { baseUrl: null, pathPrefix: AZURE_DEFAULT_PREFIX, format: 'openai-chat', system: 'azure.ai.openai', key: { header: 'api-key', bearer: false } },
  anthropic: { baseUrl: 'https://api.anthropic.com', pathPrefix: '/v1', format: 'anthropic-messages', system: 'anthropic', key: { header: 'x-api-key', bearer: false } },
  gemini: { baseUrl: 'https://generativelanguage.googleapis.com', pathPrefix: '/v1beta', format: 'gemini', system: 'gcp.gemini', key: { header: 'x-goog-api-key', bearer: false } },
  vertex: { baseUrl: null, pathPrefix: '/v1', format: 'gemini', system: 'gcp.vertex_ai', key: null },
  bedrock: { baseUrl: null, pathPrefix: '', format: 'bedrock-converse', system: 'aws.bedrock', key: null },
  ollama: compatible('http://localhost:11434', '/v1', 'ollama'),
  vllm: compatible('http://localhost:8000', '/v1', 'vllm'),
  llamaCpp: compatible('http://localhost:8080', '/v1', 'llama.cpp'),
  mistral: compatible('https://api.mistral.ai', '/v1', 'mistral_ai'),
  groq: compatible('https://api.groq.com', '/openai/v1', 'groq'),
  deepseek: compatible('https://api.deepseek.com', '', 'deepseek'),
  xai: compatible('https://api.x.ai', '/v1', 'x_ai'),
  openrouter: compatible('https://openrouter.ai', '/api/v1', 'openrouter'),
  together: compatible('https://api.together.ai', '/v1', 'together'),
  fireworks: compatible('https://api.fireworks.ai', '/inference/v1', 'fireworks'),
  cerebras: compatible('https://api.cerebras.ai', '/v1', 'cerebras')
}

/** Defaults of a `custom` provider, by the format it speaks. */
export function customDefaults (format: AiWireFormatIR): ProviderDefaults {
  switch (format) {
    case 'anthropic-messages': return { ...PROVIDERS.anthropic, baseUrl: null }
    case 'gemini': return { ...PROVIDERS.gemini, baseUrl: null }
    default: return { baseUrl: null, pathPrefix: '/v1', format, system: 'custom', key: BEARER }
  }
}

/**
 * Where backendAuth.passthrough puts the client's validated token: the provider's key header
 * (Bearer, `x-api-key`, `x-goog-api-key`), except that Azure takes a JWT — an Entra ID token
 * the client got for Azure, validated by jwtAuth — as `Authorization: Bearer` (its `api-key`
 * header takes keys only). Null: the provider signs its requests (no token can stand in).
 */
export function passthroughHeader (spec: Pick<AiBackendSpecIR, 'provider' | 'format'>, kind: 'jwt' | 'apiKey'): ProviderDefaults['key'] {
  if (spec.provider === 'azure' && kind === 'jwt') return BEARER
  return spec.provider === 'custom' ? customDefaults(spec.format).key : PROVIDERS[spec.provider].key
}

/**
 * An adapter whose paths start with `native` (its API's own base path: `/v1`, `/v1beta`) sent
 * under the backend's `pathPrefix` instead, and `pathOverride` as the chat path when it has
 * one — what `pathPrefix` and `pathOverride` mean for every provider.
 */
function rebased<A extends ProviderAdapter> (adapter: A, spec: AiBackendSpecIR, native: string, system = adapter.system): A {
  if (spec.pathPrefix === native && spec.path === undefined && system === adapter.system) return adapter
  return {
    ...adapter,
    system,
    path: request => {
      if (request.operation === 'chat' && spec.path !== undefined) return spec.path
      const path = adapter.path(request)
      return path.startsWith(native) ? spec.pathPrefix + path.slice(native.length) : path
    }
  }
}

/**
 * The adapter for a backend, or a sentence saying why this build cannot serve it. Adapter
 * factories by provider; the lead adds bedrock here.
 */
export function providerAdapter (spec: AiBackendSpecIR): ProviderAdapter | string {
  switch (spec.provider) {
    case 'azure': return azureAdapter(spec)
    case 'bedrock': return bedrockAdapter(spec)
    case 'anthropic': return rebased(anthropicProvider(), spec, '/v1')
    case 'gemini':
      // Gemini's chat path names the model and the method (streaming or not): no one path
      // can stand for it.
      if (spec.path !== undefined) return 'provider gemini takes no pathOverride (its paths name the model and the method): set pathPrefix'
      return rebased(geminiProvider(), spec, '/v1beta')
    case 'vertex': {
      const vertex = spec.vertex
      if (vertex === undefined) return 'provider vertex needs projectId and region'
      if (spec.path !== undefined) return 'provider vertex takes no pathOverride (its paths name the project, the model and the method)'
      // Claude models (`claude-…`, or named with their publisher path) speak Anthropic Messages on Vertex.
      const model = spec.model ?? ''
      const publisher = /^publishers\/anthropic\//.test(model) || model.startsWith('claude') ? 'anthropic' : 'google'
      try {
        return vertexProvider({ project: vertex.projectId, region: vertex.region, publisher, ...(spec.model !== undefined ? { model: spec.model } : {}), ...(vertex.credential !== undefined ? { key: vertex.credential } : {}) })
      } catch (err) {
        return (err as Error).message
      }
    }
    case 'custom':
      switch (spec.format) {
        case 'openai-chat': return openaiAdapter(spec, 'custom')
        case 'openai-responses': return openaiResponsesAdapter(spec)
        // Anthropic- and Gemini-compatible servers: the providers' paths under the server's base path.
        case 'anthropic-messages': return rebased(anthropicProvider(), spec, '/v1', 'custom')
        case 'gemini':
          if (spec.path !== undefined) return 'custom providers of format gemini take no pathOverride (the paths name the model and the method): set pathPrefix'
          return rebased(geminiProvider(), spec, '/v1beta', 'custom')
        default:
          if (formatByName(spec.format) === undefined) return `the ${spec.format} format is not available in this build`
          return `custom providers of format ${spec.format} are not available in this build`
      }
    default:
      return openaiAdapter(spec, PROVIDERS[spec.provider].system)
  }
}
