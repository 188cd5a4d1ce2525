/**
 * The parts of the proxy's `GET /config_dump` porticoctl reads. Only the fields used here are
 * typed; everything else passes through untouched to `-o json|yaml`.
 */

export interface DumpBackendStats {
  requests: number
  failures: number
  /** 0..1, 1 = healthy. */
  health: number
  latencyMs: number | null
}

export interface DumpBackend {
  key: string
  kind: string
  name: string
  namespace?: string
  protocol?: string
  endpoints?: Array<{ host: string, port: number }>
  target?: string
  stats?: DumpBackendStats
  invalidReason?: string
  [more: string]: unknown
}

export interface DumpMatch {
  path?: { kind: string, value: string }
  method?: string
  headers?: unknown[]
  query?: unknown[]
}

export interface DumpRoute {
  key: string
  name: string
  namespace?: string
  listener?: string
  /** `tcp` / `tls`: a stream route of a TCP or TLS listener (no matches); absent for HTTP routes. */
  kind?: string
  hostnames?: string[]
  matches?: DumpMatch[]
  policies?: Record<string, unknown>
  /** `failover`: an ai backend's failover groups (priority order), each provider a backend of its own. */
  backends?: Array<{ backend: string, weight: number, policies?: Record<string, unknown>, failover?: Array<Array<{ backend: string }>> }>
  [more: string]: unknown
}

export interface DumpPolicy {
  target: string
  phase: string
  policies: Record<string, unknown>
  /** Policies another resource attached (cluster: a PorticoPolicy): key → where from. */
  sources?: Record<string, string>
}

/** One model of a route's table (the model API). */
export interface DumpModel {
  listener: string
  route: string
  name: string
  match: string
  visibility: string
  /** Attached here (selectable when Public); false: only a virtual model's target. */
  attached: boolean
  kind: 'concrete' | 'virtual'
  /** Concrete models: their ai backend's key. */
  backend?: string
  virtual?: { kind: 'weighted', targets: Array<{ model: string, weight: number }> } | { kind: 'failover', groups: string[][] } | { kind: 'conditional', rules: Array<{ when: string, model: string }>, fallback: string }
}

export interface ConfigDump {
  routes?: DumpRoute[]
  backends?: DumpBackend[]
  models?: DumpModel[]
  policies?: DumpPolicy[]
  [more: string]: unknown
}
