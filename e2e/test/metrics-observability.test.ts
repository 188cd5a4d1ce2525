/**
 * The metrics operators look for (docs/observability.md): body sizes, upstream connect and
 * TLS handshake durations, MCP request durations, LLM operation duration and time to first
 * token, auth and rate-limit decisions, LLM cost, failovers and guardrails, InferencePool
 * picks and fallbacks, TCP and UDP routes, tracing spans — present with their bounded labels
 * after real traffic, and the whole exposition promtool-clean.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { startObservedGateway, type ObservedGateway } from '../lib/observed-gateway.ts'
import { requireTool } from '@portico/testkit/tools'
import { waitUntil } from '@portico/testkit/wait'

let gw: ObservedGateway
let text: string

before(async () => {
  gw = await startObservedGateway()
  await gw.traffic()
  text = await (await fetch(`${gw.stats}/metrics`)).text()
})
after(async () => { await gw?.close() })

/** The samples of one metric: labels (as written) → value. */
function samples (name: string): Array<{ labels: string, value: number }> {
  const out: Array<{ labels: string, value: number }> = []
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(\{[^}]*\})? (\S+)$/.exec(line)
    if (m !== null && m[1] === name) out.push({ labels: m[2] ?? '', value: Number(m[3]) })
  }
  return out
}

function has (name: string, ...labels: string[]): void {
  const found = samples(name).filter(s => labels.every(l => s.labels.includes(l)))
  assert.ok(found.length > 0 && found.some(s => s.value > 0), `${name} with ${labels.join(', ')}:\n${samples(name).map(s => s.labels + ' ' + s.value).join('\n')}`)
}

test('auth and rate-limit decisions by policy, decision and reason', () => {
  has('portico_auth_decisions_total', 'route="keyed"', 'policy="apiKey"', 'decision="allow"')
  has('portico_auth_decisions_total', 'route="keyed"', 'policy="apiKey"', 'decision="deny"', 'reason="unauthenticated"')
  has('portico_rate_limit_decisions_total', 'route="limited"', 'policy="localRateLimit"', 'decision="allowed"')
  has('portico_rate_limit_decisions_total', 'route="limited"', 'policy="localRateLimit"', 'decision="limited"')
  assert.equal(samples('portico_rate_limit_decisions_total').find(s => s.labels.includes('decision="limited"'))?.value, 1)
})

test('body sizes, upstream connect and TLS handshake', () => {
  has('portico_request_body_size_bytes_count', 'route="echo"')
  has('portico_request_body_size_bytes_bucket', 'route="echo"', 'le="16384"')
  has('portico_response_body_size_bytes_count', 'route="echo"')
  // New connections are named by the backend that has the endpoint (not "unknown").
  const tls = samples('portico_upstream_tls_handshake_duration_seconds_count')
  assert.equal(tls.length, 1, JSON.stringify(tls))
  assert.doesNotMatch(tls[0]!.labels, /backend="unknown"/)
  has('portico_upstream_connect_duration_seconds_count', tls[0]!.labels.slice(1, -1))
  assert.ok(samples('portico_upstream_connect_duration_seconds_count').length >= 2, 'the echo backend\'s plain connections too')
})

test('MCP request durations and LLM operation durations, time to first token for streams', () => {
  has('portico_mcp_request_duration_seconds_count', 'method="tools/call"', 'target="tools"', 'tool="add"')
  has('portico_mcp_request_duration_seconds_count', 'method="tools/list"')
  has('portico_gen_ai_client_operation_duration_seconds_count', 'gen_ai_request_model="gpt-test"', 'gen_ai_provider_name="openai"')
  has('portico_gen_ai_server_time_to_first_token_seconds_count', 'gen_ai_request_model="gpt-test"')
  assert.equal(samples('portico_gen_ai_server_time_to_first_token_seconds_count').reduce((n, s) => n + s.value, 0), 1, 'only the streamed answer')
})

test('LLM cost, failover and guardrails; InferencePool picks and fallbacks; TCP and UDP routes; tracing spans', async () => {
  // UDP counts are handed on each quarter second, spans exported within ~2 s.
  await waitUntil(async () => {
    text = await (await fetch(`${gw.stats}/metrics`)).text()
    return samples('portico_tracing_spans_total').some(s => s.value > 0) && samples('portico_udp_datagrams_total').length >= 3
  }, 10_000, 'spans exported and UDP datagrams counted', 200)
  has('portico_gen_ai_client_cost_total', 'route="chat"', 'currency="USD"')
  has('portico_gen_ai_failovers_total', 'route="failover"', 'reason="connection"')
  has('portico_guardrail_decisions_total', 'guard="regex"', 'action="pass"')
  has('portico_gen_ai_server_time_per_output_token_seconds_count', 'route="chat"')
  has('portico_gen_ai_client_output_tokens_per_second_count', 'route="chat"')
  has('portico_inference_picker_calls_total', 'pool="pool"', 'outcome="picked"')
  has('portico_inference_picker_duration_seconds_count', 'pool="pool"')
  has('portico_inference_picks_total', 'pool="pool"')
  has('portico_inference_fallbacks_total', 'pool="pool"')
  has('portico_tcp_connections_total', 'route="tcp:stream"', 'reason="Done"')
  has('portico_tcp_bytes_total', 'route="tcp:stream"', 'direction="sent"')
  has('portico_tcp_connection_duration_seconds_count', 'route="tcp:stream"')
  has('portico_udp_datagrams_total', 'route="udp:datagrams"', 'direction="sent"')
  has('portico_udp_bytes_total', 'route="udp:datagrams"', 'direction="received"')
  has('portico_udp_flows_opened_total', 'route="udp:datagrams"')
  has('portico_udp_flows_closed_total', 'route="udp:refused"', 'reason="UpstreamUnreachable"')
  has('portico_udp_datagrams_dropped_total', 'route="udp:unresolvable"')
  has('portico_tracing_spans_total', 'result="exported"')
})

test('promtool check metrics passes', t => {
  const promtool = requireTool(t, 'PROMTOOL', 'promtool')
  if (promtool === null) return
  const out = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' })
  assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
})
