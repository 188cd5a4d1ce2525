/**
 * The PorticoPolicy and PorticoBackend CustomResourceDefinitions (portico.dev/v1alpha1),
 * built from the config file's JSON Schema (structural-schema.ts): a PorticoPolicy's
 * `policies` is the standalone `policies:` block (the fields of every attachment level: which
 * ones apply is checked against the target's level when the controller translates it), a
 * PorticoBackend's `mcp` and `ai` are the standalone backend kinds. scripts/gen-crds.ts writes
 * them into the chart; a test checks the chart's copies are current.
 */

import { toStructural, type JsonSchema } from './structural-schema.ts'

export const PORTICO_GROUP = 'portico.dev'
export const PORTICO_VERSION = 'v1alpha1'

/** Where the policy blocks and backend kinds sit in the config file's schema. */
export function configParts (config: JsonSchema): { gateway: JsonSchema, frontend: JsonSchema, route: JsonSchema, backend: JsonSchema, mcp: JsonSchema, ai: JsonSchema } {
  const props = (s: JsonSchema) => s.properties as Record<string, JsonSchema>
  const gateways = props(config).gateways!
  const gatewayFields = props(Object.values(gateways.patternProperties as Record<string, JsonSchema>)[0]!)
  const route = props(props(config).routes!.items as JsonSchema)
  const backendRef = props(route.backends!.items as JsonSchema)
  const frontend: JsonSchema = {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(FRONTEND_FIELDS.map(f => [f, gatewayFields[f]!]))
  }
  return { gateway: gatewayFields.policies!, frontend, route: route.policies!, backend: backendRef.policies!, mcp: backendRef.mcp!, ai: backendRef.ai! }
}

/**
 * A standalone gateway's client-connection settings, which a PorticoPolicy's `frontend`
 * sets on a whole Gateway (as Envoy Gateway's ClientTrafficPolicy, agentgateway's
 * `frontend` policies). The rest of a gateway (port, protocol, hostname, tls) is the Gateway.
 */
export const FRONTEND_FIELDS = ['http2', 'path', 'timeout', 'clientIPDetection', 'upgrades', 'tracing'] as const

const TARGET_REF: JsonSchema = {
  type: 'object',
  required: ['kind', 'name'],
  properties: {
    group: { type: 'string', maxLength: 253, description: 'gateway.networking.k8s.io (Gateway, HTTPRoute, GRPCRoute), "" (Service) or portico.dev (PorticoBackend). Default: gateway.networking.k8s.io.' },
    kind: { type: 'string', enum: ['Gateway', 'HTTPRoute', 'GRPCRoute', 'Service', 'PorticoBackend'] },
    name: { type: 'string', minLength: 1, maxLength: 253 },
    sectionName: { type: 'string', minLength: 1, maxLength: 253, description: 'A listener of the Gateway, or a rule (by name) of the HTTPRoute: only that part gets the policy.' }
  }
}

const ANCESTORS_STATUS: JsonSchema = {
  type: 'object',
  properties: {
    ancestors: {
      description: 'Per Gateway the policy reaches: whether it was accepted (Gateway API PolicyAncestorStatus).',
      type: 'array',
      items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }
    }
  },
  'x-kubernetes-preserve-unknown-fields': true
}

/** The `policies` object: every field of the gateway, route and backend levels. */
export function policiesSchema (config: JsonSchema): JsonSchema {
  const { gateway, route, backend } = configParts(config)
  const properties = { ...(gateway.properties as object), ...(route.properties as object), ...(backend.properties as object) }
  return toStructural({
    type: 'object',
    description: 'The policies, as a standalone config\'s `policies:` block at the target\'s level: a Gateway (or listener) takes gateway policies, an HTTPRoute (or rule) route policies, a Service or PorticoBackend backend policies. Credentials are secretRefs to Secrets of this namespace.',
    properties
  })
}

/** A PorticoBackend's MCP targets: by URL (`mcp` / `sse`) or by Service; never a command to run. */
export function mcpBackendSchema (config: JsonSchema): JsonSchema {
  const mcp = structuredClone(configParts(config).mcp)
  const targets = (mcp.properties as Record<string, JsonSchema>).targets!
  const target = targets.items as JsonSchema
  const fields = target.properties as Record<string, JsonSchema>
  delete fields.stdio
  fields.service = {
    type: 'object',
    required: ['name', 'port'],
    additionalProperties: false,
    description: 'A Service of this namespace serving MCP: streamable HTTP (protocol mcp, the default) or the legacy HTTP+SSE transport (sse) at `path`.',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 253 },
      port: { type: 'integer', minimum: 1, maximum: 65535 },
      path: { type: 'string', pattern: '^/', description: 'Default /mcp (streamable HTTP) or /sse.' },
      protocol: { anyOf: [{ type: 'string', const: 'mcp' }, { type: 'string', const: 'sse' }] }
    }
  }
  target.description = 'An MCP server: exactly one of service, mcp (a streamable HTTP URL) or sse (a legacy HTTP+SSE URL). Servers run as commands (stdio) are not available in a cluster: a proxy pod does not start programs named by a resource.'
  return toStructural(mcp)
}

function crd (kind: string, plural: string, shortNames: string[], description: string, spec: JsonSchema, columns: JsonSchema[]): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${PORTICO_GROUP}` },
    spec: {
      group: PORTICO_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: plural.replace(/ies$/, 'y').replace(/s$/, ''), shortNames, categories: ['portico'] },
      scope: 'Namespaced',
      versions: [{
        name: PORTICO_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [...columns, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
        schema: {
          openAPIV3Schema: {
            description,
            type: 'object',
            required: ['spec'],
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec,
              status: ANCESTORS_STATUS
            }
          }
        }
      }]
    }
  }
}

export function porticoPolicyCrd (config: JsonSchema): JsonSchema {
  return crd('PorticoPolicy', 'porticopolicies', ['ppol'],
    'Portico policies attached to Gateways, listeners, HTTPRoutes, rules, Services or PorticoBackends (Gateway API policy attachment). The more specific target wins; among equals the oldest.',
    {
      type: 'object',
      required: ['targetRefs'],
      'x-kubernetes-validations': [{ rule: 'has(self.policies) || has(self.frontend)', message: 'a PorticoPolicy sets policies, frontend or both' }],
      properties: {
        targetRefs: { type: 'array', minItems: 1, maxItems: 16, items: TARGET_REF, description: 'What the policies attach to, all in this namespace.' },
        policies: policiesSchema(config),
        frontend: toStructural({
          ...configParts(config).frontend,
          description: 'How a Gateway treats what clients send — a standalone gateway\'s http2, path, timeout, clientIPDetection and upgrades — for every listener of the Gateway; only with a whole-Gateway target (no sectionName).'
        })
      }
    },
    [{ name: 'Targets', type: 'string', jsonPath: '.spec.targetRefs[*].name' }])
}

export function porticoBackendCrd (config: JsonSchema): JsonSchema {
  return crd('PorticoBackend', 'porticobackends', ['pbe'],
    'A backend a Service cannot express: MCP servers behind one endpoint, or an LLM provider. HTTPRoute backendRefs reach it with group portico.dev, kind PorticoBackend.',
    {
      type: 'object',
      description: 'Exactly one of mcp or ai, and optionally the backend policies every reference to it gets.',
      properties: {
        mcp: mcpBackendSchema(config),
        ai: toStructural(configParts(config).ai),
        policies: toStructural({
          ...configParts(config).backend,
          description: 'Backend policies (a standalone backend\'s `policies:` block, credentials as secretRefs to Secrets of this namespace) for every route reaching this backend — e.g. the provider key: backendAuth: {key: {secretRef: {name, key}}}. A PorticoPolicy targeting the PorticoBackend adds to them; these win on the same field.'
        })
      }
    },
    [])
}

/** Fields of a standalone `models:` entry a PorticoModel has in its metadata instead. */
export const STANDALONE_ONLY_MODEL_FIELDS = ['name'] as const

const PARENTS_STATUS: JsonSchema = {
  type: 'object',
  properties: {
    model: { type: 'string', description: 'The model names this resource matches (spec.match.model, else its name), as the controller resolved it.' },
    parents: {
      description: 'Per parent: Accepted and ResolvedRefs, as Gateway API routes report them (RouteParentStatus).',
      type: 'array',
      items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }
    }
  },
  'x-kubernetes-preserve-unknown-fields': true
}

/**
 * Hosts a baseURL must not name from a cluster (SSRF), as one RE2 pattern over the URL (CEL's
 * url().getHostname() has no size bound, so a rule reading it exceeds the API server's cost
 * budget; `self.matches` on the bounded string does not): loopback (localhost and *.localhost,
 * 127.0.0.0/8 also as 127.1, [::1], IPv4-mapped ::ffff:127.x), unspecified (0.0.0.0, [::]),
 * IPv4 written as one number or with a leading 0 (octal, hex: 2130706433, 0x7f000001,
 * 0177.0.0.1), link-local (169.254.0.0/16 — the cloud metadata service 169.254.169.254 —,
 * fe80::/10, AWS's [fd00:ec2::254], Alibaba's 100.100.0.0/16) and the metadata services' names. The controller then
 * runs the engine's full check and reports what CEL cannot see in the status.
 */
export const SSRF_HOST_PATTERN = '(?i)^https?://(' + [
  'localhost\\.?', '[^/?#:@]*\\.localhost\\.?',
  '127(\\.[0-9]+){0,3}', '0[0-9x]*(\\.[0-9a-fx]+){0,3}', '0x[0-9a-f]+', '[0-9]+',
  '169\\.254(\\.[0-9]+){0,2}', '100\\.100(\\.[0-9]+){0,2}',
  '\\[(0{0,4}:){2,7}0{0,3}1?\\]', '\\[(0{0,4}:){2,6}ffff:[^\\]]*\\]', '\\[fe[89ab][0-9a-f]:[^\\]]*\\]', '\\[fd00:ec2::254\\]',
  'metadata(\\.google\\.internal|\\.goog)?\\.?', 'instance-data(\\.ec2\\.internal)?\\.?'
].join('|') + ')(:[0-9]*)?([/?#].*)?$'

export const BASE_URL_CEL_RULES: Array<{ rule: string, message: string }> = [
  {
    rule: 'isURL(self) && url(self).getScheme() in [\'http\', \'https\'] && url(self).getHostname() != \'\'',
    message: 'baseURL must be an absolute http(s) URL with a host'
  },
  {
    rule: `!self.matches('${SSRF_HOST_PATTERN.replaceAll('\\', '\\\\')}')`,
    message: 'baseURL must not point at a loopback, link-local or metadata address (SSRF): localhost, 127.0.0.0/8, ::1, 0.0.0.0, 169.254.0.0/16, fe80::/10 and metadata names are refused in a cluster'
  }
]

/** The rules agentgateway's AgentgatewayModel states in CEL, on a PorticoModel's spec. */
export const MODEL_CEL_RULES: Array<{ rule: string, message: string }> = [
  { rule: 'has(self.provider) != has(self.virtualModel)', message: 'exactly one of provider or virtualModel' },
  {
    rule: '!has(self.match) || !has(self.match.model) || self.match.model.matches(\'^([*]|[^*]+|[^*]+[*]|[*][^*]+)$\')',
    message: 'match.model is an exact name or one wildcard: *, prefix-* or *-suffix'
  },
  { rule: '!has(self.virtualModel) || !has(self.policies)', message: 'a virtual model carries no policies (its targets do)' },
  { rule: '!has(self.virtualModel) || !has(self.visibility) || self.visibility == \'Public\'', message: 'a virtual model is Public' }
]

/** A PorticoModel's spec: the standalone `models:` entry with parentRefs instead of its file attachment. */
export function modelSpecSchema (config: JsonSchema): JsonSchema {
  const models = (config.properties as Record<string, JsonSchema>).models
  if (models === undefined) throw new Error('the config schema has no top-level models: list')
  const entry = structuredClone(models.items as JsonSchema)
  const fields = entry.properties as Record<string, JsonSchema>
  for (const f of STANDALONE_ONLY_MODEL_FIELDS) delete fields[f]
  if (Array.isArray(entry.required)) entry.required = (entry.required as string[]).filter(r => !(STANDALONE_ONLY_MODEL_FIELDS as readonly string[]).includes(r))
  const spec = toStructural(entry)
  const props = spec.properties as Record<string, JsonSchema>
  props.parentRefs = { ...props.parentRefs, description: 'Where the model is offered: Gateways and ListenerSets (or one listener of either: sectionName), HTTPRoute rules whose only backendRef is {group: portico.dev, kind: PorticoModel, name: "*"} (sectionName: the rule\'s name; without it every such rule of the route). A Gateway or ListenerSet of another namespace takes the model only when its listener allows routes from this namespace (allowedRoutes); an HTTPRoute must be in this namespace. Internal models and targets of virtual models need none.' }
  // CEL costs are bounded by the strings' lengths: cap what the rules read.
  if (props.baseURL !== undefined) props.baseURL = { ...props.baseURL, maxLength: Math.min(Number(props.baseURL.maxLength ?? 2048), 2048), 'x-kubernetes-validations': BASE_URL_CEL_RULES }
  const match = props.match?.properties as Record<string, JsonSchema> | undefined
  if (match?.model !== undefined) match.model = { ...match.model, maxLength: Math.min(Number(match.model.maxLength ?? 256), 256) }
  spec['x-kubernetes-validations'] = MODEL_CEL_RULES
  if (props.virtualModel !== undefined) props.virtualModel['x-kubernetes-validations'] = [{ rule: '[has(self.weighted), has(self.failover), has(self.conditional)].filter(x, x).size() == 1', message: 'a virtualModel is exactly one of weighted, failover or conditional' }]
  return spec
}

export function porticoModelCrd (config: JsonSchema): JsonSchema {
  const out = crd('PorticoModel', 'porticomodels', ['pmodel'],
    'A model clients ask for by name (the request body\'s model): a concrete model (a provider, its settings and policies) or a virtual model (routing among concrete models at request time), offered on Gateways, ListenerSets or HTTPRoute rules (parentRefs). The standalone file\'s models: entry, in a cluster. Watched only with the chart\'s gatewayModels.enabled.',
    modelSpecSchema(config),
    [{ name: 'Model', type: 'string', jsonPath: '.status.model', description: 'The model names matched.' }])
  const version = ((out.spec as JsonSchema).versions as JsonSchema[])[0]!
  ;((version.schema as JsonSchema).openAPIV3Schema as JsonSchema & { properties: Record<string, JsonSchema> }).properties.status = PARENTS_STATUS
  return out
}
