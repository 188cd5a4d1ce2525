/**
 * ProxyMetrics finds a request's series by comparing its label values with the last few
 * label sets before it builds a key (metrics.ts requestSeries). These check that the cache
 * never mixes series up: labels that differ in one value count apart, more label sets than
 * the cache holds all count, and equal values in different string objects count together.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ProxyMetrics } from '../src/metrics.ts'

interface Labels { gateway?: string, listener?: string, route?: string | null, backend?: string, method?: string, status?: number, reason?: string, grpc?: boolean, http2?: boolean, contentLength?: string }

/** The fields of a RequestContext that observeRequest reads. */
function request (l: Labels): never {
  const backend = l.backend !== undefined ? { name: l.backend, kind: 'service' } : null
  return {
    listener: { ir: { gateway: l.gateway ?? 'default/portico', name: l.listener ?? 'http' } },
    routeKey: l.route === undefined ? 'default/r' : l.route,
    backend,
    method: l.method ?? 'GET',
    status: l.status ?? 200,
    reason: l.reason ?? 'Upstream',
    grpc: l.grpc === true ? {} : null,
    req: { httpVersionMajor: l.http2 === true ? 2 : 1, headers: l.contentLength !== undefined ? { 'content-length': l.contentLength } : {} },
    startMono: performance.now() - 5,
    mcp: null,
    llm: null,
    upstreamHeadersAt: backend !== null ? performance.now() : 0,
    upstreamStart: backend !== null ? performance.now() - 2 : 0,
    requestBody: null,
    responseHeaders: { 'content-length': '12' },
    responseBytes: 12,
    phases: []
  } as never
}

async function counts (m: ProxyMetrics, name: string): Promise<Map<string, number>> {
  const metric = (await m.registry.getMetricsAsJSON()).find(x => x.name === name)!
  const out = new Map<string, number>()
  for (const v of metric.values as Array<{ labels: Record<string, string | number>, value: number, metricName?: string }>) {
    if (v.metricName !== undefined && !v.metricName.endsWith('_count')) continue
    const { le: _, ...labels } = v.labels
    out.set(Object.entries(labels).map(([k, x]) => `${k}=${x}`).join(','), v.value)
  }
  return out
}

test('requests whose labels differ in one value count in series of their own', async () => {
  const m = new ProxyMetrics({ dataPlane: true })
  const variants: Labels[] = [
    {}, { gateway: 'default/other' }, { listener: 'https' }, { route: 'default/r2' }, { route: null },
    { backend: 'default/b' }, { method: 'POST' }, { status: 404 }, { reason: 'NoRoute' }, { grpc: true }, { http2: true }
  ]
  // Three rounds, interleaved: more label sets than the cache keeps, each seen again after others.
  for (let round = 0; round < 3; round++) for (const v of variants) m.observeRequest(request(v))
  const requests = await counts(m, 'portico_requests_total')
  assert.equal(requests.size, variants.length, [...requests.keys()].join('\n'))
  for (const [labels, value] of requests) assert.equal(value, 3, labels)
  const durations = await counts(m, 'portico_request_duration_seconds')
  assert.deepEqual([...durations.values()], variants.map(() => 3))
  const protocols = [...requests.keys()].map(k => /protocol=(\w+)/.exec(k)![1])
  assert.deepEqual(protocols.filter(p => p !== 'http1').sort(), ['grpc', 'http2'])
  assert.ok(requests.has('gateway=default/portico,listener=http,route=unknown,backend=unknown,method=GET,status=200,reason=Upstream,protocol=http1'), 'a request without a route')
})

test('equal label values in different string objects count together; body sizes and backend calls follow the request\'s series', async () => {
  const m = new ProxyMetrics({ dataPlane: true })
  for (let i = 0; i < 5; i++) {
    // Made per request, as HTTP/2's :method and a route key read from a config would be.
    m.observeRequest(request({ method: ['PO', 'ST'].join(''), route: ['default/', 'r'].join(''), backend: 'default/b', contentLength: String(100 + i) }))
  }
  const requests = await counts(m, 'portico_requests_total')
  assert.deepEqual([...requests.values()], [5])
  assert.deepEqual([...(await counts(m, 'portico_request_body_size_bytes')).entries()], [['gateway=default/portico,route=default/r', 5]])
  assert.deepEqual([...(await counts(m, 'portico_response_body_size_bytes')).entries()], [['gateway=default/portico,route=default/r', 5]])
  assert.deepEqual([...(await counts(m, 'portico_upstream_call_duration_seconds')).entries()], [['backend=default/b', 5]])
  // A label set that shares the gateway and route shares their body-size series.
  m.observeRequest(request({ status: 503, backend: 'default/b', contentLength: '1' }))
  assert.deepEqual([...(await counts(m, 'portico_request_body_size_bytes')).values()], [6])
  assert.deepEqual([...(await counts(m, 'portico_upstream_call_duration_seconds')).values()], [6])
  assert.equal((await counts(m, 'portico_requests_total')).size, 2)
})

test('LLM calls count apart by operation and provider; token usage carries gen_ai_provider_name and the older gen_ai_system', async () => {
  const m = new ProxyMetrics({ dataPlane: true })
  const call = (system: string, operation: 'chat' | 'embeddings'): never => {
    const ctx = request({ backend: 'default/llm', method: 'POST' }) as unknown as Record<string, unknown>
    ctx.llm = {
      system, operation, inputFormat: 'openai-chat', providerFormat: 'anthropic-messages', requestModel: 'm', model: 'm',
      streaming: false, firstChunkAt: 0, usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7, responseModel: 'm-1' }
    }
    return ctx as never
  }
  m.observeRequest(call('anthropic', 'chat'))
  m.observeRequest(call('openai', 'chat'))
  m.observeRequest(call('openai', 'embeddings'))
  const durations = await counts(m, 'portico_gen_ai_client_operation_duration_seconds')
  assert.deepEqual([...durations.keys()].sort(), [
    'gen_ai_operation_name=chat,gen_ai_provider_name=anthropic,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm',
    'gen_ai_operation_name=chat,gen_ai_provider_name=openai,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm',
    'gen_ai_operation_name=embeddings,gen_ai_provider_name=openai,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm'
  ])
  const tokens = await counts(m, 'portico_gen_ai_client_token_usage')
  assert.equal(tokens.size, 6)
  assert.ok(tokens.has('gen_ai_token_type=input,gen_ai_operation_name=chat,gen_ai_provider_name=anthropic,gen_ai_system=anthropic,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm'), [...tokens.keys()].join('\n'))
  assert.ok(tokens.has('gen_ai_token_type=output,gen_ai_operation_name=embeddings,gen_ai_provider_name=openai,gen_ai_system=openai,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm'))
})

test('LLM cost sums exactly per model and currency; a stream\'s pace after its first chunk is observed', async () => {
  // Times below are up to 2 s before now, on a clock that starts with the process.
  if (performance.now() < 2500) await new Promise(resolve => setTimeout(resolve, 2500 - performance.now()))
  const m = new ProxyMetrics({ dataPlane: true })
  const call = (picos: bigint, currency: string, stream: { outputTokens: number, firstChunkMsAgo: number } | null): never => {
    const ctx = request({ backend: 'default/llm', method: 'POST' }) as unknown as Record<string, unknown>
    ctx.llm = {
      system: 'openai', operation: 'chat', inputFormat: 'openai-chat', providerFormat: 'openai-chat', requestModel: 'm', model: 'm',
      streaming: stream !== null, firstChunkAt: stream !== null ? performance.now() - stream.firstChunkMsAgo : 0,
      usage: { inputTokens: 3, outputTokens: stream?.outputTokens ?? 4, totalTokens: 7, responseModel: 'm-1' },
      cost: { amount: '', picos, currency }
    }
    ctx.upstreamStart = performance.now() - 2000
    return ctx as never
  }
  // Ten calls of 0.1 USD and twenty of 0.2: floats would sum to 4.999999999999999 or so.
  for (let i = 0; i < 10; i++) m.observeRequest(call(100_000_000_000n, 'USD', null))
  for (let i = 0; i < 20; i++) m.observeRequest(call(200_000_000_000n, 'USD', null))
  m.observeRequest(call(1n, 'EUR', null))
  const cost = await counts(m, 'portico_gen_ai_client_cost_total')
  const labels = 'gen_ai_operation_name=chat,gen_ai_provider_name=openai,gen_ai_request_model=m,gen_ai_response_model=m-1,route=default/r,backend=default/llm'
  assert.deepEqual(Object.fromEntries(cost), { [`${labels},currency=USD`]: 5, [`${labels},currency=EUR`]: 1e-12 })

  // 101 tokens, the first chunk 1 s before the end: 100 tokens in 1 s after it.
  m.observeRequest(call(0n, 'USD', { outputTokens: 101, firstChunkMsAgo: 1000 }))
  // One output token (or none): no pace to tell.
  m.observeRequest(call(0n, 'USD', { outputTokens: 1, firstChunkMsAgo: 1000 }))
  const metric = async (name: string) => (await m.registry.getMetricsAsJSON()).find(x => x.name === name)!.values as Array<{ value: number, metricName?: string }>
  const perSecond = await metric('portico_gen_ai_client_output_tokens_per_second')
  assert.equal(perSecond.find(v => v.metricName?.endsWith('_count'))?.value, 1)
  const rate = perSecond.find(v => v.metricName?.endsWith('_sum'))!.value
  assert.ok(rate > 95 && rate <= 100.5, `about 100 tokens/s: ${rate}`)
  const perToken = (await metric('portico_gen_ai_server_time_per_output_token_seconds')).find(v => v.metricName?.endsWith('_sum'))!.value
  assert.ok(perToken >= 0.00995 && perToken < 0.0105, `about 10 ms a token: ${perToken}`)
})
