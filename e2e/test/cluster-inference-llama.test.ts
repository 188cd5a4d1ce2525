/**
 * Real model servers as an InferencePool's pods in a cluster: two llama.cpp llama-servers
 * (scripts/test-tools' LLAMA_CPP_SERVER with SmolLM2, SMOLLM2_GGUF) on 127.0.0.2 and 127.0.0.3,
 * the same port (the pool's targetPort), their Pods marked Ready at those addresses; the
 * reference picker lwepp watching the pool; Portico's controller and the Gateway's proxy
 * (e2e/lib/inference-cluster.ts). A /v1/chat/completions through the gateway, steered to each
 * pod with `test-epp-endpoint-selection`, comes back as a real completion written by that pod
 * (each server's model alias is its pod's name, and answers carry it).
 *
 * Short answers (max_tokens 4, greedy): the suite's machines have 2 busy cores. Without the
 * kube tools, lwepp or llama.cpp the test is skipped with that reason (and fails in CI).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { waitUntil } from '@portico/testkit/wait'
import { applyPoolPods, llamaPoolServer, lweppPorts, poolYaml, postThrough, requireLlamaCpp, startInferenceGateway, startPoolServers, type PoolServer, poolRouteYaml } from '../lib/inference-cluster.ts'

const NS = 'models'
const POOL = 'smollm2'
const POD_NAMES = ['llama-a', 'llama-b']
const POD_IPS = ['127.0.0.2', '127.0.0.3']

interface ChatCompletion {
  model: string
  choices: Array<{ message: { role: string, content: string }, finish_reason: string }>
  usage: { prompt_tokens: number, completion_tokens: number }
}

test('llama.cpp servers as an InferencePool\'s pods: chat completions through the gateway, steered to each pod by lwepp', { timeout: 400_000 }, async t => {
  const llamaTools = requireLlamaCpp(t)
  if (llamaTools === null) return
  const servers: PoolServer[] = []
  t.after(async () => { await Promise.all(servers.map(s => s.close())) })
  // The models load while the cluster starts.
  const loading = startPoolServers(POD_NAMES, POD_IPS, llamaPoolServer(llamaTools)).then(s => { servers.push(...s); return s })
  loading.catch(() => {})
  const gw = await startInferenceGateway(t, [NS])
  if (gw === null) return
  const pods = await loading
  const port = pods[0]!.port
  const ports = await lweppPorts()
  await gw.cluster.apply(`${poolYaml({ namespace: NS, name: POOL, targetPorts: [port], picker: { service: 'smollm2-epp', port: ports.grpcPort } })}---
${poolRouteYaml({ namespace: NS, pool: POOL })}`)
  await applyPoolPods(gw.cluster, { namespace: NS, pool: POOL, names: POD_NAMES, ips: POD_IPS, port })
  const lwepp = await gw.startPicker(NS, POOL, 'smollm2-epp', ports)

  const url = `http://127.0.0.1:${gw.gatewayPort}/v1/chat/completions`
  const chat = async (steer: string) => await postThrough(url, { 'test-epp-endpoint-selection': steer }, JSON.stringify({
    model: 'smollm2',
    messages: [{ role: 'user', content: 'What is the capital of France?' }],
    max_tokens: 4,
    temperature: 0,
    seed: 42
  }))

  // The proxy has its config and lwepp has read the pool once a steered GET /v1/models is
  // served by that pod (cheap: no completion).
  let last = ''
  await waitUntil(async () => {
    const res = await request(`http://127.0.0.1:${gw.gatewayPort}/v1/models`, { headers: { 'test-epp-endpoint-selection': POD_IPS[0]! } }).catch((err: Error) => err)
    if (res instanceof Error) {
      last = res.message
      return false
    }
    last = `${res.statusCode} ${await res.body.text()}`
    return res.statusCode === 200
  }, 60_000, 'the pool serves', 250).catch(err => { throw new Error(`${(err as Error).message}; last answer: ${last}\n${lwepp.output().slice(-3000)}\n${gw.proxyOutput()}`) })

  for (const [i, pod] of pods.entries()) {
    const before = pods.map(p => p.received())
    const res = await chat(POD_IPS[i]!)
    assert.equal(res.status, 200, res.text)
    const completion = JSON.parse(res.text) as ChatCompletion
    assert.equal(completion.model, POD_NAMES[i], 'the steered pod wrote the answer')
    assert.equal(completion.choices[0]!.message.role, 'assistant')
    assert.ok(completion.choices[0]!.message.content.trim().length > 0, `a completion: ${res.text}`)
    assert.ok(completion.usage.completion_tokens > 0 && completion.usage.completion_tokens <= 4, res.text)
    assert.equal(res.headers['x-conformance-test-served-endpoint'], pod.host, 'lwepp got the served endpoint from Portico')
    // Each server's own log: the steered pod finished one completion, the other none. The
    // server prints its timings after it has answered: wait for the line, then compare.
    const expected = before.map((n, j) => j === i ? n + 1 : n)
    await waitUntil(() => pod.received() >= expected[i]!, 10_000, `${POD_NAMES[i]}'s log to show the completion`, 50)
    assert.deepEqual(pods.map(p => p.received()), expected)
  }
})
