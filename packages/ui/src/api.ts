/**
 * Calls to the admin server this page came from (same origin, relative URLs): the JSON API
 * under /api, /config_dump, /logging. Errors carry the server's message.
 */

export class ApiError extends Error {
  readonly status: number
  readonly code: string
  constructor (status: number, code: string, message: string) {
    super(message)
    this.status = status
    this.code = code
  }
}

async function parse<T> (res: Response): Promise<T> {
  const text = await res.text()
  let value: unknown = text
  try {
    value = JSON.parse(text)
  } catch {}
  if (!res.ok) {
    const v = value as { error?: string, message?: string } | string
    const message = typeof v === 'string' ? v.trim() : v.message ?? v.error ?? `HTTP ${res.status}`
    throw new ApiError(res.status, typeof v === 'string' ? 'error' : v.error ?? 'error', message)
  }
  return value as T
}

export async function getJson<T> (path: string, signal?: AbortSignal): Promise<T> {
  return await parse<T>(await fetch(path, { headers: { accept: 'application/json' }, signal: signal ?? null }))
}

export async function postJson<T> (path: string, body: unknown, signal?: AbortSignal): Promise<T> {
  return await parse<T>(await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
    signal: signal ?? null
  }))
}

export interface ReloadRecord {
  at: string
  ok: boolean
  version?: string
  errors?: string[]
}

export interface ListenerInfo {
  key: string
  gateway: string
  name: string
  hostname: string | null
  protocol: string
  routes: string[]
}

export interface BindInfo {
  key: string
  address: string
  port: number
  protocol: 'HTTP' | 'HTTPS'
  listening: boolean
  listeners: ListenerInfo[]
}

import type { MeshStatusShape } from '@portico/trace-view'

export interface Overview {
  version: string
  node: string
  pid: number
  startedAt: string
  uptimeSeconds: number
  configVersion: string | null
  ready: boolean
  pending: string[]
  ports: { admin: number, stats: number, readiness: number }
  addresses: { admin: string, stats: string, readiness: string }
  binds: BindInfo[]
  reloads: ReloadRecord[]
  lastReloadError: ReloadRecord | null
  adminWrites: boolean
  tracing: boolean
  logLevel: string
  traceHeader: string
  /** The mesh identity (as /debug/mesh); absent from an older proxy, `source: 'none'` when no mesh is configured. */
  mesh?: MeshStatusShape
}

export type PathMatch = { kind: 'exact' | 'prefix' | 'regex', value: string }
export interface ValueMatch { name: string, kind: 'exact' | 'regex', value: string }

export interface RouteMatch {
  path: PathMatch
  method?: string
  headers: ValueMatch[]
  query: ValueMatch[]
}

export type PolicySet = Record<string, unknown>

export interface RouteInfo {
  listener: string
  key: string
  name: string
  namespace?: string
  hostnames: string[]
  matches: RouteMatch[]
  policies: PolicySet
  /** `failover`: an ai backend's failover groups (priority order), each provider a backend of its own with its policies. */
  backends: Array<{ backend: string, weight: number, policies: PolicySet, failover?: Array<Array<{ backend: string, policies: PolicySet }>> }>
  timeouts?: Record<string, number>
}

export interface BackendStats {
  requests: number
  failures: number
  health: number
  latencyMs: number | null
}

export interface BackendInfo {
  key: string
  kind: 'static' | 'service' | 'mcp' | 'ai' | 'invalid'
  name: string
  namespace?: string
  protocol: 'http' | 'https'
  endpoints: Array<Record<string, unknown>>
  target: string
  invalidReason?: string
  mcp?: { targets: Array<{ name: string } & Record<string, unknown>>, statefulMode: string, prefixMode: string, failureMode?: string }
  inferencePool?: { name: string, picker: { target: string } & Record<string, unknown> } & Record<string, unknown>
  stats: BackendStats
}

export interface ConfigDump {
  version: { version: string, node: string, configVersion: string | null }
  config: Record<string, unknown>
  routes: RouteInfo[]
  backends: BackendInfo[]
  policies: Array<{ target: string, phase: string, policies: PolicySet }>
  reloads: ReloadRecord[]
}

export interface LoggingState {
  level: string
  levels: string[]
  components: string[]
  writable: boolean
}

export interface CelResult {
  ok: boolean
  stage?: 'compile' | 'evaluate'
  error?: string
  value?: unknown
  type?: string
  matches?: boolean
  ruleError?: string | null
  jwt: { header: Record<string, unknown>, claims: Record<string, unknown>, verified: false } | null
}

export interface FireResult {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
  bodyBytes: number
  truncated: boolean
  durationMs: number
  sent: { method: string, url: string, to: string, headers: Array<[string, string]> }
}

export interface McpConnected {
  session: string
  url: string
  mcpSessionId: string | null
  protocolVersion: string | null
  serverInfo: { name: string, version: string, title?: string } | null
  capabilities: Record<string, unknown>
  instructions: string | null
}

export interface McpTool {
  name: string
  title?: string
  description?: string
  inputSchema: JsonSchema
}

export interface McpPrompt {
  name: string
  title?: string
  description?: string
  arguments?: Array<{ name: string, description?: string, required?: boolean }>
}

export interface McpResource {
  uri: string
  name: string
  title?: string
  description?: string
  mimeType?: string
}

export interface McpListPart<T> {
  items: T[]
  error?: string
  unsupported?: boolean
}

export interface McpLists {
  tools: McpListPart<McpTool>
  prompts: McpListPart<McpPrompt>
  resources: McpListPart<McpResource>
  resourceTemplates: McpListPart<{ uriTemplate: string, name: string, description?: string }>
  notifications: Array<{ at: string, method: string, params: unknown }>
}

export interface JsonSchema {
  type?: string | string[]
  title?: string
  description?: string
  properties?: Record<string, JsonSchema>
  required?: string[]
  items?: JsonSchema
  enum?: unknown[]
  default?: unknown
  minimum?: number
  maximum?: number
  format?: string
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  const?: unknown
  additionalProperties?: boolean | JsonSchema
}
