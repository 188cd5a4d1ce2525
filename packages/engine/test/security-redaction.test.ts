/**
 * The rules of ir/redact.ts, one by one (the e2e test security-redaction.test.ts checks that
 * every view of a real process goes through them).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { isCredentialName, isPublicHeader, setPublicHeaders, redactArgs, redactCelLiterals, redactHeaderValues, redactQuery, redactSecrets, redactUrl } from '../src/ir/redact.ts'

const R = '<redacted>'

test('credential-like names: headers, query parameters and flags', () => {
  for (const name of ['authorization', 'x-auth-token', 'x-goog-api-key', 'private-token', 'x-api-key', 'api-key', 'apikey', 'X-Vault-Token', 'x-amz-security-token', 'cookie', 'set-cookie', 'access_token', 'accessToken', 'client_secret', 'id_token', 'refresh_token', 'password', 'key', 'sig', 'signature', 'secret', 'GITHUB_PERSONAL_ACCESS_TOKEN', 'x-xsrftoken']) {
    assert.ok(isCredentialName(name), name)
  }
  for (const name of ['content-type', 'x-request-id', 'user-agent', 'keep-alive', 'x-route', 'page', 'region', 'authority', 'x-tenant', 'mcp-session-id']) {
    assert.ok(!isCredentialName(name), name)
  }
  assert.ok(isPublicHeader('Content-Type') && isPublicHeader('x-forwarded-proto') && isPublicHeader('traceparent'))
  assert.ok(!isPublicHeader('x-tenant') && !isPublicHeader('authorization'))
})

test('query parameters named like credentials lose their values, the rest stays as sent', () => {
  assert.equal(redactQuery('page=2&access_token=abc&client_secret=s%20x&code=xyz&q=a+b'), `page=2&access_token=${R}&client_secret=${R}&code=${R}&q=a+b`)
  assert.equal(redactQuery('api%5Fkey=1&flag&x=1'), `api%5Fkey=${R}&flag&x=1`)
  assert.equal(redactQuery('a=1&b=2'), 'a=1&b=2')
  assert.equal(redactUrl('/p?token=t#frag'), `/p?token=${R}#frag`)
  assert.equal(redactUrl('https://user:hunter2@example.com/x?sig=abc&v=1'), `https://user:${R}@example.com/x?sig=${R}&v=1`)
  assert.equal(redactUrl('http://example.com/plain'), 'http://example.com/plain')
})

test('stdio args: values of secret flags, secret assignments and credential-shaped args go; the command line stays readable', () => {
  assert.deepEqual(redactArgs([
    '-y', '@modelcontextprotocol/server-github', '--api-key', 'k1', '--token=t1', 'API_KEY=v1', '--verbose', '--port', '8080',
    'sk-proj-abcdefghijklmnop', 'ghp_abcdefghijklmnopqrstuvwxyz', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig', '0123456789abcdef0123456789abcdef',
    '/usr/lib/node_modules/server/dist/index.js', 'https://u:p@host/x?key=1', '--password', '--next'
  ]), [
    '-y', '@modelcontextprotocol/server-github', '--api-key', R, `--token=${R}`, `API_KEY=${R}`, '--verbose', '--port', '8080',
    R, R, R, R,
    '/usr/lib/node_modules/server/dist/index.js', `https://u:${R}@host/x?key=${R}`, '--password', '--next'
  ])
})

test('redactSecrets: env of a process, request header values policies set, URLs; route matches and response headers stay', () => {
  const ir = {
    env: { podName: 'p-1' },
    targets: [{ name: 't', kind: 'stdio', cmd: 'node', args: ['server.js', '--token', 'abc'], env: { ANY: 'v', OTHER: 'w' } }],
    policies: {
      requestHeaderModifier: { set: { 'x-tenant': 'secret-ish', 'content-type': 'application/json', authorization: 'Bearer k' }, add: { 'user-agent': 'ua' }, remove: ['x-drop'] },
      responseHeaderModifier: { set: { 'x-served-by': 'gw', 'set-cookie': 'sid=1' } },
      transformation: { request: { set: { 'x-key-ref': '"k"' } }, response: { set: { 'x-shown': '"v"' } } },
      directResponse: { status: 200, headers: { 'x-hello': 'world' } }
    },
    matches: [{ headers: [{ name: 'x-env', value: 'prod', type: 'Exact' }] }],
    url: 'https://mcp.example/sse?api_key=abc&region=eu'
  }
  assert.deepEqual(redactSecrets(ir), {
    env: { podName: 'p-1' },
    targets: [{ name: 't', kind: 'stdio', cmd: 'node', args: ['server.js', '--token', R], env: { ANY: R, OTHER: R } }],
    policies: {
      requestHeaderModifier: { set: { 'x-tenant': R, 'content-type': 'application/json', authorization: R }, add: { 'user-agent': 'ua' }, remove: ['x-drop'] },
      responseHeaderModifier: { set: { 'x-served-by': 'gw', 'set-cookie': R } },
      transformation: { request: { set: { 'x-key-ref': `"${R}"` } }, response: { set: { 'x-shown': '"v"' } } },
      directResponse: { status: 200, headers: { 'x-hello': 'world' } }
    },
    matches: [{ headers: [{ name: 'x-env', value: 'prod', type: 'Exact' }] }],
    url: `https://mcp.example/sse?api_key=${R}&region=eu`
  })
})

test('trace header values: credentials always; with the client\'s headers, whatever the gateway set unless public', () => {
  const client = { 'x-client': 'c', 'x-auth-token': 't' }
  const after = { 'x-client': 'c', 'x-auth-token': 't', 'x-added': 'secret', 'x-forwarded-for': '127.0.0.1', 'content-type': 'text/plain' }
  assert.deepEqual(redactHeaderValues(after, client), { 'x-client': 'c', 'x-auth-token': R, 'x-added': R, 'x-forwarded-for': '127.0.0.1', 'content-type': 'text/plain' })
  // Response headers: every client gets them, so only credentials and URL credentials go.
  assert.deepEqual(redactHeaderValues({ 'x-added': 'v', 'set-cookie': 'c', location: '/cb?code=1&state=s' }), { 'x-added': 'v', 'set-cookie': R, location: `/cb?code=${R}&state=s` })
})

test('CEL expressions a transformation sets on requests: literals go, indexes, variables and functions stay', () => {
  assert.equal(redactCelLiterals('"Bearer sk-123"'), `"${R}"`)
  assert.equal(redactCelLiterals('"Bearer " + request.headers["x-user"]'), `"${R}" + request.headers["x-user"]`)
  assert.equal(redactCelLiterals(`jwt[ 'sub' ] + r'raw\\' + b"bytes" + '''tri"ple'''`), `jwt[ 'sub' ] + r'${R}' + b"${R}" + '''${R}'''`)
  assert.equal(redactCelLiterals('"a\\"b" + "" + size(x) == 3'), `"${R}" + "" + size(x) == 3`)
  assert.equal(redactCelLiterals('request.headers["nope"]'), 'request.headers["nope"]')
})

test('headers the operator marks non-secret (config.publicHeaders) show their values; credential-like names never do', () => {
  const policies = { requestHeaderModifier: { set: { 'x-route': 'app', 'x-tenant': 'acme', 'x-api-key': 'k-123' } } }
  try {
    setPublicHeaders(['X-Route', 'x-api-key'])
    assert.deepEqual(redactSecrets(policies).requestHeaderModifier.set, { 'x-route': 'app', 'x-tenant': R, 'x-api-key': R })
    assert.ok(isPublicHeader('x-route') && !isPublicHeader('x-api-key'))
  } finally {
    setPublicHeaders([])
  }
  assert.deepEqual(redactSecrets(policies).requestHeaderModifier.set, { 'x-route': R, 'x-tenant': R, 'x-api-key': R })
})
