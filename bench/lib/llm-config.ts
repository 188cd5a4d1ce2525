/**
 * The gateway config the LLM benchmarks (bench/llm.ts, bench/llm-translation.ts) share: the
 * same OpenAI-format provider behind a plain `host:` route (`/host`, rewritten to its
 * `/v1/chat/completions`) and behind an `ai:` backend (`/ai`), so what the `ai` layer costs
 * is always measured against the same plain route; plus further `ai:` routes a benchmark
 * needs (another provider). And the sanity check each target passes before it is measured.
 */

import { request } from 'undici'

export interface AiRoute {
  /** Route and backend name; the route matches `/<name>`. */
  name: string
  /** The provider's loopback port. */
  port: number
}

export interface LlmConfigOptions {
  /** The provider behind `/host` and `/ai`. */
  providerPort: number
  /** YAML of the `ai` route's `policies:` block (already indented by six spaces), if any. */
  aiPolicies?: string
  /** More `ai:` routes. */
  more?: AiRoute[]
}

const aiRoute = (route: string, backend: string, port: number, policies = '') => `  - name: ${route}
    matches: [{ path: { pathPrefix: /${route} } }]
${policies !== '' ? `    policies:\n${policies}` : ''}    backends:
      - ai: { name: ${backend}, provider: { openAI: {} }, hostOverride: 127.0.0.1:${port} }
`

export function llmBenchConfig (opts: LlmConfigOptions): string {
  return `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: host
    matches: [{ path: { pathPrefix: /host } }]
    policies:
      urlRewrite: { path: { full: /v1/chat/completions } }
    backends: [{ host: 127.0.0.1:${opts.providerPort} }]
${aiRoute('ai', 'bench', opts.providerPort, opts.aiPolicies)}${(opts.more ?? []).map(r => aiRoute(r.name, r.name, r.port)).join('')}`
}

/** One POST that must answer 200 with `expect` in its body, else the benchmark stops. */
export async function checkAnswer (t: { name: string, url: string, body: string, headers: Record<string, string>, expect: string }): Promise<void> {
  const res = await request(t.url, { method: 'POST', body: t.body, headers: t.headers })
  const text = await res.body.text()
  if (res.statusCode !== 200 || !text.includes(t.expect)) throw new Error(`sanity check of ${t.name}: ${res.statusCode} ${text.slice(0, 300)} … ${text.slice(-300)}`)
}
