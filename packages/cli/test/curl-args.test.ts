import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isCliError } from '../src/errors.ts'
import { parseCurlArgs } from '../src/trace/curl-args.ts'
import { requestHeaders } from '../src/trace/send.ts'

function badArgs (args: string[], pattern: RegExp): void {
  assert.throws(() => parseCurlArgs(args), (err: unknown) => {
    assert.ok(isCliError(err, 'PORTICOCTL_BAD_CURL_ARGS'), String(err))
    assert.match(err.message, pattern)
    return true
  })
}

test('a bare URL: GET, no body, the URL kept for the Host header and path', () => {
  const r = parseCurlArgs(['http://example.test/path?q=1'])
  assert.equal(r.method, 'GET')
  assert.equal(r.url.host, 'example.test')
  assert.equal(r.url.pathname + r.url.search, '/path?q=1')
  assert.equal(r.body, null)
  assert.deepEqual(r.headers, [])
  assert.equal(r.insecure, false)
  assert.equal(r.verbose, false)
})

test('a URL without a scheme is http://; the port stays in the Host', () => {
  const r = parseCurlArgs(['example.test:8080/x'])
  assert.equal(r.url.protocol, 'http:')
  assert.equal(r.url.host, 'example.test:8080')
})

test('-X, -H (repeatable, attached or not), -k and -v, in any order around the URL', () => {
  const r = parseCurlArgs(['-XPUT', 'https://api.example.test/v1', '-H', 'X-One: 1', '--header=x-two:  2 ', '-kv'])
  assert.equal(r.method, 'PUT')
  assert.deepEqual(r.headers, [['X-One', '1'], ['x-two', '2']])
  assert.equal(r.insecure, true)
  assert.equal(r.verbose, true)
  assert.equal(r.url.protocol, 'https:')
})

test('-d makes a form POST; several -d are joined with &', () => {
  const r = parseCurlArgs(['http://h/', '-d', 'a=1', '--data', 'b=2'])
  assert.equal(r.method, 'POST')
  assert.equal(r.body?.toString(), 'a=1&b=2')
  assert.deepEqual(r.headers, [['Content-Type', 'application/x-www-form-urlencoded']])
})

test('-X wins over the implied POST; a given Content-Type is kept', () => {
  const r = parseCurlArgs(['http://h/', '-X', 'patch', '-H', 'content-type: text/plain', '--data-raw', '@not-a-file'])
  assert.equal(r.method, 'PATCH')
  assert.equal(r.body?.toString(), '@not-a-file')
  assert.deepEqual(r.headers, [['content-type', 'text/plain']])
})

test('@file: -d strips newlines, --data-binary keeps every byte, --json sets JSON headers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'porticoctl-curl-'))
  try {
    const file = join(dir, 'body.txt')
    writeFileSync(file, 'line1\r\nline2\n')
    assert.equal(parseCurlArgs(['http://h/', '-d', `@${file}`]).body?.toString(), 'line1line2')
    assert.equal(parseCurlArgs(['http://h/', '--data-binary', `@${file}`]).body?.toString(), 'line1\r\nline2\n')
    const json = parseCurlArgs(['http://h/', '--json', '{"a":1}'])
    assert.equal(json.method, 'POST')
    assert.deepEqual(json.headers, [['Content-Type', 'application/json'], ['Accept', 'application/json']])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('-H "Name:" removes a default header; the Host header can be overridden', () => {
  const r = parseCurlArgs(['http://example.test/', '-H', 'User-Agent:', '-H', 'Host: other.test'])
  const sent = requestHeaders(r, ['x-porticoctl-trace', 'id'])
  assert.deepEqual(sent, [['Accept', '*/*'], ['Host', 'other.test'], ['x-porticoctl-trace', 'id']])
  const plain = requestHeaders(parseCurlArgs(['http://example.test:8080/']), ['x-porticoctl-trace', 'id'])
  assert.deepEqual(plain.map(([n]) => n), ['Host', 'User-Agent', 'Accept', 'x-porticoctl-trace'])
  assert.equal(plain[0]![1], 'example.test:8080')
})

test('-s and -S are accepted and do nothing', () => {
  assert.equal(parseCurlArgs(['-sS', 'http://h/', '--silent']).method, 'GET')
})

test('bad curl arguments are usage errors that say what is wrong', () => {
  badArgs(['http://h/', '-Z'], /unknown option -Z .*supported: -X\/--request/)
  badArgs(['http://h/', '--compressed'], /unknown option --compressed/)
  badArgs(['http://h/', '-kZ'], /unknown option -Z \(in -kZ\)/)
  badArgs(['http://h/', '-H'], /-H needs a value/)
  badArgs(['http://h/', '-H', 'no-colon'], /-H "no-colon": use "Name: value"/)
  badArgs(['http://h/', '-X', 'GE T'], /not an HTTP method/)
  badArgs(['http://h/', '--data-binary', '@/nonexistent/missing-file'], /--data-binary @\/nonexistent\/missing-file: cannot read .*ENOENT/)
  badArgs(['http://a/', 'http://b/'], /more than one URL/)
  badArgs(['-v'], /no URL/)
  badArgs(['ftp://h/'], /only http:\/\/ and https:\/\//)
  badArgs(['http://h/', '--insecure=yes'], /--insecure takes no value/)
})
