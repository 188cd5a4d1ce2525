/**
 * PorticoPolicy in a cluster, with real parts: a kube-apiserver with etcd, the controller and
 * its proxy as local processes, a real OIDC provider (`oidc-provider`) issuing
 * client-credentials tokens, and a real MCP server (the official SDK) on a test host behind a
 * Service. The seed's scenario: an HTTPRoute to the MCP server and a PorticoPolicy with
 * `mcpAuthentication` (JWKS from a Secret) and `authorization: ['"read" in jwt.permissions']`;
 * the official SDK client gets through with a token carrying `read`, is refused 401 (with
 * RFC 9728 metadata) without one and 403 with another permission; a bad rule makes the policy
 * Invalid in its status while the rest keeps serving. And a PorticoBackend: Portico's MCP
 * gateway over two MCP servers found through their Services, and an `ai` PorticoBackend with
 * an API key from a Secret and a token budget, driven by the official openai SDK against a
 * local OpenAI-compatible server. And precedence on a second Gateway: basicAuth from Secrets
 * on the whole Gateway and on one listener, a newer duplicate Conflicted; jwtAuth and a
 * request rate limit on a route, extAuthz (a real gRPC ext_authz server) on a listener,
 * attached and then deleted; oidc with its client secret from a Secret, a browser logging in
 * at a real provider.
 */

import { after, before, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { connect as connectTcp } from 'node:net'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { configJsonSchema } from '@portico/engine/config'
import type { KubeObject } from '../cluster/harness.ts'
import { startClusterGateway, type ClusterGateway } from '../cluster/cluster-gateway.ts'
import { backendService, gatewayYaml } from '../cluster/portico-processes.ts'
import { startIdp, type Idp, type IdpClient } from '../lib/idp.ts'
import { porticoBackendCrd, porticoPolicyCrd } from '@portico/controller/crds'
import { ctl, jsonLines } from '@portico/testkit/porticoctl'
import OpenAI from 'openai'
import { countTokens, promptTokens, startLlmServer, type LlmServer } from '../lib/llm.ts'
import { OK, startAuthzServer } from '../lib/ext-authz.ts'
import { Browser, startLoginIdp } from '../lib/oidc-login.ts'

const MCP_SERVER = fileURLToPath(new URL('../lib/mcp-server-process.ts', import.meta.url))
const CONTROLLER_NAME = 'portico.dev/gateway-controller'
const reader: IdpClient = { id: 'reader', secret: 'reader-secret', permissions: ['read'] }
const writer: IdpClient = { id: 'writer', secret: 'writer-secret', permissions: ['write'] }

let suite: ClusterGateway | null = null
let idp: Idp | undefined
let llm: LlmServer | undefined
const REPLY = 'one two three four five six seven eight nine ten eleven twelve'
const MESSAGES = [{ role: 'user' as const, content: 'count to twelve please' }]
const TEAM_KEY = 'sk-team-a-0123456789'
const PROVIDER_KEY = 'sk-provider-9876543210'
let gatewayUrl = ''
let gatewayPort = 0
/** Where a Gateway's proxy pod's ports really are (the local proxy process): gateway → pod port → local port. */
const podPorts = new Map<string, Record<number, number>>()

/** Until `check` holds (the controller, the xDS push and the proxy take a moment). */
async function eventually (check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  await waitUntil(check, ms, what, 100)
}

async function policyCondition (name: string): Promise<{ status: string, reason: string, message: string } | undefined> {
  const p = await suite!.cluster.api<KubeObject>('GET', `/apis/portico.dev/v1alpha1/namespaces/apps/porticopolicies/${name}`).catch(() => undefined)
  const ours = (p?.status?.ancestors as Array<{ controllerName: string, conditions: Array<{ type: string, status: string, reason: string, message: string }> }> | undefined)?.find(a => a.controllerName === CONTROLLER_NAME)
  return ours?.conditions.find(c => c.type === 'Accepted')
}

async function connect (token?: string, path = '/mcp'): Promise<Client> {
  const client = new Client({ name: 'cluster-e2e', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(`${gatewayUrl}${path}`), token === undefined ? undefined : { requestInit: { headers: { authorization: `Bearer ${token}` } } })
  await client.connect(transport)
  return client
}

before(async s => {
  suite = await startClusterGateway(s as TestContext, {
    dir: 'portico-cluster-policies-',
    testHost: true,
    cluster: {
      // porticoctl reaches a Gateway's pod through a port-forward: to the local proxy here.
      portForward: (pod, port) => {
        const target = podPorts.get(`${pod.metadata?.namespace ?? ''}/${pod.metadata?.labels?.['gateway.networking.k8s.io/gateway-name'] ?? ''}`)?.[port]
        return target === undefined ? null : { host: '127.0.0.1', port: target }
      }
    },
    namespaces: ['portico-system', 'apps']
  })
  if (suite === null) return
  const { cluster } = suite
  const host = suite.host!
  idp = await startIdp({ clients: [reader, writer] })
  suite.defer(() => idp!.stop())
  llm = await startLlmServer({ reply: REPLY })
  suite.defer(() => llm!.close())
  await cluster.apply([porticoPolicyCrd(configJsonSchema()), porticoBackendCrd(configJsonSchema())] as never)
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/porticopolicies.portico.dev', 'crd/porticobackends.portico.dev'])
  await host.spawnNode([MCP_SERVER, host.address, '18091'], 'listening')
  await host.spawnNode([MCP_SERVER, host.address, '18092'], 'listening')
  const jwks = await (await fetch(idp.jwksUrl)).text()
  const gwPort = await freePort()
  gatewayPort = gwPort
  gatewayUrl = `http://127.0.0.1:${gwPort}`
  await cluster.apply(`apiVersion: v1
kind: Secret
metadata: { name: idp, namespace: apps }
stringData: { jwks.json: '${jwks}' }
---
${backendService(host.address, 'apps', 'mcp-server', 18091)}---
${backendService(host.address, 'apps', 'mcp-second', 18092)}---
${gatewayYaml('apps', 'web', gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - name: tools
      matches: [{ path: { type: PathPrefix, value: /mcp } }]
      backendRefs: [{ name: mcp-server, port: 80 }]
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: mcp-auth, namespace: apps }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: mcp }]
  policies:
    mcpAuthentication:
      issuer: ${idp.issuer}
      audiences: [${idp.audience}]
      jwks: { secretRef: { name: idp, key: jwks.json } }
    authorization:
      rules: ['"read" in jwt.permissions']
---
apiVersion: portico.dev/v1alpha1
kind: PorticoBackend
metadata: { name: tools, namespace: apps }
spec:
  mcp:
    targets:
      - { name: first, service: { name: mcp-server, port: 80 } }
      - { name: second, service: { name: mcp-second, port: 80 } }
---
apiVersion: v1
kind: Secret
metadata: { name: llm-keys, namespace: apps }
stringData: { team-a: ${TEAM_KEY}, provider: ${PROVIDER_KEY} }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoBackend
metadata: { name: llm, namespace: apps }
spec:
  ai: { name: local-llm, provider: { openAI: {} }, hostOverride: "http://${llm.host}" }
  policies:
    backendAuth: { key: { secretRef: { name: llm-keys, key: provider } } }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: llm-budget, namespace: apps }
spec:
  targetRefs: [{ group: portico.dev, kind: PorticoBackend, name: llm }]
  policies:
    apiKey: { keys: [{ key: { secretRef: { name: llm-keys, key: team-a } }, name: team-a }] }
    localRateLimit: [{ type: tokens, maxTokens: 30, tokensPerFill: 30, fillInterval: 1h }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: chat, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /llm } }]
      backendRefs: [{ group: portico.dev, kind: PorticoBackend, name: llm }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: portal, namespace: apps }
spec:
  parentRefs: [{ name: web }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /portal } }]
      backendRefs: [{ group: portico.dev, kind: PorticoBackend, name: tools }]
`)
  await suite.startController()
  const adminPort = await freePort()
  await suite.startProxy('apps', 'web', { ADMIN_ADDR: `127.0.0.1:${adminPort}` })
  podPorts.set('apps/web', { 15000: adminPort, [gwPort]: gwPort })
  await eventually(async () => (await policyCondition('mcp-auth'))?.status === 'True', 'mcp-auth Accepted', 30_000)
})

after(async () => await suite?.stop())

test('the seed\'s MCP route in a cluster: a token with read gets through, none gets 401 with metadata, another permission 403', async t => {
  if (suite === null || idp === undefined) return t.skip('no cluster')
  // The policy reaches the proxy (xDS) shortly after its status says Accepted.
  let client: Client | undefined
  await eventually(async () => {
    try {
      client = await connect(await idp!.token(reader))
      return true
    } catch { return false }
  }, 'the MCP route serving a reader')
  const tools = await client!.listTools()
  assert.deepEqual(tools.tools.map(x => x.name), ['whoami'])
  await client!.close()

  const post = async (token?: string) => await fetch(`${gatewayUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
  })
  const anonymous = await post()
  assert.equal(anonymous.status, 401)
  assert.match(anonymous.headers.get('www-authenticate') ?? '', /resource_metadata="[^"]*\/\.well-known\/oauth-protected-resource/)
  await anonymous.arrayBuffer()
  const metadata = await fetch(`${gatewayUrl}/.well-known/oauth-protected-resource/mcp`)
  assert.equal(metadata.status, 200)
  assert.deepEqual((await metadata.json() as { authorization_servers: string[] }).authorization_servers, [idp.issuer])

  const other = await post(await idp.token(writer))
  assert.equal(other.status, 403)
  await other.arrayBuffer()
  await assert.rejects(connect(await idp.token(writer)))
})

test('porticoctl proxy trace gateway/web and proxy config all: the PorticoPolicy each attached policy came from', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const home = mkdtempSync(join(tmpdir(), 'porticoctl-policies-'))
  suite.defer(() => rmSync(home, { recursive: true, force: true }))
  const env = { KUBECONFIG: cluster.kubeconfig, HOME: home, KUBERNETES_SERVICE_HOST: '' }
  await cluster.waitForReadyPods('apps', 'gateway.networking.k8s.io/gateway-name=web', 1)
  const trace = await ctl(['proxy', 'trace', 'gateway/web', '-n', 'apps', '--raw', '--port', String(gatewayPort), '--', `http://127.0.0.1:${gatewayPort}/mcp`], { env, timeoutMs: 30_000 })
  assert.equal(trace.code, 0, trace.stderr)
  const routePhase = jsonLines(trace.stdout).find(e => e.message.type === 'policySelection' && e.message.phase === 'route')
  assert.deepEqual(routePhase?.message.sources, { mcpAuthentication: 'PorticoPolicy apps/mcp-auth', authorization: 'PorticoPolicy apps/mcp-auth' })
  const config = await ctl(['proxy', 'config', 'all', 'gateway/web', '-n', 'apps'], { env, timeoutMs: 30_000 })
  assert.equal(config.code, 0, config.stderr)
  assert.match(config.stdout, /mcpAuthentication\(PorticoPolicy apps\/mcp-auth\)/)
})

test('a policy with a rule that does not compile is Invalid in its status, naming the field; the older policy keeps serving', async t => {
  if (suite === null || idp === undefined) return t.skip('no cluster')
  const { cluster } = suite
  await cluster.apply(`apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: broken, namespace: apps }
spec:
  targetRefs: [{ kind: HTTPRoute, name: mcp, sectionName: tools }]
  policies:
    authorization: { rules: ['jwt.sub =='] }
`)
  await eventually(async () => (await policyCondition('broken'))?.reason === 'Invalid', "'broken' Invalid")
  const c = await policyCondition('broken')
  assert.equal(c?.status, 'False')
  assert.match(c!.message, /^spec\.policies\.authorization\.rules\[0\]: invalid CEL expression/)
  const client = await connect(await idp.token(reader))
  assert.equal((await client.listTools()).tools.length, 1)
  await client.close()
})

test('a PorticoBackend serves two MCP servers, found by Service, behind one endpoint with prefixed tool names', async t => {
  if (suite === null || idp === undefined) return t.skip('no cluster')
  let client: Client | undefined
  await eventually(async () => {
    try {
      client = await connect(undefined, '/portal')
      return true
    } catch { return false }
  }, 'the PorticoBackend serving')
  const tools = await client!.listTools()
  assert.deepEqual(tools.tools.map(x => x.name).sort(), ['first_whoami', 'second_whoami'])
  const answer = await client!.callTool({ name: 'second_whoami', arguments: {} })
  assert.deepEqual(answer.content, [{ type: 'text', text: 'none' }])
  await client!.close()
})

test('an ai PorticoBackend with its provider key from a Secret, and a PorticoPolicy with a client API key from a Secret and a token budget, driven by the official openai SDK', async t => {
  if (suite === null || llm === undefined) return t.skip('no cluster')
  const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gatewayUrl}/llm`, maxRetries: 0 })
  await eventually(async () => (await policyCondition('llm-budget'))?.status === 'True', 'llm-budget Accepted')
  const cost = promptTokens(MESSAGES) + countTokens(REPLY)
  assert.ok(cost > 15 && cost < 30, `two exchanges spend the budget of 30 (one costs ${cost})`)
  let first: OpenAI.Chat.Completions.ChatCompletion | undefined
  await eventually(async () => {
    first = await client(TEAM_KEY).chat.completions.create({ model: 'gpt-test', messages: MESSAGES }).catch(() => undefined)
    return first !== undefined
  }, 'the ai backend answering')
  assert.equal(first!.choices[0]!.message.content, REPLY)
  await assert.rejects(client('sk-someone-else-99').chat.completions.create({ model: 'gpt-test', messages: MESSAGES }), (err: unknown) => err instanceof OpenAI.AuthenticationError)
  await client(TEAM_KEY).chat.completions.create({ model: 'gpt-test', messages: MESSAGES })
  await assert.rejects(client(TEAM_KEY).chat.completions.create({ model: 'gpt-test', messages: MESSAGES }), (err: unknown) => err instanceof OpenAI.RateLimitError)
  // The team's key never reaches the provider; the provider's key, from the Secret, does.
  assert.ok(llm.headers.every(h => h.authorization !== `Bearer ${TEAM_KEY}`))
  assert.equal(llm.headers.at(-1)?.authorization, `Bearer ${PROVIDER_KEY}`)
})

test('gateway and listener policies on a second Gateway: basicAuth from Secrets, the listener\'s wins there, a newer duplicate is Conflicted', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const hash = (user: string, password: string) => `${user}:${execFileSync('openssl', ['passwd', '-apr1', password], { encoding: 'utf8' }).trim()}`
  const [portA, portB] = [await freePort(), await freePort()]
  await cluster.apply(`apiVersion: v1
kind: Secret
metadata: { name: users, namespace: apps }
stringData: { htpasswd: '${hash('alice', 'alice-pw')}' }
---
apiVersion: v1
kind: Secret
metadata: { name: admins, namespace: apps }
stringData: { htpasswd: '${hash('bob', 'bob-pw')}' }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: apps }
spec:
  gatewayClassName: portico
  listeners:
    - { name: a, port: ${portA}, protocol: HTTP }
    - { name: b, port: ${portB}, protocol: HTTP }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: edge-route, namespace: apps }
spec:
  parentRefs: [{ name: edge }]
  rules: [{ backendRefs: [{ name: mcp-server, port: 80 }] }]
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: edge-wide, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: edge }]
  policies:
    basicAuth: { htpasswd: { secretRef: { name: users, key: htpasswd } } }
`)
  // Created a moment later: newer than edge-wide.
  await new Promise(resolve => setTimeout(resolve, 1100))
  await cluster.apply(`apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: edge-b, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: edge, sectionName: b }]
  policies:
    basicAuth: { htpasswd: { secretRef: { name: admins, key: htpasswd } } }
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: edge-dup, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: edge }]
  policies:
    basicAuth: { htpasswd: { secretRef: { name: admins, key: htpasswd } } }
`)
  const proxy = await suite.startProxy('apps', 'edge')
  const status = async (port: number, user?: string, password?: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/`, { headers: user === undefined ? {} : { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` } }).catch(() => undefined)
    await res?.arrayBuffer()
    return res?.status ?? 0
  }
  await eventually(async () => (await status(portA)) === 401 && (await status(portB, 'bob', 'bob-pw')) !== 401 && (await status(portB)) === 401, "the edge Gateway's policies on its proxy")
  assert.notEqual(await status(portA, 'alice', 'alice-pw'), 401, 'listener a: the Gateway-wide policy (users)')
  assert.equal(await status(portA, 'bob', 'bob-pw'), 401)
  assert.equal(await status(portB, 'alice', 'alice-pw'), 401, 'listener b: its own policy wins (admins)')
  await eventually(async () => (await policyCondition('edge-dup'))?.reason === 'Conflicted', 'edge-dup Conflicted')
  assert.match((await policyCondition('edge-dup'))!.message, /apps\/edge-wide/)
  assert.equal((await policyCondition('edge-b'))?.status, 'True')
})

test('jwtAuth and a request rate limit on a route, extAuthz on a listener, attached later: each takes effect, and goes when its policy is deleted', async t => {
  if (suite === null || idp === undefined) return t.skip('no cluster')
  const { cluster } = suite
  const authz = await startAuthzServer(req => req.attributes.request?.http?.headers?.['x-let-me-in'] === 'yes' ? OK : { status: { code: 7 }, denied_response: { status: { code: 403 } } })
  suite.defer(() => authz.close())
  await cluster.apply(`apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: portal-jwt, namespace: apps }
spec:
  targetRefs: [{ kind: HTTPRoute, name: portal }]
  policies:
    jwtAuth: { mode: strict, issuer: ${idp.issuer}, audiences: [${idp.audience}], jwks: { secretRef: { name: idp, key: jwks.json } } }
    localRateLimit: [{ maxTokens: 3, tokensPerFill: 3, fillInterval: 1h }]
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: web-authz, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: web, sectionName: http }]
  policies:
    extAuthz: { host: "127.0.0.1:${authz.port}", protocol: { grpc: {} } }
`)
  const token = await idp.token(reader)
  const post = async (headers: Record<string, string>) => {
    const res = await fetch(`${gatewayUrl}/portal`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } } }) })
    await res.arrayBuffer()
    return res.status
  }
  await eventually(async () => (await post({ authorization: `Bearer ${token}` })) === 403, 'extAuthz refusing a request without x-let-me-in')
  assert.ok(authz.calls.length > 0, 'the authorization service was asked')
  assert.equal(await post({ 'x-let-me-in': 'yes' }), 401, 'extAuthz lets it in; jwtAuth (route) wants a token')
  // Three requests a bucket: some were spent above; the rest, then 429.
  const statuses: number[] = []
  for (let i = 0; i < 4; i++) statuses.push(await post({ 'x-let-me-in': 'yes', authorization: `Bearer ${token}` }))
  assert.ok(statuses.includes(200), `a valid token passes: ${statuses.join(',')}`)
  assert.equal(statuses.at(-1), 429, `the route's bucket runs out: ${statuses.join(',')}`)
  assert.equal((await policyCondition('portal-jwt'))?.status, 'True')
  await cluster.api('DELETE', '/apis/portico.dev/v1alpha1/namespaces/apps/porticopolicies/web-authz')
  await cluster.api('DELETE', '/apis/portico.dev/v1alpha1/namespaces/apps/porticopolicies/portal-jwt')
  await eventually(async () => (await post({})) === 200, 'the route open again once the policies are deleted')
})

test('client-connection settings from a PorticoPolicy frontend: the path and request-head timeout of every listener of a Gateway, until the policy is deleted', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const port = await freePort()
  await cluster.apply(`${gatewayYaml('apps', 'clients', port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: clients-route, namespace: apps }
spec:
  parentRefs: [{ name: clients }]
  rules: [{ backendRefs: [{ name: mcp-server, port: 80 }] }]
`)
  const proxy = await suite.startProxy('apps', 'clients')
  const status = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { redirect: 'manual' }).catch(() => undefined)
    await res?.arrayBuffer()
    return res?.status ?? 0
  }
  // Default: an encoded slash is redirected to the path with /.
  await eventually(async () => (await status('/a%2Fb')) === 307, 'the clients Gateway serving with the default path settings')
  await cluster.apply(`apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: clients-frontend, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: clients }]
  frontend:
    path: { escapedSlashesAction: RejectRequest }
    timeout: { http: { requestHeadersTimeout: 1s } }
`)
  await eventually(async () => (await status('/a%2Fb')) === 400, 'RejectRequest from the policy')
  assert.equal((await policyCondition('clients-frontend'))?.status, 'True')
  // A client that never finishes its request head gets 408 after the policy's 1 s.
  const started = Date.now()
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connectTcp(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nhost: x\r\n'))
    let text = ''
    socket.on('data', d => { text += String(d) })
    socket.on('close', () => resolve(text))
    socket.on('error', reject)
    socket.setTimeout(8000, () => socket.destroy())
  })
  assert.match(answer, /^HTTP\/1\.1 408/)
  assert.ok(Date.now() - started < 5000, `408 after the policy's 1 s, not the default 10 s (${Date.now() - started} ms)`)
  await cluster.api('DELETE', '/apis/portico.dev/v1alpha1/namespaces/apps/porticopolicies/clients-frontend')
  await eventually(async () => (await status('/a%2Fb')) === 307, 'the default again once the policy is deleted')
})

test('oidc from a PorticoPolicy (client secret from a Secret): a browser logs in at the provider and reaches the backend', async t => {
  if (suite === null) return t.skip('no cluster')
  const { cluster } = suite
  const [gwPort, idpPort] = [await freePort(), await freePort()]
  const url = `http://127.0.0.1:${gwPort}`
  const loginIdp = await startLoginIdp({
    port: idpPort,
    client: { id: 'portal', secret: 'portal-client-secret', redirectUris: [`${url}/oauth/callback`], postLogoutRedirectUris: [] },
    accounts: { alice: { email: 'alice@example.test' } }
  })
  suite.defer(() => loginIdp.stop())
  await cluster.apply(`apiVersion: v1
kind: Secret
metadata: { name: sso, namespace: apps }
stringData: { client-secret: portal-client-secret }
---
${gatewayYaml('apps', 'sso', gwPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: sso-route, namespace: apps }
spec:
  parentRefs: [{ name: sso }]
  rules: [{ backendRefs: [{ name: mcp-server, port: 80 }] }]
---
apiVersion: portico.dev/v1alpha1
kind: PorticoPolicy
metadata: { name: sso, namespace: apps }
spec:
  targetRefs: [{ kind: Gateway, name: sso }]
  policies:
    oidc:
      issuer: ${loginIdp.issuer}
      clientId: portal
      clientSecret: { secretRef: { name: sso, key: client-secret } }
      redirectUri: /oauth/callback
`)
  const proxy = await suite.startProxy('apps', 'sso')
  let last = ''
  await eventually(async () => {
    const res = await fetch(`${url}/app`, { redirect: 'manual', headers: { accept: 'text/html' } }).catch((err: Error) => { last = err.message; return undefined })
    if (res !== undefined) last = `${res.status} ${res.headers.get('location') ?? ''} ${await res.text()}`
    return res?.status === 302 && (res.headers.get('location') ?? '').startsWith(`${loginIdp.issuer}/`)
  }, 'the sso Gateway sending browsers to the provider').catch(async (err: Error) => {
    throw new Error(`${err.message}; last answer: ${last}; policy: ${JSON.stringify(await policyCondition('sso'))}`)
  })
  const browser = new Browser()
  const landed = await browser.login(`${url}/app`, 'alice')
  // Back at the original URL, past the gateway: the MCP server itself answers a browser's GET.
  assert.equal(landed.url, `${url}/app`)
  assert.match(landed.text, /Client must accept text\/event-stream/)
  assert.equal((await policyCondition('sso'))?.status, 'True')
})
