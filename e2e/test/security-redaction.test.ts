/**
 * Issue 14 item 6: secrets never leave through the admin. A config holding a stdio MCP
 * target with secrets in `env` and `args`, an MCP URL with a key in its query, credential
 * headers set by header modifiers under names other than `authorization`, a request header
 * set by a transformation, an `ai` backend's Azure client secret and another's key read from a
 * file (backendAuth), and a request carrying `?access_token=…` — none of the secret
 * strings may appear in /config_dump, a captured trace, porticoctl's output, /debug/tasks,
 * the web UI's API or the process's logs. What a person debugging needs stays: names,
 * non-secret args, the rest of the query.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import type { IncomingHttpHeaders } from 'node:http'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { openTrace } from '@portico/testkit/trace'
import { EVERYTHING_SCRIPT } from '../lib/mcp.ts'
import { ctl } from '@portico/testkit/porticoctl'

/** Every secret in the config or the request; each must stay inside the proxy. */
const SECRETS = {
  env: 'env-secret-4c1d9e',
  argAfterFlag: 'arg-secret-after-flag-77aa',
  argAssigned: 'arg-secret-assigned-88bb',
  argShaped: 'sk-argsecretshaped0123456789abcdef',
  urlQuery: 'url-query-secret-99cc',
  xAuthToken: 'hdr-x-auth-token-1111',
  googKey: 'hdr-goog-api-key-2222',
  privateToken: 'hdr-private-token-3333',
  xApiKey: 'hdr-x-api-key-4444',
  customHeader: 'hdr-custom-name-5555',
  backendLevel: 'hdr-backend-level-6666',
  transformation: 'cel-literal-secret-7777',
  accessToken: 'qs-access-token-8888',
  clientSecret: 'qs-client-secret-9999',
  clientCredential: 'client-sent-token-aaaa',
  azureClientSecret: 'azure-client-secret-bbbb',
  providerKeyFile: 'sk-provider-key-file-cccc'
}

let backend: Backend
let portico: PorticoProcess
let admin: string
let local: string[]
const received: IncomingHttpHeaders[] = []

before(async () => {
  backend = await startBackend((req, res) => {
    received.push(req.headers)
    // The MCP target behind a URL with a key in its query fails: its error names the URL.
    if (req.url?.startsWith('/remote-mcp') === true) res.writeHead(500)
    res.end('ok')
  })
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  local = ['--local', '--admin-addr', `127.0.0.1:${adminPort}`]
  const dir = makeTempDir()
  writeFileSync(join(dir, 'provider.key'), `${SECRETS.providerKeyFile}\n`)
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}`, LOG_LEVEL: 'info,request=debug,mcp=debug' },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        {
          name: 'tools',
          matches: [{ path: { pathPrefix: '/mcp' } }],
          backends: [{
            mcp: {
              targets: [
                {
                  name: 'everything',
                  stdio: {
                    cmd: process.execPath,
                    args: [EVERYTHING_SCRIPT, 'stdio', '--api-key', SECRETS.argAfterFlag, `--token=${SECRETS.argAssigned}`, SECRETS.argShaped],
                    env: { UPSTREAM_SERVICE_CREDENTIAL: SECRETS.env }
                  }
                },
                { name: 'remote', mcp: { host: `http://${backend.host}/remote-mcp?api_key=${SECRETS.urlQuery}&region=eu` } }
              ]
            }
          }]
        },
        {
          name: 'llm-azure',
          matches: [{ path: { pathPrefix: '/llm-azure' } }],
          backends: [{
            ai: { name: 'azure', provider: { azure: { resourceName: 'portico-test' } }, hostOverride: backend.url },
            policies: { backendAuth: { azure: { explicitConfig: { clientSecret: { tenantId: 'tenant-1', clientId: 'client-1', clientSecret: SECRETS.azureClientSecret } }, authorityHost: 'http://127.0.0.1:1' } } }
          }]
        },
        {
          name: 'llm-file',
          matches: [{ path: { pathPrefix: '/llm-file' } }],
          backends: [{ ai: { name: 'file-key', provider: { openAI: {} }, hostOverride: backend.url }, policies: { backendAuth: { key: { file: 'provider.key' } } } }]
        },
        {
          name: 'app',
          policies: {
            requestHeaderModifier: {
              set: { 'x-auth-token': SECRETS.xAuthToken, 'x-goog-api-key': SECRETS.googKey, 'private-token': SECRETS.privateToken, 'x-tenant-binding': SECRETS.customHeader },
              add: { 'x-api-key': SECRETS.xApiKey, 'user-agent': 'portico-test-agent' }
            },
            transformation: { request: { set: { 'x-upstream-sig': `"${SECRETS.transformation}"` } } }
          },
          backends: [{ host: backend.host, policies: { requestHeaderModifier: { set: { 'x-provider-ref': SECRETS.backendLevel } } } }]
        }
      ]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

function assertNoSecrets (text: string, where: string): void {
  for (const [what, secret] of Object.entries(SECRETS)) {
    assert.ok(!text.includes(secret), `${where} shows the ${what} secret (${secret})`)
  }
}

async function adminText (path: string): Promise<string> {
  const res = await request(`${admin}${path}`)
  assert.equal(res.statusCode, 200, path)
  return await res.body.text()
}

const requestPath = `/app/items?page=2&access_token=${SECRETS.accessToken}&client_secret=${SECRETS.clientSecret}`

test('the gateway still sends every configured header (redaction is only of what is shown)', async () => {
  const res = await request(`${portico.url}${requestPath}`, { headers: { 'x-auth-token': SECRETS.clientCredential } })
  assert.equal(res.statusCode, 200)
  await res.body.text()
  const got = received.at(-1)!
  assert.equal(got['x-auth-token'], SECRETS.xAuthToken)
  assert.equal(got['x-goog-api-key'], SECRETS.googKey)
  assert.equal(got['private-token'], SECRETS.privateToken)
  assert.equal(got['x-api-key'], SECRETS.xApiKey)
  assert.equal(got['x-tenant-binding'], SECRETS.customHeader)
  assert.equal(got['x-provider-ref'], SECRETS.backendLevel)
  assert.equal(got['x-upstream-sig'], SECRETS.transformation)
})

test('/config_dump shows names and non-secret args, never env values, secret args or credential header values', async () => {
  const text = await adminText('/config_dump')
  assertNoSecrets(text, '/config_dump')
  const dump = JSON.parse(text)
  const mcp = dump.backends.find((b: { kind: string }) => b.kind === 'mcp').mcp
  const stdio = mcp.targets.find((t: { name: string }) => t.name === 'everything')
  assert.deepEqual(stdio.env, { UPSTREAM_SERVICE_CREDENTIAL: '<redacted>' }, 'env names stay, values go')
  assert.deepEqual(stdio.args, [EVERYTHING_SCRIPT, 'stdio', '--api-key', '<redacted>', '--token=<redacted>', '<redacted>'])
  const remote = mcp.targets.find((t: { name: string }) => t.name === 'remote')
  assert.match(remote.url, /api_key=<redacted>&region=eu/)
  const app = dump.policies.find((p: { target: string }) => p.target === 'route/app').policies
  assert.deepEqual(app.requestHeaderModifier, {
    set: { 'x-auth-token': '<redacted>', 'x-goog-api-key': '<redacted>', 'private-token': '<redacted>', 'x-tenant-binding': '<redacted>' },
    add: { 'x-api-key': '<redacted>', 'user-agent': 'portico-test-agent' }
  })
  assert.deepEqual(app.transformation.request.set, { 'x-upstream-sig': '"<redacted>"' }, 'a CEL literal')
  // backendAuth: the Azure client secret in the backend (its ids shown), the key read from a file in the header policy.
  const azure = dump.backends.find((b: { name: string }) => b.name === 'azure')
  assert.deepEqual(azure.ai.azure.auth, { kind: 'clientSecret', tenantId: 'tenant-1', clientId: 'client-1', clientSecret: '<redacted>', authorityHost: 'http://127.0.0.1:1' })
  const fileKey = dump.policies.find((p: { target: string, policies: Record<string, unknown> }) => p.target.includes('llm-file') && p.policies.requestHeaderModifier !== undefined)
  assert.equal(fileKey?.policies.requestHeaderModifier.set.authorization, '<redacted>', JSON.stringify(dump.policies))
})

test('a trace shows which headers policies set and the query, never their secret values', async () => {
  const trace = await openTrace(admin, 'path=/app/*')
  await trace.ready
  const res = await request(`${portico.url}${requestPath}`, { headers: { 'x-auth-token': SECRETS.clientCredential, 'x-client': 'visible' } })
  await res.body.text()
  const events = await trace.done
  const text = JSON.stringify(events)
  assertNoSecrets(text, 'the trace')
  const snapshot = (stage: string) => (events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === stage)!.message.requestState as { request: { uri: string, pathAndQuery: string, headers: Record<string, string> } }).request
  const initial = snapshot('initial request')
  assert.match(initial.pathAndQuery, /page=2&access_token=<redacted>&client_secret=<redacted>/)
  assert.equal(initial.headers['x-auth-token'], '<redacted>', 'a client credential header')
  assert.equal(initial.headers['x-client'], 'visible')
  const final = snapshot('final request')
  assert.match(final.uri, /\/app\/items\?page=2&access_token=<redacted>/)
  for (const name of ['x-auth-token', 'x-goog-api-key', 'private-token', 'x-api-key', 'x-tenant-binding', 'x-provider-ref', 'x-upstream-sig']) {
    assert.equal(final.headers[name], '<redacted>', `${name} is there, its value is not`)
  }
  assert.equal(final.headers['x-client'], 'visible', 'what the client sent (non-credential) stays')
  assert.equal(final.headers['x-forwarded-proto'], 'http', 'public headers the gateway sets stay')
})

test('an MCP target whose URL holds a key fails: the error the client, the trace and the log get names the URL without it', async () => {
  const trace = await openTrace(admin, 'path=/mcp')
  await trace.ready
  const res = await request(`${portico.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })
  })
  const answer = await res.body.text()
  const events = await trace.done
  assert.match(answer + JSON.stringify(events) + portico.stdout, /remote-mcp\?api_key=<redacted>&region=eu/, 'the failing URL is named somewhere')
  assertNoSecrets(answer, 'the MCP answer')
  assertNoSecrets(JSON.stringify(events), 'the MCP trace')
})

test('porticoctl (config and an injected trace), /debug/tasks and the UI API show no secret', async () => {
  const config = await ctl(['proxy', 'config', 'all', ...local, '-o', 'json'])
  assert.equal(config.code, 0, config.stderr)
  assertNoSecrets(config.stdout, 'porticoctl proxy config')
  const traced = await ctl(['proxy', 'trace', ...local, '--raw', '--port', String(portico.port), '--', `http://example.test${requestPath}`])
  assert.equal(traced.code, 0, traced.stderr)
  assert.match(traced.stdout, /requestFinished/)
  assertNoSecrets(traced.stdout + traced.stderr, 'porticoctl proxy trace --raw')
  const pretty = await ctl(['proxy', 'trace', ...local, '--port', String(portico.port), '--', `http://example.test${requestPath}`])
  assert.equal(pretty.code, 0, pretty.stderr)
  assertNoSecrets(pretty.stdout + pretty.stderr, 'porticoctl proxy trace')
  assertNoSecrets(await adminText('/debug/tasks'), '/debug/tasks')
  assertNoSecrets(await adminText('/api/overview'), '/api/overview')
})

test('the access log and every other log line show no secret', () => {
  assert.match(portico.stdout, /"path":"\/app\/items"/, 'the access log has the request')
  assertNoSecrets(portico.stdout + portico.stderr, 'the logs')
})
