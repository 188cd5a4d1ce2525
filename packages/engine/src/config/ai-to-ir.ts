/**
 * `ai` backends: which provider, where its API is (its documented base URL, or the config's
 * hostOverride / resourceName / region), its base path and wire format, and how backendAuth's
 * key is sent (llm/providers/index.ts has the table). A provider this build has no adapter
 * for is refused here, with the reason, rather than accepted and broken at the first request.
 */

import type { AiBackendConfig, RouteBackendConfig } from './schema.ts'
import type { AiBackendSpecIR, AiPricingIR, AiProviderName, AiRatesIR, AzureAuthIR, BackendIR, BackendRefIR, FailoverProviderIR, GcpServiceAccountKeyIR } from '../ir/types.ts'
import { parseRate } from '../llm/cost.ts'
import { customDefaults, providerAdapter, PROVIDERS, type ProviderDefaults } from '../llm/providers/index.ts'
import { vertexHost } from '../llm/providers/vertex.ts'
import { bedrockHost } from '../llm/providers/bedrock.ts'
import { hostPort } from '../util/host-port.ts'

type Path = Array<string | number>
type ParseHost = (text: string) => { protocol: 'http' | 'https', host: string, port: number } | string

function providerName (a: AiBackendConfig): AiProviderName[] {
  const provider = a.provider ?? {}
  return (Object.keys(provider) as AiProviderName[]).filter(k => provider[k] !== undefined)
}

/** A backend of one provider (`provider` set): what every function below but aiGroupsToRefs reads. */
type OneProvider = AiBackendConfig & { provider: NonNullable<AiBackendConfig['provider']> }

function defaultsOf (a: OneProvider, name: AiProviderName): ProviderDefaults {
  return name === 'custom' ? customDefaults(a.provider.custom!.format) : PROVIDERS[name]
}

/** The header and form backendAuth's key takes for this backend's provider (null: the provider signs requests; the key is refused). */
export function aiKeyHeader (a: AiBackendConfig): ProviderDefaults['key'] {
  const names = providerName(a)
  return names.length === 1 ? defaultsOf(a as OneProvider, names[0]!).key : { header: 'authorization', bearer: true }
}

/** Where the provider's API is when hostOverride does not say. */
function defaultBaseUrl (a: OneProvider, name: AiProviderName, defaults: ProviderDefaults): string | null {
  switch (name) {
    case 'azure': {
      const azure = a.provider.azure!
      if (azure.resourceName === undefined) return null
      return azure.resourceType === 'foundry' ? `https://${azure.resourceName}.services.ai.azure.com` : `https://${azure.resourceName}.openai.azure.com`
    }
    // The adapters' own host rules (Vertex's multi-regions have endpoints of their own).
    case 'vertex': return `https://${vertexHost(a.provider.vertex!.region)}`
    case 'bedrock': return `https://${bedrockHost(a.provider.bedrock!.region)}`
    default: return defaults.baseUrl
  }
}

/** backendAuth as written (`key`, or `aws` keys): bedrock takes it into its IR, the other providers as a header. */
export type AiBackendAuth = NonNullable<NonNullable<RouteBackendConfig['policies']>['backendAuth']>

/**
 * How a bedrock backend authorises its requests: a Bedrock API key (`key`), explicit AWS keys
 * (`aws: {accessKeyId, secretAccessKey}`), else the AWS default credential chain.
 */
function bedrockAuth (auth: AiBackendAuth | undefined, policiesAt: Path, fail: (p: Path, message: string) => void): NonNullable<AiBackendSpecIR['bedrock']>['auth'] {
  if (auth === undefined) return { kind: 'chain' }
  const at = [...policiesAt, 'backendAuth']
  // A key file is read by config/to-ir.ts, which passes the key in its place (one it could not read was reported there).
  if (auth.key !== undefined) return typeof auth.key === 'string' ? { kind: 'apiKey', apiKey: auth.key } : { kind: 'chain' }
  const aws = auth.aws ?? {}
  if ((aws.accessKeyId === undefined) !== (aws.secretAccessKey === undefined)) {
    fail([...at, 'aws'], 'accessKeyId and secretAccessKey go together (or neither: the AWS default credential chain)')
    return { kind: 'chain' }
  }
  if (aws.accessKeyId === undefined) {
    if (aws.sessionToken !== undefined) fail([...at, 'aws', 'sessionToken'], 'needs accessKeyId and secretAccessKey')
    return { kind: 'chain' }
  }
  return { kind: 'keys', accessKeyId: aws.accessKeyId, secretAccessKey: aws.secretAccessKey!, ...(aws.sessionToken !== undefined ? { sessionToken: aws.sessionToken } : {}) }
}

type RatesConfig = Partial<Record<keyof AiRatesIR, string | number>>

/** One set of rates, each parsed exactly (llm/cost.ts); input and output are required. */
function translateRates (r: RatesConfig, path: Path, fail: (p: Path, message: string) => void): AiRatesIR | undefined {
  const out: Partial<AiRatesIR> = {}
  let ok = true
  for (const key of ['input', 'output', 'cacheRead', 'cacheWrite', 'reasoning'] as const) {
    const value = r[key]
    if (value === undefined) continue
    const rate = parseRate(value)
    if (typeof rate === 'string') {
      fail([...path, key], rate)
      ok = false
    } else out[key] = rate
  }
  for (const key of ['input', 'output'] as const) {
    if (out[key] === undefined && r[key] === undefined) {
      fail([...path, key], 'is required with the other rates')
      ok = false
    }
  }
  return ok ? out as AiRatesIR : undefined
}

function translatePricing (p: NonNullable<AiBackendConfig['pricing']>, path: Path, fail: (p: Path, message: string) => void): AiPricingIR | undefined {
  const pricing: AiPricingIR = { currency: p.currency ?? 'USD', models: [] }
  const { currency: _currency, models = [], ...backendWide } = p
  if (Object.keys(backendWide).length > 0) {
    const rates = translateRates(backendWide, path, fail)
    if (rates === undefined) return undefined
    pricing.rates = rates
  }
  for (const [i, entry] of models.entries()) {
    const { model, ...r } = entry
    const rates = translateRates(r, [...path, 'models', i], fail)
    if (rates === undefined) return undefined
    pricing.models.push({ model, rates })
  }
  if (pricing.rates === undefined && pricing.models.length === 0) {
    fail(path, 'prices nothing: give input and output rates, or models')
    return undefined
  }
  return pricing
}

/**
 * What of backendAuth goes into an ai backend's IR (config/to-ir.ts reads and checks it):
 * `gcpCredential`, the service-account key backendAuth.gcp names, for Vertex (absent =
 * Application Default Credentials); `azureAuth`, where Entra ID tokens come from; `passthrough`,
 * the client's validated token as the provider's key.
 */
export interface AiAuthIR {
  gcpCredential?: GcpServiceAccountKeyIR | undefined
  azureAuth?: AzureAuthIR | undefined
  passthrough?: boolean
}

/** backendAuth.azure (agentgateway's shape) as the IR says it, or undefined after a report. */
export function azureAuthToIR (azure: NonNullable<AiBackendAuth['azure']>, at: Path, fail: (p: Path, message: string) => void): AzureAuthIR | undefined {
  const hosts = {
    ...(azure.authorityHost !== undefined ? { authorityHost: azure.authorityHost.replace(/\/$/, '') } : {}),
    ...(azure.imdsEndpoint !== undefined ? { imdsEndpoint: azure.imdsEndpoint } : {})
  }
  const explicit = azure.explicitConfig
  if ((explicit === undefined) === (azure.implicit === undefined)) {
    fail(at, 'needs exactly one of explicitConfig or implicit')
    return undefined
  }
  if (explicit === undefined) return { kind: 'implicit', ...hosts }
  const sources = (['clientSecret', 'managedIdentity', 'workloadIdentity'] as const).filter(k => explicit[k] !== undefined)
  if (sources.length !== 1) {
    fail([...at, 'explicitConfig'], 'needs exactly one of clientSecret, managedIdentity or workloadIdentity')
    return undefined
  }
  if (explicit.clientSecret !== undefined) {
    const { tenantId, clientId, clientSecret } = explicit.clientSecret
    return { kind: 'clientSecret', tenantId, clientId, clientSecret, ...hosts }
  }
  if (explicit.workloadIdentity !== undefined) return { kind: 'workloadIdentity', ...hosts }
  const user = explicit.managedIdentity!.userAssignedIdentity
  if (user === undefined) return { kind: 'managedIdentity', ...hosts }
  const ids = (['clientId', 'objectId', 'resourceId'] as const).filter(k => user[k] !== undefined)
  if (ids.length !== 1) {
    fail([...at, 'explicitConfig', 'managedIdentity', 'userAssignedIdentity'], 'needs exactly one of clientId, objectId or resourceId')
    return undefined
  }
  const id = ids[0]!
  return { kind: 'managedIdentity', userAssignedIdentity: { [id]: user[id]! } as { clientId: string }, ...hosts }
}

/**
 * `auth`: the backend's backendAuth when its provider takes it itself (bedrock); `path` is the
 * `ai` field's, its backendAuth is at the sibling `policies`. `aiAuth`: what else of
 * backendAuth the IR carries (AiAuthIR).
 */
export function translateAiBackend (config: AiBackendConfig, path: Path, fail: (p: Path, message: string) => void, parseHostTarget: ParseHost, auth?: AiBackendAuth, aiAuth: AiAuthIR = {}, policiesAt: Path = [...path.slice(0, -1), 'policies']): BackendIR | undefined {
  if (config.provider === undefined) {
    fail(path, 'needs provider (or groups of providers)')
    return undefined
  }
  const a = config as OneProvider
  const { gcpCredential, azureAuth } = aiAuth
  const names = providerName(a)
  if (names.length !== 1) {
    fail([...path, 'provider'], `needs exactly one provider${names.length > 1 ? ` (got ${names.join(', ')})` : ''}`)
    return undefined
  }
  const provider = names[0]!
  const defaults = defaultsOf(a, provider)
  const base = a.hostOverride ?? defaultBaseUrl(a, provider, defaults)
  if (base === null) {
    fail([...path, 'hostOverride'], provider === 'azure' ? 'set provider.azure.resourceName or hostOverride' : `is required for provider ${provider}`)
    return undefined
  }
  const parsed = parseHostTarget(base)
  if (typeof parsed === 'string') {
    fail([...path, 'hostOverride'], parsed)
    return undefined
  }
  const settings = a.provider[provider] as { model?: string, deploymentName?: string, apiVersion?: string, projectId?: string, region?: string, resourceType?: string, resourceName?: string, projectName?: string }
  const ai: AiBackendSpecIR = { provider, format: defaults.format, pathPrefix: a.pathPrefix ?? defaults.pathPrefix }
  const model = settings.model ?? settings.deploymentName
  if (model !== undefined) ai.model = model
  if (a.pathOverride !== undefined) ai.path = a.pathOverride
  if (a.tokenize === true) ai.tokenize = true
  if (a.pricing !== undefined) {
    const pricing = translatePricing(a.pricing, [...path, 'pricing'], fail)
    if (pricing !== undefined) ai.pricing = pricing
  }
  if (aiAuth.passthrough === true) ai.passthrough = true
  if (provider === 'azure') {
    ai.azure = {}
    if (settings.apiVersion !== undefined) ai.azure.apiVersion = settings.apiVersion
    if (settings.deploymentName !== undefined) ai.azure.deployment = settings.deploymentName
    if (settings.resourceType === 'foundry') {
      const project = settings.projectName ?? settings.resourceName
      if (project === undefined) fail([...path, 'provider', 'azure', 'projectName'], 'is required for resourceType foundry without resourceName')
      else ai.azure.project = project
    }
    if (azureAuth !== undefined) ai.azure.auth = azureAuth
    if (settings.apiVersion !== undefined && settings.apiVersion !== 'v1' && a.pathPrefix !== undefined) fail([...path, 'pathPrefix'], 'does not apply with a dated apiVersion (the deployments paths are fixed)')
  }
  if (provider === 'vertex') {
    ai.vertex = { projectId: settings.projectId!, region: settings.region! }
    if (gcpCredential !== undefined) ai.vertex.credential = gcpCredential
  }
  if (provider === 'bedrock') {
    const bedrock = a.provider.bedrock!
    ai.bedrock = { region: bedrock.region }
    if ((bedrock.guardrailIdentifier === undefined) !== (bedrock.guardrailVersion === undefined)) {
      fail([...path, 'provider', 'bedrock', bedrock.guardrailIdentifier === undefined ? 'guardrailIdentifier' : 'guardrailVersion'], 'guardrailIdentifier and guardrailVersion go together')
    } else if (bedrock.guardrailIdentifier !== undefined) {
      ai.bedrock.guardrail = { identifier: bedrock.guardrailIdentifier, version: bedrock.guardrailVersion! }
    }
    ai.bedrock.auth = bedrockAuth(auth, policiesAt, fail)
    // Converse's paths are per model (/model/{id}/converse): there is no base path to change.
    if (a.pathOverride !== undefined) fail([...path, 'pathOverride'], 'does not apply to provider bedrock (the path is /model/<model>/converse)')
    if (a.pathPrefix !== undefined) fail([...path, 'pathPrefix'], 'does not apply to provider bedrock (the path is /model/<model>/converse)')
  }
  const adapter = providerAdapter(ai)
  if (typeof adapter === 'string') {
    fail([...path, 'provider', provider], adapter)
    return undefined
  }
  // The adapter knows the format (Vertex: Anthropic Messages for Claude models, else Gemini).
  ai.format = adapter.format as AiBackendSpecIR['format']
  const target = hostPort(parsed.host, parsed.port)
  return {
    key: `ai:${a.name}`,
    kind: 'ai',
    name: a.name,
    protocol: parsed.protocol,
    endpoints: [{ host: parsed.host, port: parsed.port }],
    target,
    ai
  }
}

/** Fields of an `ai` backend that belong to each provider once it has `groups`. */
const PER_PROVIDER = ['hostOverride', 'pathOverride', 'pathPrefix', 'tokenize', 'pricing'] as const

/**
 * An `ai` backend with `groups` (agentgateway's failover groups): each provider becomes a
 * backend of its own, `<name>/<provider name>`, with its adapter, key, format and usage, made
 * by `make` as any route backend is (`make` gets the provider as a route backend entry: its
 * `ai` block, and the entry's policies with the provider's own in place of those of the same
 * name). Returns the groups in priority order, or undefined when one cannot be built (every
 * problem reported first).
 */
export function aiGroupsToRefs (b: RouteBackendConfig, at: Path, fail: (p: Path, message: string) => void, make: (provider: RouteBackendConfig, providerAt: Path) => BackendRefIR | undefined): FailoverProviderIR[][] | undefined {
  const a = b.ai!
  const groups = a.groups!
  let ok = true
  if (a.provider !== undefined) {
    fail([...at, 'ai', 'provider'], 'provider and groups exclude each other: put the provider in a group')
    ok = false
  }
  for (const field of PER_PROVIDER) {
    if (a[field] === undefined) continue
    fail([...at, 'ai', field], 'is set on each provider of groups')
    ok = false
  }
  const names = new Set<string>()
  const out: FailoverProviderIR[][] = []
  groups.forEach((g, gi) => {
    const group: FailoverProviderIR[] = []
    g.providers.forEach((p, pi) => {
      const providerAt = [...at, 'ai', 'groups', gi, 'providers', pi]
      if (names.has(p.name)) {
        fail([...providerAt, 'name'], `another provider of backend ${a.name} is named "${p.name}"`)
        ok = false
        return
      }
      names.add(p.name)
      const { name, policies, ...where } = p
      const entry: RouteBackendConfig = { ai: { name: `${a.name}/${name}`, ...where } }
      const merged = { ...b.policies, ...policies }
      if (Object.keys(merged).length > 0) entry.policies = merged
      const ref = make(entry, providerAt)
      if (ref === undefined) ok = false
      else group.push({ backend: ref.backend, policies: ref.policies })
    })
    out.push(group)
  })
  return ok ? out : undefined
}
