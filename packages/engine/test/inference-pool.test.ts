/**
 * InferencePool pieces that need no sockets: the endpoints a config names and a picker
 * answers (ip:port, the ordered fallback list, refusal of anything outside the pool), the
 * bounds on a picker's header mutation, and the `inferencePool` backend at load (its IR and
 * what is refused with a path).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { endpointList, MAX_ENDPOINT_LIST_BYTES, parseEndpoint, rotation } from '../src/inference/endpoints.ts'
import { checkMutation, MAX_MUTATION_BYTES, MAX_MUTATION_ENTRIES } from '../src/inference/pick.ts'
import { applyHeaderMutations } from '../src/auth/ext-authz-check.ts'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'

test('parseEndpoint: IPv4 and bracketed IPv6 with a port; bare IPs take the target ports; names are refused', () => {
  assert.deepEqual(parseEndpoint('10.0.0.1:8000'), [{ host: '10.0.0.1', port: 8000 }])
  assert.deepEqual(parseEndpoint(' [fd00::1]:9000 '), [{ host: 'fd00::1', port: 9000 }])
  assert.deepEqual(parseEndpoint('10.0.0.1', [8000, 8001]), [{ host: '10.0.0.1', port: 8000 }, { host: '10.0.0.1', port: 8001 }])
  assert.deepEqual(parseEndpoint('fd00::1', [80]), [{ host: 'fd00::1', port: 80 }])
  for (const bad of ['10.0.0.1', 'pod-a:8000', 'localhost:80', '10.0.0.1:0', '10.0.0.1:65536', '10.0.0.1:80x', '[fd00::1]x', '[nope]:80', '10.0.0.256:80', '']) {
    assert.equal(parseEndpoint(bad), null, bad)
  }
})

const POOL = new Set(['10.0.0.1:8000', '10.0.0.2:8000', '[fd00::3]:8000'])

test('endpointList: an ordered fallback list of the pool\'s endpoints; duplicates once', () => {
  assert.deepEqual(endpointList('10.0.0.2:8000', POOL), { ok: true, endpoints: ['10.0.0.2:8000'], refused: [] })
  assert.deepEqual(endpointList('10.0.0.2:8000, 10.0.0.1:8000,[fd00::3]:8000,10.0.0.2:8000', POOL), { ok: true, endpoints: ['10.0.0.2:8000', '10.0.0.1:8000', '[fd00::3]:8000'], refused: [] })
})

test('endpointList: endpoints outside the pool are refused, never in the list', () => {
  assert.deepEqual(endpointList('192.168.1.9:8000,10.0.0.1:8000', POOL), { ok: true, endpoints: ['10.0.0.1:8000'], refused: ['192.168.1.9:8000'] })
  // Another port of a pod of the pool is another endpoint: not of the pool.
  assert.deepEqual(endpointList('10.0.0.1:22,10.0.0.2:8000', POOL), { ok: true, endpoints: ['10.0.0.2:8000'], refused: ['10.0.0.1:22'] })
  const none = endpointList('192.168.1.9:8000,evil.example:80', POOL)
  assert.equal(none.ok, false)
  assert.match(!none.ok ? none.reason : '', /no endpoint of the pool in the list \(refused: 192\.168\.1\.9:8000, evil\.example:80\)/)
})

test('endpointList: empty, huge, too many entries and control characters are refused cleanly', () => {
  assert.equal(endpointList(' , ', POOL).ok, false)
  const huge = endpointList('10.0.0.1:8000,'.repeat(MAX_ENDPOINT_LIST_BYTES), POOL)
  assert.equal(huge.ok, false)
  assert.match(!huge.ok ? huge.reason : '', /longer than 2048 bytes/)
  const many = endpointList(Array.from({ length: 40 }, () => '10.0.0.1:8000').join(','), POOL)
  assert.match(!many.ok ? many.reason : '', /more than 32 endpoints/)
  const ctl = endpointList('10.0.0.1:8000\u0000,10.0.0.2:8000', POOL)
  assert.deepEqual(ctl, { ok: true, endpoints: ['10.0.0.2:8000'], refused: ['10.0.0.1:8000\\u0000'] })
})

test('rotation: the pool round robin from a start, wrapping', () => {
  assert.deepEqual(rotation(['a', 'b', 'c'], 1), ['b', 'c', 'a'])
  assert.deepEqual(rotation(['a'], 5), ['a'])
})

const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) } })

test('checkMutation: the destination header taken out; huge or malformed mutations refused whole', () => {
  const ok = checkMutation({ set_headers: [set('x-gateway-destination-endpoint', '10.0.0.1:8000'), set('x-model', 'm')], remove_headers: ['X-Drop'] })
  assert.deepEqual(ok, { set: [{ name: 'x-model', value: 'm', action: 'overwrite' }], remove: ['x-drop'], destination: '10.0.0.1:8000' })
  // Framing headers are the gateway's: dropped from a mutation, not applied.
  assert.deepEqual(checkMutation({ set_headers: [set('content-length', '1'), set('Transfer-Encoding', 'chunked'), set(':path', '/x'), set('x-ok', '1')], remove_headers: ['host', 'x-gone'] }), { set: [{ name: 'x-ok', value: '1', action: 'overwrite' }], remove: ['x-gone'], destination: null })
  assert.match(checkMutation({ set_headers: Array.from({ length: MAX_MUTATION_ENTRIES + 1 }, (_, i) => set(`h${i}`, 'v')) }) as string, /more than 64 entries/)
  assert.match(checkMutation({ set_headers: [set('x-big', 'v'.repeat(MAX_MUTATION_BYTES))] }) as string, /larger than 32768 bytes/)
  assert.match(checkMutation({ set_headers: [set('x-gateway-destination-endpoint', '10.0.0.1:8000\r\nx-evil: 1')] }) as string, /malformed header mutation/)
  assert.match(checkMutation({ set_headers: [set('bad name', 'v')] }) as string, /malformed header mutation/)
  assert.match(checkMutation({ remove_headers: ['bad\nname'] }) as string, /malformed header mutation/)
})

test('checkMutation: a picker handing the response headers back (lwepp does, with neither append nor append_action) replaces them, as Envoy\'s ext_proc does; append: true appends', () => {
  // The official conformance suite reads the echo server's JSON only when content-type is
  // exactly application/json: doubled values (`application/json,application/json`) failed it.
  const headers: Record<string, string | string[] | undefined> = { 'content-type': 'application/json', date: 'Sat, 05 Dec 2026 14:29:06 GMT', vary: 'accept' }
  const checked = checkMutation({
    set_headers: [set('x-conformance-test-served-endpoint', '10.0.0.1:3000'), set('content-type', 'application/json'), set('date', 'Sat, 05 Dec 2026 14:29:06 GMT'),
      { header: { key: 'vary', raw_value: Buffer.from('origin') }, append: { value: true } }]
  })
  assert.ok(typeof checked !== 'string')
  applyHeaderMutations(headers, checked.set)
  assert.deepEqual(headers, { 'content-type': 'application/json', date: 'Sat, 05 Dec 2026 14:29:06 GMT', vary: 'accept,origin', 'x-conformance-test-served-endpoint': '10.0.0.1:3000' })
})

function load (backend: string[]) {
  return loadConfigText(['gateways: {default: {port: 3000}}', 'routes:', '  - name: r', '    backends:', ...backend.map(l => `      ${l}`)].join('\n'), { baseDir: '/cfg' })
}

test('an inferencePool backend at load: the pool\'s endpoints, its picker, defaults', () => {
  const result = load([
    '- inferencePool:',
    '    name: llama',
    '    endpoints: [10.0.0.1, "10.0.0.2:9000", "fd00::3"]',
    '    targetPorts: [{number: 8000}]',
    '    appProtocol: kubernetes.io/h2c',
    '    endpointPicker: {host: "epp.local:9002", failureMode: FailOpen, timeout: 2s, subsetHint: true}'
  ])
  assert.equal(result.ok, true, result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'))
  if (!result.ok) return
  const b = result.config.ir.backends.find(x => x.inferencePool !== undefined)!
  assert.equal(b.name, 'llama')
  assert.equal(b.h2c, true)
  assert.deepEqual(b.endpoints, [{ host: '10.0.0.1', port: 8000 }, { host: '10.0.0.2', port: 9000 }, { host: 'fd00::3', port: 8000 }])
  assert.deepEqual(b.inferencePool, {
    name: 'llama',
    picker: { target: 'epp.local:9002', tls: { insecureSkipVerify: true }, failureMode: 'FailOpen', timeoutMs: 2000, maxBodyBytes: 10 * 1024 * 1024 },
    subsetHint: true
  })
  const plain = load(['- inferencePool: {endpoints: ["10.0.0.1:8000"], endpointPicker: {host: "127.0.0.1:9002", tls: false}}'])
  assert.equal(plain.ok, true)
  if (plain.ok) {
    const p = plain.config.ir.backends.find(x => x.inferencePool !== undefined)!
    assert.equal(p.inferencePool!.picker.tls, null)
    assert.equal(p.inferencePool!.picker.failureMode, 'FailClose')
    assert.equal(p.inferencePool!.picker.timeoutMs, 10_000)
  }
})

test('an inferencePool backend: names, missing ports, duplicates, a bad picker host and two kinds are refused', () => {
  const problems = (lines: string[]): string => {
    const r = load(lines)
    assert.equal(r.ok, false)
    return r.ok ? '' : r.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n')
  }
  assert.match(problems(['- inferencePool: {endpoints: ["pod-a:8000"], endpointPicker: {host: "e:9002"}}']), /"pod-a:8000" is not an IP address/)
  assert.match(problems(['- inferencePool: {endpoints: ["10.0.0.1"], endpointPicker: {host: "e:9002"}}']), /or set targetPorts/)
  assert.match(problems(['- inferencePool: {endpoints: ["10.0.0.1:8000", "10.0.0.1"], targetPorts: [{number: 8000}], endpointPicker: {host: "e:9002"}}']), /endpoints must be distinct/)
  assert.match(problems(['- inferencePool: {endpoints: ["10.0.0.1:8000"], endpointPicker: {host: "http://e:9002"}}']), /is not host:port/)
  assert.match(problems(['- inferencePool: {endpoints: ["10.0.0.1:8000"], endpointPicker: {host: "e:9002"}}', '  host: "10.0.0.1:8000"']), /exactly one backend kind.*got host, inferencePool/)
  assert.match(problems(['- inferencePool: {endpoints: ["10.0.0.1:8000"], endpointPicker: {host: "e:9002"}}', '  policies: {health: {consecutiveFailures: 2}}']), /policies\.health: does not apply to an inferencePool backend/)
})
