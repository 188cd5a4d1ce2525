/**
 * What starting Portico loads (issue 15, "Footprint"): `portico --version` and `--help` print
 * without the engine, and the engine barrel leaves out what only some configs use — gRPC
 * (ext_authz, ext_proc, the rate limit service, xDS), CEL, RE2, JOSE, OIDC and the MCP SDK
 * (with zod) and undici load at their first use; TypeBox and the Kubernetes client never; the
 * YAML parser not in data-plane workers; the engine's MCP code (mcp/) only with an MCP backend,
 * its LLM code (llm/) only with an AI backend or models, in every thread (issue 54); so do the
 * TCP/TLS and UDP listeners' proxies (stream/) with such a listener, the InferencePool backend
 * with a pool and the mesh identity and HBONE tunnels with a mesh identity (issue 54). The servers
 * (prom-client) load to run, not to validate; the admin server's framework (Fastify) with its
 * first request (issue 54). bench/footprint.ts measures why.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import http from 'node:http'
import net from 'node:net'
import { freePort, porticoStarted } from './lib/portico-child.ts'
import { makeTestCa } from '@portico/testkit/hbone-peer'
import { START_FLAGS } from '../src/v8-flags.ts'

const BIN = fileURLToPath(new URL('../bin/portico.ts', import.meta.url))
/** The package's `portico` (package.json "bin"): plain JavaScript that turns the compile cache on, then bin/portico.ts. */
const BIN_MJS = fileURLToPath(new URL('../bin/portico.mjs', import.meta.url))
const PROXY_DIR = fileURLToPath(new URL('..', import.meta.url))

/**
 * Preloaded: prints the URL of every module loaded (imports and requires) when the process
 * exits; a script reads the list so far as globalThis.loadedModules.
 */
const PROBE = 'data:text/javascript,' + encodeURIComponent(`
import { registerHooks } from 'node:module'
const urls = globalThis.loadedModules = []
registerHooks({ load (url, context, next) { urls.push(url); return next(url, context) } })
process.on('exit', () => process.stderr.write('\\nLOADED ' + JSON.stringify(urls) + '\\n'))
`)

function run (args: string[]): { stdout: string, urls: string[] } {
  const r = spawnSync(process.execPath, ['--import', PROBE, ...args], { cwd: PROXY_DIR, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const line = r.stderr.split('\n').find(l => l.startsWith('LOADED '))
  assert.ok(line !== undefined, r.stderr)
  return { stdout: r.stdout, urls: JSON.parse(line.slice('LOADED '.length)) as string[] }
}

test('portico --version and --help load nothing but the argument parser, the version and the start settings (V8 flags, malloc tunables, the start-up GC, the tick object hold, the builtins a gateway loads before the flags)', () => {
  for (const [bin, flag] of [[BIN, '--version'], [BIN, '--help'], [BIN_MJS, '--version']] as const) {
    const { stdout, urls } = run([bin, flag])
    assert.match(stdout, flag === '--version' ? /^portico \d/ : /usage: portico/)
    const ours = urls.filter(u => !u.startsWith('node:'))
    assert.ok(ours.every(u => /\/packages\/proxy\/(bin\/portico\.(ts|mjs)|src\/v8-flags\.ts|src\/malloc-tunables\.ts|src\/malloc-trim\.ts|src\/startup-gc\.ts|src\/tick-maps\.ts|src\/builtins-preload\.ts|src\/cli\.ts|src\/version\.ts|package\.json)$/.test(u)), `${flag} loaded:\n${ours.join('\n')}`)
  }
})

/**
 * Packages only some configs need (the OpenTelemetry SDK: only with config.tracing or
 * accessLog.otlp; undici: only for HTTP/2 backends, MCP HTTP targets, JWKS, HTTP ext_authz,
 * the admin's loopback calls; the Kubernetes client: only the controller).
 */
const ON_DEMAND = /node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?(undici\/|@opentelemetry\/|@grpc\/|@bufbuild\/cel|@bufbuild\/re2|@modelcontextprotocol\/|zod\/|protobufjs\/|jose\/|openid-client\/|bcryptjs\/|apache-md5\/|@sinclair\/typebox\/|@kubernetes\/|pino-pretty\/)/

test('the engine barrel loads none of the packages only some configs need', () => {
  const { urls } = run(['--input-type=module', '-e', "await import('@portico/engine')"])
  assert.deepEqual(urls.filter(u => ON_DEMAND.test(u)), [])
  assert.ok(urls.some(u => u.endsWith('/packages/engine/src/index.ts')), 'the barrel was loaded')
})

test('starting a stdio MCP server loads neither the MCP SDK nor zod', () => {
  const transport = fileURLToPath(new URL('../../engine/src/mcp/upstream/stdio.ts', import.meta.url))
  const script = `const { StdioProcessTransport } = await import(${JSON.stringify(transport)})
const t = new StdioProcessTransport({ cmd: process.execPath, args: ['-e', 'process.stdin.resume()'], env: {}, maxLineBytes: 1024 })
await t.start()
await t.close()`
  const { urls } = run(['--input-type=module', '-e', script])
  assert.ok(urls.some(u => u.endsWith('/mcp/upstream/stdio.ts')), 'the transport was loaded')
  assert.deepEqual(urls.filter(u => /node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?(@modelcontextprotocol\/|zod\/)/.test(u)), [])
})

test('talking to a legacy SSE target loads neither the MCP SDK nor zod', () => {
  const transport = fileURLToPath(new URL('../../engine/src/mcp/upstream/sse.ts', import.meta.url))
  const script = `const http = await import('node:http')
const { SseClientTransport } = await import(${JSON.stringify(transport)})
let stream
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    stream = res
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('event: endpoint\\ndata: /message\\n\\n')
    return
  }
  req.resume()
  req.on('end', () => {
    res.writeHead(202).end()
    stream.write('data: {"jsonrpc":"2.0","id":1,"result":{}}\\n\\n')
  })
})
await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
const t = new SseClientTransport(new URL('http://127.0.0.1:' + server.address().port + '/sse'))
const answered = new Promise(resolve => { t.onmessage = resolve })
await t.start()
await t.send({ jsonrpc: '2.0', id: 1, method: 'ping' })
await answered
await t.close()
server.closeAllConnections()
server.close()`
  const { urls } = run(['--input-type=module', '-e', script])
  assert.ok(urls.some(u => u.endsWith('/mcp/upstream/sse.ts')), 'the transport was loaded')
  assert.deepEqual(urls.filter(u => /node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?(@modelcontextprotocol\/|zod\/)/.test(u)), [])
})

test('the LLM wire formats load when a config with an AI backend is applied, before any request', () => {
  const script = `const { Engine, loadConfigText } = await import('@portico/engine')
const loaded = loadConfigText(JSON.stringify({ gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ ai: { name: 'llm', provider: { openAI: {} } } }] }] }), { baseDir: '/' })
if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics))
new Engine({ tracing: false }).apply(loaded.config.ir)`
  const r = spawnSync(process.execPath, ['--import', PROBE, '--input-type=module', '-e', script], { cwd: PROXY_DIR, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const line = r.stderr.split('\n').find(l => l.startsWith('LOADED '))
  assert.ok(line !== undefined, r.stderr)
  const urls = JSON.parse(line.slice('LOADED '.length)) as string[]
  for (const name of ['openai-chat', 'openai-responses', 'anthropic-messages', 'gemini', 'bedrock-converse']) {
    assert.ok(urls.some(u => u.endsWith(`/llm/formats/${name}.ts`)), `${name} loaded`)
  }
  // And the rest of the pipeline's LLM code (llm/data-path.ts), the translation of ai backends, the providers.
  for (const file of ['llm/data-path.ts', 'llm/request.ts', 'llm/usage-handler.ts', 'llm/span.ts', 'config/ai-to-ir.ts', 'llm/providers/index.ts']) {
    assert.ok(urls.some(u => u.endsWith(`/engine/src/${file}`)), `${file} loaded`)
  }
  assert.deepEqual(urls.filter(u => /\/engine\/src\/mcp\//.test(u)), [], 'no MCP module')
})

test('a config with an MCP backend loads the MCP gateway and listener when applied, before any request, and no LLM code', () => {
  // An HTTP target nobody serves: applying the config connects to nothing.
  const script = `const { Engine, loadConfigText } = await import('@portico/engine')
const loaded = loadConfigText(JSON.stringify({ gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ mcp: { targets: [{ name: 't', mcp: { host: 'http://127.0.0.1:9/mcp' } }] } }] }] }), { baseDir: '/' })
if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics))
const engine = new Engine({ tracing: false })
engine.apply(loaded.config.ir)
await engine.close()`
  const r = spawnSync(process.execPath, ['--import', PROBE, '--input-type=module', '-e', script], { cwd: PROXY_DIR, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const line = r.stderr.split('\n').find(l => l.startsWith('LOADED '))
  assert.ok(line !== undefined, r.stderr)
  const urls = JSON.parse(line.slice('LOADED '.length)) as string[]
  for (const file of ['mcp/client/http.ts', 'mcp/session/gateway.ts', 'mcp/session/session.ts', 'mcp/upstream/target.ts']) {
    assert.ok(urls.some(u => u.endsWith(`/engine/src/${file}`)), `${file} loaded`)
  }
  assert.deepEqual(urls.filter(u => /\/engine\/src\/llm\//.test(u)), [], 'no LLM module')
})

/**
 * The authentication policies' code (issue 54): jwtAuth and mcpAuthentication (token
 * verification, the JWKS cache), ext_authz (its policy, gRPC and HTTP clients and the header
 * mutations they share), OIDC (its policy and client). Part of ON_CONFIG.
 */
const AUTH_ON_CONFIG = /\/packages\/engine\/src\/(policy\/(oidc|jwt-auth|ext-authz)|auth\/(jwt|jwks|ext-authz-check|ext-authz-grpc|ext-authz-http|oidc-client))\.ts$/

/**
 * The engine's code only some listeners and backends use (issue 54): the TCP/TLS and UDP
 * proxies (stream/, but its server TLS contexts and pair-close, which HTTPS listeners and the
 * connection distributor use), the mesh identity and HBONE tunnels (mesh/, but the CA
 * defaults the settings read), the InferencePool backend (inference/, its translation and
 * pipeline step), and the policies ext_proc (its gRPC client, codec and phases), remote and
 * local rate limit, and the authentication policies (AUTH_ON_CONFIG).
 */
const ON_CONFIG = new RegExp(/\/packages\/engine\/src\/(stream\/(?!server-tls\.ts|pair-close\.ts)|mesh\/(?!ca-defaults\.ts)|inference\/|pipeline\/inference-pool\.ts|config\/inference-pool-to-ir\.ts|policy\/(ext-proc|remote-rate-limit|local-rate-limit|bucket-keys|cost-bucket)\.ts|traffic\/(ext-proc-grpc|ext-proc-codec|grpc-stream-channel)\.ts|http\/ext-proc-(request|response)-phase\.ts)/.source + '|' + AUTH_ON_CONFIG.source)

test('TCP, UDP, InferencePool, ext_proc, remote and local rate limit code loads when a config with such a listener, backend or policy is applied, each with its own, and not for plain routes', () => {
  const configs = {
    plain: { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', backends: [{ host: '127.0.0.1:9' }] }] },
    tcp: { gateways: { t: { port: 3001, protocol: 'TCP' } }, tcpRoutes: [{ name: 't', gateways: 't', backends: [{ host: '127.0.0.1:9' }] }] },
    udp: { gateways: { u: { port: 3002, protocol: 'UDP' } }, udpRoutes: [{ name: 'u', gateways: 'u', backends: [{ host: '127.0.0.1:9' }] }] },
    policies: { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', policies: { extProc: { host: '127.0.0.1:9' }, remoteRateLimit: { host: '127.0.0.1:9', domain: 'd', descriptors: [{ entries: [{ key: 'path', value: 'request.path' }] }] } }, backends: [{ host: '127.0.0.1:9' }] }] },
    localRateLimit: { gateways: { default: { port: 3000 } }, routes: [{ name: 'r', policies: { localRateLimit: [{ maxTokens: 10, tokensPerFill: 10, fillInterval: '1s' }] }, backends: [{ host: '127.0.0.1:9' }] }] },
    pool: { gateways: { default: { port: 3000 } }, routes: [{ name: 'p', backends: [{ inferencePool: { name: 'p', endpoints: ['127.0.0.1:9'], endpointPicker: { host: '127.0.0.1:9', tls: false } } }] }] }
  }
  // One engine, the configs applied in turn (as reloads): what each one added.
  const script = `const { Engine, loadConfigText } = await import('@portico/engine')
const configs = ${JSON.stringify(configs)}
const onConfig = new RegExp(${JSON.stringify(ON_CONFIG.source)})
const engine = new Engine({ tracing: false })
const added = {}
let before = []
for (const [name, config] of Object.entries(configs)) {
  const loaded = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics))
  engine.apply(loaded.config.ir)
  const now = globalThis.loadedModules.filter(u => onConfig.test(u)).map(u => u.replace(/.*\\/engine\\/src\\//, ''))
  added[name] = now.filter(u => !before.includes(u)).sort()
  before = now
}
await engine.close()
console.log(JSON.stringify(added))`
  const { stdout } = run(['--input-type=module', '-e', script])
  const added = JSON.parse(stdout) as Record<keyof typeof configs, string[]>
  assert.deepEqual(added.plain, [], 'nothing for plain routes')
  for (const file of ['stream/stream-proxy.ts', 'stream/relay.ts', 'stream/client-hello.ts']) assert.ok(added.tcp.includes(file), `${file} with the TCP listener`)
  assert.ok(!added.tcp.some(u => u === 'stream/udp-proxy.ts' || /inference/.test(u)), `the TCP config loaded only its own: ${added.tcp.join(', ')}`)
  assert.deepEqual(added.udp, ['stream/udp-proxy.ts'], 'the UDP proxy with the UDP listener (its helpers came with TCP\'s)')
  for (const file of ['policy/ext-proc.ts', 'traffic/ext-proc-grpc.ts', 'traffic/ext-proc-codec.ts', 'http/ext-proc-request-phase.ts', 'http/ext-proc-response-phase.ts', 'policy/remote-rate-limit.ts']) assert.ok(added.policies.includes(file), `${file} with the policies`)
  assert.ok(!added.policies.some(u => /inference|oidc/.test(u)), `the policies loaded only their own: ${added.policies.join(', ')}`)
  assert.deepEqual(added.localRateLimit, ['policy/bucket-keys.ts', 'policy/cost-bucket.ts', 'policy/local-rate-limit.ts'], 'the local rate limit with its policy')
  for (const file of ['config/inference-pool-to-ir.ts', 'inference/endpoints.ts', 'pipeline/inference-pool.ts', 'inference/pick.ts', 'inference/picker-client.ts']) assert.ok(added.pool.includes(file), `${file} with the pool`)
  assert.ok(!Object.values(added).flat().some(u => u.startsWith('mesh/')), 'no mesh code without a mesh identity')
})

test('jwtAuth, mcpAuthentication, extAuthz (a route\'s or a listener filter\'s) and OIDC code loads when a config with such a policy is applied, before any request, each only its own, and none for plain routes', () => {
  const gateways = { default: { port: 3000 } }
  const backends = [{ host: '127.0.0.1:9' }]
  const route = (policies: object) => ({ gateways, routes: [{ name: 'r', policies, backends }] })
  // Nothing listens at 127.0.0.1:9: applying a config fetches no key and calls no service.
  const configs = {
    plain: { gateways, routes: [{ name: 'r', backends }] },
    jwtAuth: route({ jwtAuth: { mode: 'strict', issuer: 'https://idp.example.com', audiences: ['a'], jwks: { url: 'http://127.0.0.1:9/jwks' } } }),
    mcpAuthentication: { gateways, routes: [{ name: 'r', policies: { mcpAuthentication: { mode: 'strict', issuer: 'https://idp.example.com', audiences: ['a'], jwks: { url: 'http://127.0.0.1:9/jwks' } } }, backends: [{ mcp: { targets: [{ name: 't', mcp: { host: 'http://127.0.0.1:9/mcp' } }] } }] }] },
    extAuthz: route({ extAuthz: { host: '127.0.0.1:9' } }),
    listenerFilter: { gateways: { default: { port: 3000, filters: { requests: [{ extAuthz: { host: '127.0.0.1:9', protocol: { http: {} } } }] } } }, routes: [{ name: 'r', backends }] },
    oidc: route({ oidc: { issuer: 'https://idp.example.com', clientId: 'c', redirectUri: '/callback' } })
  }
  // Each config in a process of its own: what applying it alone loads.
  const loads = (config: object): string[] => {
    const script = `const { Engine, loadConfigText } = await import('@portico/engine')
const loaded = loadConfigText(${JSON.stringify(JSON.stringify(config))}, { baseDir: '/' })
if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics))
const engine = new Engine({ tracing: false })
engine.apply(loaded.config.ir)
await engine.close()`
    const { urls } = run(['--input-type=module', '-e', script])
    // A set: a require() of an ES module the import graph already loaded (policy/services.ts
    // asking for auth/jwks.ts, which auth/jwt.ts imports) passes the load hook again, for the same module.
    return [...new Set(urls.filter(u => AUTH_ON_CONFIG.test(u)).map(u => u.replace(/.*\/engine\/src\//, '')))].sort()
  }
  const jwt = ['auth/jwks.ts', 'auth/jwt.ts', 'policy/jwt-auth.ts']
  const extAuthz = ['auth/ext-authz-check.ts', 'auth/ext-authz-grpc.ts', 'auth/ext-authz-http.ts', 'policy/ext-authz.ts']
  assert.deepEqual(loads(configs.plain), [], 'nothing for plain routes')
  assert.deepEqual(loads(configs.jwtAuth), jwt)
  assert.deepEqual(loads(configs.mcpAuthentication), jwt)
  assert.deepEqual(loads(configs.extAuthz), extAuthz)
  assert.deepEqual(loads(configs.listenerFilter), extAuthz)
  assert.deepEqual(loads(configs.oidc), ['auth/oidc-client.ts', 'policy/oidc.ts'])
})

test('basicAuth\'s hashing libraries (bcryptjs, apache-md5) load when a config with such htpasswd entries is applied, before any request, each for its own hashes', () => {
  const config = (lines: string) => ({ gateways: { default: { port: 3000 } }, routes: [{ name: 'r', policies: { basicAuth: { htpasswd: lines } }, backends: [{ host: '127.0.0.1:9' }] }] })
  const script = `const { Engine, loadConfigText } = await import('@portico/engine')
const hashing = () => globalThis.loadedModules.filter(u => /node_modules\\/(\\.pnpm\\/[^/]+\\/node_modules\\/)?(bcryptjs|apache-md5)\\//.test(u)).map(u => /bcryptjs/.test(u) ? 'bcryptjs' : 'apache-md5')
const engine = new Engine({ tracing: false })
const seen = {}
for (const [name, config] of Object.entries(${JSON.stringify({ sha: config('sha-user:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M='), bcrypt: config('b:$2y$05$abcdefghijklmnopqrstuu3QdGvHr2q1TUx2BaylbBq6gqhD06lhG') })})) {
  const loaded = loadConfigText(JSON.stringify(config), { baseDir: '/' })
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.diagnostics))
  engine.apply(loaded.config.ir)
  seen[name] = [...new Set(hashing())]
}
await engine.close()
console.log(JSON.stringify(seen))`
  const { stdout } = run(['--input-type=module', '-e', script])
  assert.deepEqual(JSON.parse(stdout), { sha: [], bcrypt: ['bcryptjs'] })
})

test('portico --validate on the quick start loads neither those nor the servers', () => {
  const { stdout, urls } = run([BIN, '--validate', '-f', fileURLToPath(new URL('../../../examples/quickstart.yaml', import.meta.url))])
  assert.match(stdout, /valid/)
  assert.deepEqual(urls.filter(u => ON_DEMAND.test(u) || /node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?(fastify|prom-client)\//.test(u)), [])
})

/**
 * Starts `portico -f` on `config` (a free port is `PORT` in it) with every thread — the
 * primary, data-plane workers, export threads: execArgv is inherited — writing what it
 * loads to a file, as `<thread> <url>` lines (`<thread>`: main, or the module an export
 * thread serves, or worker). Returns the port, the lines read so far and a stop.
 */
async function startProbed (config: string, env: Record<string, string>): Promise<{ port: number, loaded: () => Array<{ thread: string, url: string }>, rewrite: (config: string) => void, stop: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), 'portico-loads-'))
  const seen = join(dir, 'loaded.txt')
  const probe = 'data:text/javascript,' + encodeURIComponent(`
import { registerHooks } from 'node:module'
import { appendFileSync } from 'node:fs'
import { isMainThread, workerData } from 'node:worker_threads'
const thread = isMainThread ? 'main' : typeof workerData?.module === 'string' ? workerData.module.split('/').pop() : 'worker'
registerHooks({ load (url, context, next) { appendFileSync(${JSON.stringify(seen)}, thread + ' ' + url + '\\n'); return next(url, context) } })
`)
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), config.replaceAll('PORT', String(port)))
  const child = spawn(process.execPath, [...START_FLAGS, '--import', probe, BIN, '-f', join(dir, 'config.yaml')], {
    cwd: PROXY_DIR,
    env: { ...process.env, LOG_LEVEL: 'info', ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const stop = (): void => {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await porticoStarted(child)
  } catch (err) {
    stop()
    throw err
  }
  const loaded = () => readFileSync(seen, 'utf8').split('\n').filter(l => l !== '').map(l => {
    const at = l.indexOf(' ')
    return { thread: l.slice(0, at), url: l.slice(at + 1) }
  })
  // By rename, as an editor saves: the file source sees one whole new version.
  const rewrite = (next: string): void => {
    writeFileSync(join(dir, 'next.yaml'), next.replaceAll('PORT', String(port)))
    renameSync(join(dir, 'next.yaml'), join(dir, 'config.yaml'))
  }
  return { port, loaded, rewrite, stop }
}

const PACKAGE = (names: string) => new RegExp(`node_modules/(\\.pnpm/[^/]+/node_modules/)?(${names})/`)

const PLAIN = 'gateways:\n  default: { port: PORT, protocol: HTTP }\nroutes:\n  - name: plain\n    backends:\n      - host: 127.0.0.1:9\n'
/** The policies a config of plain routes does not use, and their clients: each loads with the first config that has it. */
const UNUSED_POLICY_CODE = /\/engine\/src\/(policy\/(jwt-auth|authorization|basic-auth|api-key|ext-authz|local-rate-limit|transformation|csrf)|auth\/(jwt|jwks|ext-authz-[a-z]+|oidc-client|htpasswd))\.ts$/
/** The engine's MCP rooms and its LLM code (llm/, formats included). */
const MCP_OR_LLM = /\/packages\/engine\/src\/(mcp|llm)\//

test('a running proxy with plain HTTP routes and two workers loads no undici in any thread; the workers load the data path, not the primary\'s Portico, the engine\'s index, config loading nor the YAML parser; no thread loads MCP, LLM, TCP/UDP, mesh, InferencePool, JWT, ext_authz or OIDC code, nor prom-client\'s index and the OpenTelemetry API; the workers load no policy the config does not use', async () => {
  const { loaded, stop } = await startProbed(PLAIN, { WORKERS: '2' })
  try {
    const urls = loaded().map(l => l.url)
    assert.ok(urls.some(u => u.endsWith('/workers/worker-main.ts')), 'the workers started')
    assert.deepEqual(urls.filter(u => PACKAGE('undici').test(u)), [])
    // Workers run data-plane.ts (issue 54): the Portico, its config sources, pool and servers are the primary's.
    const worker = loaded().filter(l => l.thread === 'worker').map(l => l.url)
    assert.ok(worker.some(u => u.endsWith('/packages/proxy/src/data-plane.ts')), 'the workers loaded the data plane')
    assert.deepEqual(worker.filter(u => /\/packages\/proxy\/src\/(portico|file-source|config-loader|ops-servers|xds-client|workers\/pool)\.ts$/.test(u)), [])
    // Workers are given IR, never config text: the YAML parser (72 modules) is the primary's (issue 54).
    assert.deepEqual(worker.filter(u => PACKAGE('yaml').test(u) || u.endsWith('/config/yaml-source.ts')), [])
    // Nor config → IR (config/to-ir.ts and its translators), which the primary loads with its first config.
    assert.deepEqual(worker.filter(u => /\/engine\/src\/config\/(to-ir|[a-z-]+-to-ir)\.ts$/.test(u)), [])
    // Nor the engine's index, config files and their validation, nor settings.ts's env and
    // schema parsing: workers import @portico/engine/serving and worker-settings.ts (184
    // modules, 904 KB of source, against 198 and 972 KB through the index).
    assert.deepEqual(worker.filter(u => /\/engine\/src\/(index|config\/(load|validate|referenced-file|diagnostics))\.ts$/.test(u) || u.endsWith('/proxy/src/settings.ts')), [])
    // Nor the IR's checks (the primary ran them on the same IR) nor the CEL compiler (no expression in the config).
    assert.deepEqual(worker.filter(u => /\/engine\/src\/(ir\/(validate|types)|cel\/(expression|check))\.ts$/.test(u)), [])
    // Nor pino: a worker's JSON lines are written by ops/json-logger.ts (184 -> 138 modules).
    assert.deepEqual(worker.filter(u => PACKAGE('pino').test(u) || PACKAGE('sonic-boom').test(u) || PACKAGE('thread-stream').test(u)), [])
    assert.ok(loaded().some(l => l.thread === 'main' && l.url.endsWith('/engine/src/config/to-ir.ts')), 'the primary translated the config')
    assert.ok(loaded().some(l => l.thread === 'main' && PACKAGE('yaml').test(l.url)), 'the primary parsed the config with it')
    // Nor, in any thread, a module of mcp/ or llm/ (issue 54): they load when a config has an
    // MCP backend, an AI backend or models (startup-loads' reload test below, and the next).
    assert.deepEqual(urls.filter(u => MCP_OR_LLM.test(u)), [])
    // Nor the TCP/TLS/UDP proxies, the mesh identity, HBONE, the InferencePool backend or the
    // policies that load with a config using them: ext_proc, remote rate limit, JWT, ext_authz,
    // OIDC (issue 54).
    assert.deepEqual(urls.filter(u => ON_CONFIG.test(u)), [])
    // prom-client without its index (src/prom-client.ts): no OpenTelemetry API (its exemplars',
    // never on), no summary, push gateway or cluster module; its default metrics
    // and counters, in the primary, and its counters in the workers.
    assert.deepEqual(urls.filter(u => PACKAGE('@opentelemetry/api|tdigest|bintrees').test(u) || /\/prom-client\/(index\.js|lib\/(summary|pushgateway|cluster|defaultMetrics|metrics\/processCpuTotal)\.js)$/.test(u)), [])
    assert.ok(worker.some(u => u.endsWith('/prom-client/lib/counter.js')), 'the workers count with prom-client')
    assert.ok(loaded().some(l => l.thread === 'main' && l.url.endsWith('/prom-client/lib/metrics/eventLoopLag.js')), 'the primary has the default metrics')
    // Nor the policies this config does not use, nor their clients (policy/compile.ts, policy/services.ts):
    // every worker would hold each once more (docs/multicore.md, Memory). 214 → 197 worker modules.
    assert.deepEqual(worker.filter(u => UNUSED_POLICY_CODE.test(u)), [])
    // Every Portico file a worker loads is Latin-1: V8 keeps a module's source in each isolate
    // that loads it, as UTF-16 (twice the bytes) if one character is above U+00FF
    // (scripts/latin1-sources.ts rewrites a file that is not; 72 of 159 were, 610 KB a thread).
    const wide = [...new Set(worker)].filter(u => u.startsWith('file:') && u.includes('/packages/') && !u.includes('/node_modules/') && /[^\u0000-\u00ff]/u.test(readFileSync(fileURLToPath(u), 'utf8')))
    assert.deepEqual(wide, [], 'run node scripts/latin1-sources.ts on these files')
    // In no thread, their clients (the primary checks htpasswd files as it translates the config).
    assert.deepEqual(urls.filter(u => /\/engine\/src\/auth\/(jwt|jwks|ext-authz-[a-z]+|oidc-client)\.ts$/.test(u)), [])
  } finally {
    stop()
  }
})

/**
 * The admin app's framework: Fastify and what it alone loads (admin/server.ts builds it on the
 * first admin request). Of ajv only its runtime helpers load at start, for the precompiled
 * config validator (engine config/validate.ts); Fastify's schema compiler loads the rest.
 */
const ADMIN_FRAMEWORK = new RegExp(PACKAGE('fastify|find-my-way|fast-json-stringify|avvio|semver|@fastify/[^/]+').source + '|/node_modules/ajv/(?!package\\.json$|dist/runtime/)')

test('the admin server listens at ready without its framework (Fastify, ajv, find-my-way, semver) nor the pprof encoder; the first admin request loads it, and every request waiting meanwhile — a POST with a body included — is answered', async () => {
  const adminPort = await freePort()
  const { loaded, stop } = await startProbed(PLAIN, { WORKERS: '1', ADMIN_ADDR: `127.0.0.1:${adminPort}` })
  try {
    assert.deepEqual(loaded().filter(l => ADMIN_FRAMEWORK.test(l.url)).map(l => l.url), [], 'nothing of Fastify at ready')
    // Nor the heap profile's encoder (admin/pprof.ts, pprof-format): the sampler runs from the start, the encoder loads with the app.
    assert.deepEqual(loaded().filter(l => PACKAGE('pprof-format').test(l.url) || l.url.endsWith('/admin/pprof.ts')).map(l => l.url), [], 'no pprof encoder at ready')
    assert.ok(loaded().some(l => l.url.endsWith('/admin/heap-sampler.ts')), 'the heap sampler at ready')
    const admin = `http://127.0.0.1:${adminPort}`
    // Sent together: the first starts the load, the others arrive while it runs.
    const [list, logging, cel, missing] = await Promise.all([
      fetch(`${admin}/`),
      fetch(`${admin}/logging`),
      fetch(`${admin}/api/cel`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ expression: '1 + 2' }) }),
      fetch(`${admin}/no-such-path`)
    ])
    assert.equal(list.status, 200)
    assert.match(await list.text(), /^portico admin\n/)
    assert.equal(logging.status, 200)
    assert.match(await logging.text(), /^current log level is /)
    assert.equal(cel.status, 200)
    assert.equal((await cel.json() as { value?: unknown }).value, 3)
    assert.equal(missing.status, 404)
    await missing.arrayBuffer()
    assert.ok(loaded().some(l => l.thread === 'main' && PACKAGE('fastify').test(l.url)), 'Fastify loaded with the first admin request')
  } finally {
    stop()
  }
})

test('the first admin request, cross-site or DNS-rebinding, is refused as every later one is, and refused POSTs change nothing', async () => {
  const adminPort = await freePort()
  const { port, stop } = await startProbed(PLAIN, { WORKERS: '1', ADMIN_ADDR: `127.0.0.1:${adminPort}` })
  try {
    const admin = `http://127.0.0.1:${adminPort}`
    const crossSite = async () => {
      const res = await fetch(`${admin}/quitquitquit`, { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'text/plain' }, body: 'x' })
      return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
    }
    // A DNS-rebinding page: the browser sends the attacker's name as Host (fetch cannot set Host).
    const rebinding = () => new Promise<{ status: number | undefined, text: string }>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: adminPort, path: '/config_dump', headers: { host: `evil.example:${adminPort}` } }, res => {
        let text = ''
        res.setEncoding('utf8').on('data', (c: string) => { text += c }).on('end', () => resolve({ status: res.statusCode, text }))
      }).on('error', reject)
    })
    const first = await crossSite()
    assert.equal(first.status, 403)
    assert.match(first.text, /^forbidden: cross-origin request from https:\/\/evil\.example refused/)
    assert.deepEqual(await crossSite(), first, 'the first refusal is the later ones\' refusal')
    const rebound = await rebinding()
    assert.equal(rebound.status, 403)
    assert.match(rebound.text, /^forbidden: Host "evil\.example:\d+" is not allowed/)
    // Not shut down: the gateway and the admin server still answer.
    const hello = await fetch(`http://127.0.0.1:${port}/`)
    assert.equal(hello.status, 503)
    await hello.arrayBuffer()
    assert.equal((await fetch(`${admin}/logging`)).status, 200)
  } finally {
    stop()
  }
})

test('a reload from plain routes to an MCP backend loads MCP then, in a running proxy with two workers, and serves MCP through the new config', async () => {
  const { port, loaded, rewrite, stop } = await startProbed(PLAIN, { WORKERS: '2' })
  try {
    assert.deepEqual(loaded().filter(l => MCP_OR_LLM.test(l.url)).map(l => l.url), [], 'nothing of MCP before the reload')
    // A stdio target written by hand (newline-delimited JSON-RPC): its `echo` tool answers.
    const server = fileURLToPath(new URL('../../../e2e/fixtures/mcp-faulty-server.ts', import.meta.url))
    rewrite(PLAIN + `  - name: mcp\n    matches:\n      - path: { pathPrefix: /mcp }\n    backends:\n      - mcp:\n          targets:\n            - name: faulty\n              stdio: { cmd: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(server)}] }\n`)
    const post = (body: object, session?: string): Promise<Response> => fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session !== undefined ? { 'mcp-session-id': session } : {}) },
      body: JSON.stringify({ jsonrpc: '2.0', ...body })
    })
    const initialize = { id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'startup-loads', version: '1' } } }
    // The plain route answers /mcp (502: nothing at 127.0.0.1:9) until the new config is in force.
    let res = await post(initialize)
    for (const deadline = Date.now() + 15_000; res.status !== 200 && Date.now() < deadline;) {
      await res.arrayBuffer()
      await new Promise(resolve => setTimeout(resolve, 100))
      res = await post(initialize)
    }
    assert.equal(res.status, 200, await res.clone().text())
    const session = res.headers.get('mcp-session-id') ?? undefined
    await res.arrayBuffer()
    await (await post({ method: 'notifications/initialized' }, session)).arrayBuffer()
    const call = await post({ id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'through the reloaded config' } } }, session)
    assert.equal(call.status, 200)
    assert.match(await call.text(), /through the reloaded config/)
    const lines = loaded()
    for (const file of ['mcp/client/http.ts', 'mcp/session/gateway.ts']) {
      assert.ok(lines.some(l => l.thread === 'main' && l.url.endsWith(`/engine/src/${file}`)), `the primary loaded ${file}`)
    }
    assert.deepEqual(lines.filter(l => /\/engine\/src\/llm\//.test(l.url)).map(l => l.url), [], 'no LLM module')
  } finally {
    stop()
  }
})

test('a reload from plain routes to TCP and UDP listeners and an InferencePool loads their code then, in every thread that serves them, and the TCP listener relays', async () => {
  const { loaded, rewrite, stop } = await startProbed(PLAIN, { WORKERS: '2' })
  const echo = net.createServer(socket => socket.pipe(socket))
  try {
    assert.deepEqual(loaded().filter(l => ON_CONFIG.test(l.url)).map(l => l.url), [], 'none of it before the reload')
    await new Promise<void>(resolve => echo.listen(0, '127.0.0.1', resolve))
    const [tcpPort, udpPort] = [await freePort(), await freePort()]
    rewrite(PLAIN.replace('gateways:\n', `gateways:\n  t: { port: ${tcpPort}, protocol: TCP, address: 127.0.0.1 }\n  u: { port: ${udpPort}, protocol: UDP, address: 127.0.0.1 }\n`) +
      `  - name: pool\n    gateways: default\n    matches:\n      - path: { pathPrefix: /pool }\n    backends:\n      - inferencePool: { name: p, endpoints: ['127.0.0.1:9'], endpointPicker: { host: '127.0.0.1:9', tls: false } }\n` +
      `tcpRoutes:\n  - { name: t, gateways: t, backends: [{ host: '127.0.0.1:${(echo.address() as net.AddressInfo).port}' }] }\n` +
      `udpRoutes:\n  - { name: u, gateways: u, backends: [{ host: '127.0.0.1:9' }] }\n`)
    // The TCP listener relays to the echo server once the new config is in force.
    const relayed = async (): Promise<string> => await new Promise((resolve, reject) => {
      const socket = net.connect(tcpPort, '127.0.0.1', () => socket.end('through the reloaded config'))
      let text = ''
      socket.setEncoding('utf8').on('data', (c: string) => { text += c }).on('end', () => resolve(text)).on('error', reject)
    })
    let answer = ''
    for (const deadline = Date.now() + 15_000; answer === '' && Date.now() < deadline;) {
      answer = await relayed().catch(() => '')
      if (answer === '') await new Promise(resolve => setTimeout(resolve, 100))
    }
    assert.equal(answer, 'through the reloaded config')
    // Each worker installs the config (its own engine); the primary too. The primary serves
    // its share, so the relay can answer before the worker's probe lines have come through:
    // they are waited for (the worker prepared the config before the switch).
    const files = ['stream/stream-proxy.ts', 'stream/udp-proxy.ts', 'pipeline/inference-pool.ts']
    const workerHas = (file: string): boolean => loaded().some(l => l.thread === 'worker' && l.url.endsWith(`/engine/src/${file}`))
    for (const deadline = Date.now() + 10_000; !files.every(workerHas) && Date.now() < deadline;) await new Promise(resolve => setTimeout(resolve, 50))
    const lines = loaded()
    for (const file of files) {
      assert.ok(lines.some(l => l.thread === 'worker' && l.url.endsWith(`/engine/src/${file}`)), `the workers loaded ${file}`)
    }
    assert.deepEqual(lines.filter(l => /\/engine\/src\/mesh\/(?!ca-defaults)/.test(l.url)).map(l => l.url), [], 'no mesh code')
  } finally {
    stop()
    echo.close()
  }
})

test('a mesh identity from files loads the mesh identity and HBONE code at start (and a proxy without one does not: the plain test above)', async () => {
  const ca = makeTestCa()
  const leaf = ca.issue('gw', 'spiffe://cluster.local/ns/default/sa/gateway')
  const root = join(ca.dir, 'root.pem')
  writeFileSync(root, ca.root)
  const { loaded, stop } = await startProbed(PLAIN, { WORKERS: '1', MESH_CERT_FILE: leaf.certFile, MESH_KEY_FILE: leaf.keyFile, MESH_ROOT_FILE: root })
  try {
    const urls = loaded().map(l => l.url)
    for (const file of ['mesh/identity.ts', 'mesh/hbone-pool.ts']) assert.ok(urls.some(u => u.endsWith(`/engine/src/${file}`)), `${file} loaded`)
  } finally {
    stop()
    rmSync(ca.dir, { recursive: true, force: true })
  }
})

test('with tracing and accessLog.otlp, only the export threads load the OpenTelemetry SDK and its exporters', async () => {
  // Nothing listens at the collector's address: the exports fail, after their modules loaded.
  const collector = 'http://127.0.0.1:9'
  const config = `gateways:\n  default: { port: PORT, protocol: HTTP }\nroutes:\n  - name: plain\n    backends:\n      - host: 127.0.0.1:9\n` +
    `config:\n  tracing: { otlpEndpoint: '${collector}', otlpProtocol: http, randomSampling: true }\n  accessLog:\n    otlp: { otlpEndpoint: '${collector}', otlpProtocol: http }\n`
  const { port, loaded, stop } = await startProbed(config, {})
  try {
    const res = await fetch(`http://127.0.0.1:${port}/`)
    await res.arrayBuffer()
    // Each kind's export thread starts with its first batch (within a second).
    const deadline = Date.now() + 15_000
    const exporters = PACKAGE('@opentelemetry/exporter-(trace|logs)-otlp-proto')
    while (new Set(loaded().filter(l => exporters.test(l.url)).map(l => l.thread)).size < 2 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 100))
    const lines = loaded()
    const sdk = PACKAGE('@opentelemetry/(sdk-[a-z]+|exporter-[a-z-]+|resources|otlp-[a-z-]+)')
    assert.deepEqual(lines.filter(l => l.thread === 'main' && sdk.test(l.url)).map(l => l.url), [], 'the request\'s thread loads none of the SDK')
    assert.ok(lines.some(l => l.thread === 'span-export.ts' && PACKAGE('@opentelemetry/exporter-trace-otlp-proto').test(l.url)), 'the spans\' export thread loaded the trace exporter')
    assert.ok(lines.some(l => l.thread === 'otlp-logs-export.ts' && PACKAGE('@opentelemetry/exporter-logs-otlp-proto').test(l.url)), 'the access log\'s export thread loaded the logs exporter')
  } finally {
    stop()
  }
})

test('a running proxy has loaded every builtin module it holds at ready before bin/portico.ts set its V8 flags, which would have them compiled from their source rather than from the code cache in Node\'s binary', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-builtins-'))
  const out = join(dir, 'builtins.json')
  // Preloaded in the main thread: notes how many modules Node had loaded when the first V8 flag
  // was set (bin/portico.ts takes setFlagsFromString from node:v8's exports, made again here
  // with the counting one), and writes the builtins loaded since when the process exits.
  const probe = 'data:text/javascript,' + encodeURIComponent(`
import { syncBuiltinESMExports } from 'node:module'
import { writeFileSync } from 'node:fs'
import { isMainThread } from 'node:worker_threads'
if (isMainThread) {
  const v8 = process.getBuiltinModule('node:v8')
  const set = v8.setFlagsFromString
  let at = -1
  v8.setFlagsFromString = flags => { if (at === -1) at = process.moduleLoadList.length; return set(flags) }
  syncBuiltinESMExports()
  process.on('exit', () => writeFileSync(${JSON.stringify(out)}, JSON.stringify({ at, after: at === -1 ? [] : process.moduleLoadList.slice(at).filter(m => m.startsWith('NativeModule ')) })))
}
`)
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), PLAIN.replaceAll('PORT', String(port)))
  // The admin server on (its heap sampler needs node:inspector), as it is by default.
  const adminPort = await freePort()
  const child = spawn(process.execPath, [...START_FLAGS, '--import', probe, BIN, '-f', join(dir, 'config.yaml')], {
    cwd: PROXY_DIR,
    env: { ...process.env, LOG_LEVEL: 'info', WORKERS: '1', ADMIN_ADDR: `127.0.0.1:${adminPort}`, STATS_ADDR: 'off', READINESS_ADDR: 'off' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  try {
    await porticoStarted(child)
    const answer = await fetch(`http://127.0.0.1:${port}/`)
    await answer.arrayBuffer()
    child.kill('SIGTERM')
    await new Promise(resolve => child.once('exit', resolve))
    const { at, after } = JSON.parse(readFileSync(out, 'utf8')) as { at: number, after: string[] }
    assert.ok(at > 0, 'bin/portico.ts set its V8 flags')
    assert.deepEqual(after, [], 'builtins loaded after the V8 flags (src/builtins-preload.ts lists what to load before them)')
  } finally {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a running proxy started as `portico -f` loads neither Node\'s TypeScript compiler (compile cache warm) nor Node\'s bundled undici', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-amaro-'))
  const seen = join(dir, 'amaro.txt')
  // Preloaded (execArgv passes on when bin/portico.ts starts Node again with its flags): says,
  // once the proxy runs, whether Node's type-stripping compiler (amaro) was loaded, and its
  // bundled undici (what an ESM import of node:http pulls in: engine/src/util/node-http.ts).
  const probe = 'data:text/javascript,' + encodeURIComponent(`
import { writeFileSync } from 'node:fs'
const loaded = name => process.moduleLoadList.some(m => m.includes(name))
setTimeout(() => writeFileSync(${JSON.stringify(seen)}, JSON.stringify({ amaro: loaded('amaro'), undici: loaded('deps/undici') })), 1500).unref()
`)
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), `gateways:\n  default: { port: ${port}, protocol: HTTP }\nroutes:\n  - backends: [{ host: 127.0.0.1:9 }]\n`)
  // The admin, metrics and readiness servers on, on free ports: they must not load undici either.
  const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', ADMIN_ADDR: '127.0.0.1:0', STATS_ADDR: '127.0.0.1:0', READINESS_ADDR: '127.0.0.1:0', WORKERS: '1', NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined }
  const once = async (): Promise<string> => {
    rmSync(seen, { force: true })
    // None of START_FLAGS: the binary starts Node again, as `pnpm exec portico` does.
    const child = spawn(process.execPath, ['--import', probe, BIN, '-f', join(dir, 'config.yaml')], { cwd: PROXY_DIR, env, stdio: ['ignore', 'pipe', 'pipe'] })
    try {
      const deadline = Date.now() + 15_000
      for (;;) {
        try { return readFileSync(seen, 'utf8') } catch {}
        if (Date.now() > deadline) throw new Error('the probe never wrote')
        await new Promise(resolve => setTimeout(resolve, 50))
      }
    } finally {
      child.kill('SIGTERM')
      await new Promise(resolve => child.once('exit', resolve))
    }
  }
  try {
    await once() // fills the compile cache if this tree's files are not in it yet
    assert.deepEqual(JSON.parse(await once()), { amaro: false, undici: false })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('started as the package\'s `portico` (bin/portico.mjs), neither the first start (before Node starts again with its flags) nor the second loads Node\'s TypeScript compiler (compile cache warm)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-launcher-'))
  const seen = join(dir, 'amaro.txt')
  // Preloaded in both starts (execArgv passes on): the first says whether amaro was loaded as
  // it calls execve, the second as it exits.
  const probe = 'data:text/javascript,' + encodeURIComponent(`
import { appendFileSync } from 'node:fs'
const amaro = () => process.moduleLoadList.some(m => m.includes('amaro'))
const execve = process.execve
process.execve = (...args) => { appendFileSync(${JSON.stringify(seen)}, 'first ' + amaro() + '\\n'); return execve.apply(process, args) }
process.on('exit', () => appendFileSync(${JSON.stringify(seen)}, 'second ' + amaro() + '\\n'))
`)
  const env: Record<string, string | undefined> = { ...process.env, NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined }
  const once = (bin: string): string => {
    rmSync(seen, { force: true })
    const r = spawnSync(process.execPath, ['--import', probe, bin, '--version'], { cwd: PROXY_DIR, env, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /^portico \d/)
    return readFileSync(seen, 'utf8')
  }
  try {
    once(BIN_MJS) // fills the compile cache if this tree's files are not in it yet
    assert.equal(once(BIN_MJS), 'first false\nsecond false\n')
    // Started as bin/portico.ts, the first start strips it (the reason for bin/portico.mjs).
    assert.equal(once(BIN), 'first true\nsecond false\n')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('no module of Portico\'s imports node:http as ESM (it would load Node\'s bundled undici): they take it from engine/src/util/node-http.ts', () => {
  const root = fileURLToPath(new URL('../../', import.meta.url))
  const offenders: string[] = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') walk(path)
      } else if (entry.name.endsWith('.ts') && /^import (?!type )[^\n]*from 'node:http'/m.test(readFileSync(path, 'utf8'))) offenders.push(path.slice(root.length))
    }
  }
  for (const pkg of ['engine', 'proxy', 'controller', 'ops', 'cli']) {
    for (const dir of ['src', 'bin']) {
      try { walk(join(root, pkg, dir)) } catch {}
    }
  }
  assert.deepEqual(offenders, [])
})
