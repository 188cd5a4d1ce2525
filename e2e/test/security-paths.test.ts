/**
 * Path normalisation as an attacker tries it: a `pathPrefix: /admin` route behind basicAuth
 * and a catch-all route to the same backend. The backend reads paths the way common servers
 * do (percent-decodes once, `%2F`/`%5C`/`\` as `/`, resolves `.`/`..`, merges slashes) and
 * serves the secret for anything that lands under /admin. No encoded, dot-segment,
 * slash or absolute-form variant may reach the secret without credentials, and what the
 * gateway forwards is the path it matched.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import { freePort, makeTempDir, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { rawExchange } from '@portico/testkit/client'
import { openTrace } from '@portico/testkit/trace'

const SECRET = 'TOP-SECRET-ADMIN-FILE'
const CREDENTIALS = Buffer.from('admin:s3cret').toString('base64')

/** How a lenient backend resolves a request target to a file path. */
function backendView (url: string): string {
  let path = url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '').split('?')[0]!
  try {
    path = decodeURIComponent(path)
  } catch {
    // left as is
  }
  return posix.normalize(path.replaceAll('\\', '/'))
}

function underAdmin (path: string): boolean {
  return path === '/admin' || path.startsWith('/admin/')
}

let backend: Backend
let portico: PorticoProcess
let admin: string
/** Request targets the backend received, with whether they carried credentials. */
const received: Array<{ url: string, authorized: boolean, host: string | undefined }> = []

before(async () => {
  backend = await startBackend((req, res) => {
    const url = req.url ?? ''
    received.push({ url, authorized: req.headers['x-route'] === 'admin', host: req.headers.host })
    const body = underAdmin(backendView(url)) ? SECRET : `public ${url}`
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) })
    res.end(body)
  })
  const dir = makeTempDir()
  writeFileSync(join(dir, 'users.htpasswd'), `admin:{SHA}${createHash('sha1').update('s3cret').digest('base64')}\n`)
  const routes = (gateways: string[]) => [
    {
      name: 'admin',
      gateways,
      matches: [{ path: { pathPrefix: '/admin' } }],
      policies: { basicAuth: { htpasswd: { file: 'users.htpasswd' } }, requestHeaderModifier: { set: { 'x-route': 'admin' } } },
      backends: [{ host: backend.host }]
    },
    { name: 'public', gateways, backends: [{ host: backend.host }] }
  ]
  const adminPort = await freePort()
  admin = `http://127.0.0.1:${adminPort}`
  portico = await startPortico({
    dir,
    env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` },
    config: port => ({
      gateways: {
        default: { port, address: '127.0.0.1' },
        forward: { port, address: '127.0.0.1', hostname: 'forward.test', path: { escapedSlashesAction: 'UnescapeAndForward' } },
        reject: { port, address: '127.0.0.1', hostname: 'reject.test', path: { escapedSlashesAction: 'RejectRequest' } },
        keep: { port, address: '127.0.0.1', hostname: 'keep.test', path: { escapedSlashesAction: 'KeepUnchanged', disableMergeSlashes: true } }
      },
      routes: routes(['default', 'forward', 'reject', 'keep'])
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

interface Answer { status: number, headers: Record<string, string>, body: string }

/** Sends one request with the target exactly as given (no client-side URL parsing). */
async function send (target: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  const lines = [`${method} ${target} HTTP/1.1`, ...Object.entries({ host: 'gw.test', connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}`)]
  const text = await rawExchange(portico.port, lines.join('\r\n') + '\r\n\r\n')
  const [head = '', ...rest] = text.split('\r\n\r\n')
  const [statusLine = '', ...headerLines] = head.split('\r\n')
  const out: Record<string, string> = {}
  for (const l of headerLines) {
    const i = l.indexOf(':')
    out[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim()
  }
  return { status: Number(statusLine.split(' ')[1]), headers: out, body: rest.join('\r\n\r\n') }
}

/** Variants of /admin/secret.txt: each must end at the admin route (401) or be refused/redirected. */
const VARIANTS = [
  '/admin/secret.txt',
  '/x/../admin/secret.txt',
  '/public/../admin/secret.txt',
  '/a/b/../../admin/secret.txt',
  '/public/./../admin/secret.txt',
  '/public/..//admin/secret.txt',
  '/./admin/secret.txt',
  '/admin/./secret.txt',
  '/%2e/admin/secret.txt',
  '/%2e%2e/admin/secret.txt',
  '/public/%2e%2e/admin/secret.txt',
  '/public/%2E%2E/admin/secret.txt',
  '/public/.%2e/admin/secret.txt',
  '/public/%2e./admin/secret.txt',
  '/public/%2e%2e/%61%64%6d%69%6e/secret.txt',
  '/%61dmin/secret.txt',
  '/%61%64min/secret.txt',
  '/adm%69n/secret.txt',
  '/admin/secret%2etxt',
  '//admin/secret.txt',
  '///admin/secret.txt',
  '//admin//secret.txt',
  '/admin%2fsecret.txt',
  '/admin%2Fsecret.txt',
  '/%2fadmin/secret.txt',
  '/%2Fadmin/secret.txt',
  '/%5cadmin/secret.txt',
  '/public/..%2fadmin/secret.txt',
  '/public/%2e%2e%2fadmin/secret.txt',
  '/public%5c..%5cadmin%5csecret.txt',
  '/public/%2e%2e%5cadmin/secret.txt',
  '/public/%2e%2e/admin%2fsecret.txt',
  '/public\\..\\admin\\secret.txt',
  '\\admin\\secret.txt',
  'http://gw.test/admin/secret.txt',
  'HTTP://gw.test/public/../admin/secret.txt',
  'http://other.test/%61dmin/secret.txt',
  'https://gw.test//admin/secret.txt',
  '/public/%252e%252e/admin/secret.txt',
  '/admin/secret.txt#frag',
  '/public/%2e%2e/admin/secret.txt?x=1',
  '/public/%zz/../admin/secret.txt'
]

test('no encoded, dot-segment, slash or absolute-form variant reaches /admin without credentials', async () => {
  assert.ok(VARIANTS.length >= 30)
  const leaks: string[] = []
  for (const target of VARIANTS) {
    const before = received.length
    const answer = await send(target)
    if (answer.body.includes(SECRET)) leaks.push(`${target} → ${answer.status} secret`)
    for (const r of received.slice(before)) {
      if (underAdmin(backendView(r.url)) && !r.authorized) leaks.push(`${target} → backend got ${r.url} without auth`)
    }
    // Every answer is the auth refusal, a redirect to the clean path, a 400, or (for a
    // target that really is outside /admin, like a double-encoded one) the public file.
    assert.ok([401, 307, 400, 200].includes(answer.status), `${target} → ${answer.status} ${answer.body}`)
    if (answer.status === 307) {
      const location = answer.headers.location!
      assert.equal(location, encodeURI(decodeURI(location)), `${target}: redirect to a normalised path`)
      assert.doesNotMatch(location, /%2f|%5c|\/\.\.?\/|\/\//i, `${target} → ${location}`)
      const followed = await send(location)
      assert.equal(followed.status, 401, `${target} → ${location} → ${followed.status}`)
    }
  }
  assert.deepEqual(leaks, [])
})

test('the backend gets the normalised path the route matched, in origin-form', async () => {
  const auth = { authorization: `Basic ${CREDENTIALS}` }
  const cases: Array<[string, string]> = [
    ['/public/../admin/secret.txt', '/admin/secret.txt'],
    ['/%61dmin//./secret.txt?q=%2F..', '/admin/secret.txt?q=%2F..'],
    ['http://gw.test/x/%2e%2e/admin/secret.txt', '/admin/secret.txt'],
    ['/public/%7e/a%20b/%c3%a9', '/public/~/a%20b/%C3%A9'],
    ['/public/a"b<c>', '/public/a%22b%3Cc%3E']
  ]
  for (const [target, forwarded] of cases) {
    const before = received.length
    const answer = await send(target, auth)
    assert.equal(answer.status, 200, `${target}: ${answer.status} ${answer.body}`)
    assert.deepEqual(received.slice(before).map(r => r.url), [forwarded], target)
  }
})

test('an absolute-form target is routed on its own authority, which replaces Host', async () => {
  const before = received.length
  const answer = await send('http://forward.test/public/x', { host: 'gw.test' })
  assert.equal(answer.status, 200)
  assert.deepEqual(received.slice(before).map(r => [r.url, r.host]), [['/public/x', 'forward.test']])
  assert.equal((await send('ftp://gw.test/public/x')).status, 400)
  assert.equal((await send('http://user:pw@gw.test/public/x')).status, 400)
  assert.equal((await send('*', {}, 'OPTIONS')).status, 400)
})

test('escapedSlashesAction per gateway: forward, reject, keep (documented as unsafe)', async () => {
  assert.equal((await send('/admin%2fsecret.txt', { host: 'forward.test' })).status, 401)
  assert.equal((await send('/public%5cx', { host: 'reject.test' })).status, 400)
  assert.equal((await send('/public/x', { host: 'reject.test' })).status, 200)
  const before = received.length
  const kept = await send('/public%2Fa//b', { host: 'keep.test' })
  assert.equal(kept.status, 200)
  assert.deepEqual(received.slice(before).map(r => r.url), ['/public%2Fa//b'])
})

test('Host: more than one, or outside RFC 9110 grammar, is a 400', async () => {
  const twoHosts = await rawExchange(portico.port, 'GET /public/x HTTP/1.1\r\nHost: gw.test\r\nHost: other.test\r\nConnection: close\r\n\r\n')
  assert.match(twoHosts, /^HTTP\/1\.1 400 /)
  for (const host of ['gw.test/admin', 'a@gw.test', 'gw.test:80:80', 'gw test', 'gw.test\\x', '[::1']) {
    const answer = await send('/public/x', { host })
    assert.equal(answer.status, 400, `Host: ${host} → ${answer.status}`)
  }
  for (const host of ['gw.test', 'gw.test:8080', '127.0.0.1', '[::1]:80', 'GW.Test.']) {
    assert.equal((await send('/public/x', { host })).status, 200, `Host: ${host}`)
  }
})

test('the trace keeps the raw target in its initial snapshot and shows the normalised path after', async () => {
  const trace = await openTrace(admin)
  await trace.ready
  assert.equal((await send('/public/%2e%2e/public//x?a=1')).status, 200)
  const events = await trace.done
  const snapshot = (stage: string) => (events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === stage)!.message as unknown as { requestState: { request: { path: string, pathAndQuery: string } } })
  const initial = snapshot('initial request')
  const later = snapshot('gateway policies')
  assert.equal(initial.requestState.request.path, '/public/%2e%2e/public//x')
  assert.equal(initial.requestState.request.pathAndQuery, '/public/%2e%2e/public//x?a=1')
  assert.equal(later.requestState.request.path, '/public/x')
  assert.equal(later.requestState.request.pathAndQuery, '/public/x?a=1')
})
