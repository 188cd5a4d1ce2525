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
