/**
 * The Gateway API Inference Extension's reference endpoint picker, `lwepp`, built from its
 * module (sigs.k8s.io/gateway-api-inference-extension, cmd/lwepp) by scripts/test-tools, run
 * against the real kube-apiserver harness (e2e/cluster/harness.ts): the InferencePool CRD
 * from the same module version, an InferencePool, and Pods marked Ready through the status
 * subresource with pod IPs on loopback (127.0.0.2, 127.0.0.3) where echo servers listen as
 * the pool's model servers — lwepp only reads Pods, so nothing has to run them.
 *
 * Spoken to first as a gateway would, over ext_proc (TLS, its self-signed certificate): the
 * pick in the `x-gateway-destination-endpoint` header and `envoy.lb` metadata, round robin
 * over the ready pods, steered by `test-epp-endpoint-selection`, the body streamed before
 * the pick, the served endpoint reported back; then through Portico (a standalone
 * `inferencePool` whose `endpointPicker.host` is lwepp): requests steered to each pod, and
 * lwepp failing the stream with FailClose (503) and FailOpen (served); last, a pod relabelled
 * out of the pool stops being picked.
 *
 * Without LWEPP (scripts/test-tools prints it) the tests are skipped with that reason, and
 * fail in CI; likewise without the kube tools.
 */

import { after, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { requireKubeTools, startCluster, type Cluster } from '../cluster/harness.ts'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type EchoedRequest, sha256 } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { openExtProcStream, setHeadersOf, type ProcessingAnswer } from '../lib/ext-proc.ts'
import { applyPoolPods, installPoolCrd, lweppPorts, requireLwepp, startLwepp, startPoolServers, type Lwepp, type PoolServer } from '../lib/inference-cluster.ts'

const NS = 'inference'
const POOL = 'echo-pool'
const POD_NAMES = ['pod-a', 'pod-b']
/** The pods' IPs: loopback addresses of their own (Linux routes all of 127/8 to lo). */
const POD_IPS = ['127.0.0.2', '127.0.0.3']

interface Setup {
  cluster: Cluster
  lwepp: Lwepp
  /** What lwepp printed (its log, for failure messages). */
  output: () => string
  /** lwepp's ext_proc service, 127.0.0.1:PORT (TLS). */
  picker: string
  /** The echo servers, as `ip:port` (the endpoint lwepp names) → server. */
  pods: PoolServer[]
  port: number
}

let started: Promise<Setup> | null = null

async function setup (t: TestContext): Promise<Setup | null> {
  const tools = requireLwepp(t)
  if (tools === null) return null
  const kube = requireKubeTools(t)
  if (kube === null) return null
  started ??= setUp(tools, kube)
  return await started
}

async function setUp (tools: { lwepp: string, crd: string }, kube: NonNullable<ReturnType<typeof requireKubeTools>>): Promise<Setup> {
  // Two echo servers on the same port of 127.0.0.2 and 127.0.0.3 (a pool has one targetPort).
  const pods = await startPoolServers(POD_NAMES, POD_IPS)
  const port = pods[0]!.port
  // No kubelet, no controllers: lwepp reads Pods and the InferencePool, nothing more.
  const cluster = await startCluster({ tools: kube, controllerManager: false, fakeKubelet: false, gatewayApiCrds: false })
  await installPoolCrd(cluster, tools.crd)
  await cluster.createNamespace(NS)
  const ports = await lweppPorts()
  await cluster.apply({
    apiVersion: 'inference.networking.k8s.io/v1',
    kind: 'InferencePool',
    metadata: { name: POOL, namespace: NS },
    spec: {
      selector: { matchLabels: { app: POOL } },
      targetPorts: [{ number: port }],
      endpointPickerRef: { name: 'lwepp', port: { number: ports.grpcPort } }
    }
  })
  // Two pods Ready at the echo servers' addresses; a third of the pool never Ready.
  await applyPoolPods(cluster, { namespace: NS, pool: POOL, names: POD_NAMES, ips: POD_IPS, port, unready: ['pod-unready'] })

  const lwepp = startLwepp(cluster, tools.lwepp, { pool: POOL, namespace: NS, ports })
  process.on('exit', () => { if (lwepp.proc.exitCode() === undefined) lwepp.proc.child.kill('SIGKILL') })
  const output = lwepp.output
  const s: Setup = { cluster, lwepp, output, picker: `127.0.0.1:${lwepp.grpcPort}`, pods, port }
  // Ready once it has read the pool and its pods: it picks (before that, it fails the stream).
  await waitUntil(async () => {
    if (lwepp.proc.exitCode() !== undefined) throw new Error(`lwepp exited:\n${output()}`)
    return await pick(s, {}).then(a => a.endpoint !== '', () => false)
  }, 60_000, 'lwepp to pick from the pool', 200).catch(err => { throw new Error(`${String(err)}\n${output().slice(-4000)}`) })
  return s
}

after(async () => {
  if (started === null) return
  const s = await started.catch(() => null)
  await s?.lwepp.stop()
  await s?.cluster.stop()
  await Promise.all((s?.pods ?? []).map(p => p.close()))
})

const requestHeaders = (headers: Record<string, string>, endOfStream: boolean) => ({
  request_headers: {
    headers: { headers: Object.entries({ ':method': 'POST', ':path': '/v1/completions', ':authority': 'gateway', ':scheme': 'http', ...headers }).map(([key, value]) => ({ key, raw_value: Buffer.from(value) })) },
    end_of_stream: endOfStream
  }
})

interface Pick { endpoint: string, metadata: string | undefined, answer: ProcessingAnswer }

/** One request's headers (no body) to lwepp; its pick. */
async function pick (s: Setup, headers: Record<string, string>): Promise<Pick> {
  const stream = openExtProcStream(s.picker, { tls: true })
  try {
    stream.send(requestHeaders(headers, true))
    return pickOf(await stream.next(5_000))
  } finally {
    stream.close()
  }
}

function pickOf (answer: ProcessingAnswer): Pick {
  assert.ok(answer.request_headers !== undefined, `the answer is to the request headers: ${JSON.stringify(answer)}`)
  const endpoint = setHeadersOf(answer.request_headers.response)['x-gateway-destination-endpoint'] ?? ''
  const metadata = answer.dynamic_metadata?.fields?.['envoy.lb']?.structValue?.fields?.['x-gateway-destination-endpoint']?.stringValue
  return { endpoint, metadata, answer }
}

async function echoAt (endpoint: string): Promise<EchoedRequest> {
  const res = await request(`http://${endpoint}/`)
  return await res.body.json() as EchoedRequest
}

test('lwepp picks round robin among the pool\'s ready pods, over TLS with its self-signed certificate; each pick names a pod\'s model server', async t => {
  const s = await setup(t)
  if (s === null) return
  const endpoints = s.pods.map(p => p.host)
  const picks: string[] = []
  for (let i = 0; i < 6; i++) {
    const p = await pick(s, {})
    assert.equal(p.metadata, p.endpoint, 'the same pick in dynamic_metadata["envoy.lb"]')
    assert.equal(setHeadersOf(p.answer.request_headers!.response)['x-echo-set-header'], `x-conformance-test-served-endpoint:${p.endpoint}`)
    assert.equal(p.answer.request_headers!.response!.clear_route_cache, true)
    picks.push(p.endpoint)
  }
  assert.deepEqual([...new Set(picks)].sort(), [...endpoints].sort(), `both ready pods, never the unready one: ${picks.join(' ')}`)
  for (let i = 1; i < picks.length; i++) assert.notEqual(picks[i], picks[i - 1], `alternating: ${picks.join(' ')}`)
  for (const [i, endpoint] of endpoints.entries()) assert.equal((await echoAt(endpoint)).name, POD_NAMES[i], 'the endpoint is that pod\'s server')
})

test('test-epp-endpoint-selection steers each request to the named pod (by IP, or ip:port); naming no pod of the pool fails the stream', async t => {
  const s = await setup(t)
  if (s === null) return
  for (const pod of s.pods) {
    const ip = pod.host.split(':')[0]!
    for (let i = 0; i < 3; i++) assert.equal((await pick(s, { 'test-epp-endpoint-selection': ip })).endpoint, pod.host)
    assert.equal((await pick(s, { 'test-epp-endpoint-selection': pod.host })).endpoint, pod.host)
  }
  // A list: one of its pods each time.
  const both = s.pods.map(p => p.host.split(':')[0]).join(',')
  const listed = new Set<string>()
  for (let i = 0; i < 4; i++) listed.add((await pick(s, { 'test-epp-endpoint-selection': both })).endpoint)
  assert.deepEqual([...listed].sort(), s.pods.map(p => p.host).sort())
  // No pod of the pool named (an address outside it, or the right IP on another port): no
  // fallback to round robin (the README says otherwise; the code fails the stream).
  await assert.rejects(pick(s, { 'test-epp-endpoint-selection': '127.0.0.9' }), /INTERNAL|no endpoints available/)
  await assert.rejects(pick(s, { 'test-epp-endpoint-selection': `${POD_IPS[0]}:1` }), /INTERNAL|no endpoints available/)
})

test('a request with a body: the headers are answered only after the body\'s last chunk, then the whole body comes back as streamed_response chunks; the served endpoint is reported back', async t => {
  const s = await setup(t)
  if (s === null) return
  const stream = openExtProcStream(s.picker, { tls: true })
  try {
    const target = s.pods[1]!.host
    const body = Buffer.from(JSON.stringify({ model: 'smollm2', prompt: 'x'.repeat(120_000) }))
    stream.send(requestHeaders({ 'content-type': 'application/json', 'test-epp-endpoint-selection': POD_IPS[1]! }, false))
    stream.send({ request_body: { body: body.subarray(0, 70_000), end_of_stream: false } })
    await assert.rejects(stream.next(500), /no ext_proc answer/, 'nothing before the last chunk (not even the first chunk\'s answer)')
    stream.send({ request_body: { body: body.subarray(70_000), end_of_stream: true } })
    assert.equal(pickOf(await stream.next()).endpoint, target)
    // Full-duplex style: the body held so far, re-cut into chunks of at most 62,000 bytes,
    // end_of_stream on the last.
    const chunks: Buffer[] = []
    for (;;) {
      const a = await stream.next()
      const streamed = a.request_body?.response?.body_mutation?.streamed_response
      assert.ok(streamed !== undefined, `a request body answer with streamed_response: ${JSON.stringify(a)}`)
      chunks.push(Buffer.from(streamed.body ?? Buffer.alloc(0)))
      if (streamed.end_of_stream === true) break
    }
    assert.deepEqual(chunks.map(c => c.length), [62_000, body.length - 62_000])
    assert.ok(Buffer.concat(chunks).equals(body), 'the body back unchanged')
    // The response: the endpoint that served, as the gateway reports it, comes back as a header.
    stream.send({
      response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] }, end_of_stream: false },
      metadata_context: { filter_metadata: { 'envoy.lb': { fields: { 'x-gateway-destination-endpoint-served': { stringValue: target } } } } }
    })
    const answer = await stream.next()
    assert.ok(answer.response_headers !== undefined, JSON.stringify(answer))
    assert.equal(setHeadersOf(answer.response_headers.response)['x-conformance-test-served-endpoint'], target)
  } finally {
    stream.close()
  }
})

test('through Portico: a standalone inferencePool whose endpointPicker is lwepp — requests steered to each pod, the served endpoint reported back; lwepp failing the stream with FailClose (503) and FailOpen (served)', async t => {
  const s = await setup(t)
  if (s === null) return
  const portico: PorticoProcess = await startPortico({
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [{
        name: 'pool',
        matches: [{ path: { pathPrefix: '/v1' } }],
        backends: [{ inferencePool: { name: POOL, endpoints: s.pods.map(p => p.host), endpointPicker: { host: s.picker, failureMode: 'FailClose', timeout: '5s' } } }]
      }, {
        name: 'open',
        matches: [{ path: { pathPrefix: '/open' } }],
        backends: [{ inferencePool: { name: 'open', endpoints: s.pods.map(p => p.host), endpointPicker: { host: s.picker, failureMode: 'FailOpen', timeout: '5s' } } }]
      }]
    })
  })
  try {
    // Over 62,000 bytes: lwepp sends it back re-cut into streamed_response chunks.
    const body = JSON.stringify({ model: 'smollm2', prompt: 'x'.repeat(150_000) })
    for (const [i, pod] of s.pods.entries()) {
      for (let n = 0; n < 2; n++) {
        const res = await request(`${portico.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'test-epp-endpoint-selection': POD_IPS[i]! }, body })
        const text = await res.body.text()
        assert.equal(res.statusCode, 200, text)
        const echo = JSON.parse(text) as EchoedRequest
        assert.equal(echo.name, POD_NAMES[i])
        assert.equal(echo.headers['x-gateway-destination-endpoint'], pod.host)
        assert.equal(echo.bodySha256, sha256(body), 'the body reached the pod whole')
        assert.equal(res.headers['x-conformance-test-served-endpoint'], pod.host, 'lwepp got the served endpoint from Portico')
      }
    }
    // Unsteered: lwepp's round robin reaches both.
    const names = new Set<string>()
    for (let n = 0; n < 4; n++) {
      const res = await request(`${portico.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      names.add((await res.body.json() as EchoedRequest).name)
    }
    assert.deepEqual([...names].sort(), POD_NAMES)
    // Steered to no pod of the pool: lwepp fails the stream; FailClose answers 503, FailOpen
    // serves from a pod Portico chooses.
    const outside = { 'content-type': 'application/json', 'test-epp-endpoint-selection': '127.0.0.9' }
    const closed = await request(`${portico.url}/v1/completions`, { method: 'POST', headers: outside, body })
    assert.equal(closed.statusCode, 503)
    assert.match(await closed.body.text(), /endpoint picker unavailable/)
    const open = await request(`${portico.url}/open/v1/completions`, { method: 'POST', headers: outside, body })
    assert.equal(open.statusCode, 200)
    assert.ok(POD_NAMES.includes((await open.body.json() as EchoedRequest).name))
  } finally {
    await portico.stop()
  }
})

test('a pod relabelled out of the pool stops being picked (lwepp watches Pods)', async t => {
  const s = await setup(t)
  if (s === null) return
  await s.cluster.api('PATCH', `/api/v1/namespaces/${NS}/pods/${POD_NAMES[1]!}`, { metadata: { labels: { app: 'elsewhere' } } }, { contentType: 'application/merge-patch+json' })
  await waitUntil(async () => {
    const picks = await Promise.all([0, 1, 2, 3].map(async () => (await pick(s, {})).endpoint))
    return picks.every(p => p === s.pods[0]!.host)
  }, 15_000, `only ${s.pods[0]!.host} picked\n${s.output().slice(-4000)}`, 200)
  await assert.rejects(pick(s, { 'test-epp-endpoint-selection': POD_IPS[1]! }), /INTERNAL|no endpoints available/)
})
