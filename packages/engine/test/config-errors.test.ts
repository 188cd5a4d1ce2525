import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'

function errors (yaml: string, readFile?: (p: string) => string): string[] {
  const result = loadConfigText(yaml, { baseDir: '/cfg', ...(readFile !== undefined ? { readFile } : {}) })
  assert.equal(result.ok, false, 'expected the config to be rejected')
  if (result.ok) return []
  return result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
}

test('a valid file loads', () => {
  const result = loadConfigText('gateways: {default: {port: 3000}}\nroutes: [{backends: [{host: "127.0.0.1:8080"}]}]\n', { baseDir: '/' })
  assert.equal(result.ok, true)
})

// An empty file used to be a valid config with nothing in it, and a reload to it closed every
// listener (what a truncating save leaves for a moment): now it is refused, with a position.
test('an empty file is refused: a config needs a gateway', () => {
  assert.deepEqual(errors(''), ['c.yaml:1:1: no gateways: a config needs at least one gateway (a listener); an empty or partly written file is refused so that it never replaces a running config'])
})

test('unknown keys are errors with position and a did-you-mean', () => {
  assert.deepEqual(errors([
    'gateways:',
    '  default:',
    '    port: 3000',
    'routes:',
    '  - name: a',
    '    backends:',
    '      - hots: 127.0.0.1:8080',
    '    polices: {}'
  ].join('\n')), [
    'c.yaml:7:9: routes[0].backends[0].hots: unknown field "hots"; did you mean "host"?',
    'c.yaml:8:5: routes[0].polices: unknown field "polices"; did you mean "policies"?'
  ])
})

test('an unknown key far from any known one lists the known fields', () => {
  const [line] = errors('gateways:\n  default:\n    port: 3000\n    zzzzzzzz: 1\n')
  assert.match(line!, /^c\.yaml:4:5: gateways\.default\.zzzzzzzz: unknown field "zzzzzzzz" \(known fields: port, protocol, address, hostname, http2, tls, path, timeout, clientIPDetection, upgrades, tracing, policies, filters, udp\)$/)
})

test('type, enum, range and required errors name the field and line', () => {
  assert.deepEqual(errors([
    'gateways:',
    '  default:',
    '    port: "3000"',
    '    protocol: HTTP2',
    '  other:',
    '    protocol: HTTP',
    'routes:',
    '  - backends: [{host: "a:1", weight: -1}]'
  ].join('\n')), [
    'c.yaml:3:5: gateways.default.port: must be an integer, got string "3000"',
    'c.yaml:4:5: gateways.default.protocol: must be one of: HTTP, HTTPS, TLS, TCP, UDP',
    'c.yaml:5:3: gateways.other: missing required field "port"',
    'c.yaml:8:30: routes[0].backends[0].weight: must be >= 0'
  ])
})

test('semantic errors: match forms, regexes, hosts, gateways, duplicates', () => {
  assert.deepEqual(errors([
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - name: a',
    '    matches:',
    '      - path: {exact: /x, pathPrefix: /y}',
    '      - path: {regex: "(["}',
    '        query: [{name: q, value: {}}]',
    '  - name: a',
    '    gateways: [default, missing]',
    '    backends:',
    '      - host: 127.0.0.1',
    '      - host: "ftp://h:1"',
    '      - host: "http://h:1/path"',
    '      - {weight: 1}'
  ].join('\n')), [
    'c.yaml:5:9: routes[0].matches[0].path: needs exactly one of exact, pathPrefix or regex (got exact, pathPrefix)',
    'c.yaml:6:16: routes[0].matches[1].path.regex: invalid regular expression (RE2 syntax): missing closing ]: `[`',
    'c.yaml:7:27: routes[0].matches[1].query[0].value: needs exactly one of exact or regex',
    'c.yaml:8:5: routes[1].name: duplicate route name "a"',
    'c.yaml:9:5: routes[1].gateways: no gateway named "missing" (gateways: default)',
    'c.yaml:11:9: routes[1].backends[0].host: "127.0.0.1" needs a port: host:port',
    'c.yaml:12:9: routes[1].backends[1].host: unsupported scheme "ftp" in "ftp://h:1": use http or https',
    'c.yaml:13:9: routes[1].backends[2].host: "http://h:1/path" must be only scheme, host and port (no path)',
    'c.yaml:14:9: routes[1].backends[3]: needs exactly one backend kind: host, endpoints, mcp, ai or inferencePool'
  ])
})

test('a route without gateways needs a gateway named default', () => {
  assert.deepEqual(errors('gateways: {public: {port: 3000}}\nroutes:\n  - name: r\n'), [
    'c.yaml:3:5: routes[0]: no gateway named "default"; a route without "gateways" attaches to it (gateways: public)'
  ])
})

test('gateways sharing a port must agree on protocol and differ in hostname', () => {
  assert.deepEqual(errors([
    'gateways:',
    '  a: {port: 3000}',
    '  b: {port: 3000}',
    '  c: {port: 3000, hostname: x.example.com, protocol: HTTPS, tls: {cert: c.pem, key: k.pem}}'
  ].join('\n'), () => '-----BEGIN X-----'), [
    'c.yaml:3:3: gateways.b: port 3000 is already used by gateway "a" for any host; gateways sharing a port need distinct hostnames',
    'c.yaml:4:44: gateways.c.protocol: port 3000 is already used by gateway "a" with protocol HTTP'
  ])
})

test('HTTPS needs readable PEM files', () => {
  const lines = errors('gateways:\n  s:\n    port: 3443\n    protocol: HTTPS\n    tls: {cert: missing.pem, key: key.txt}\n', p => {
    if (p.endsWith('key.txt')) return 'not pem'
    throw Object.assign(new Error('nope'), { code: 'ENOENT' })
  })
  assert.deepEqual(lines, [
    'c.yaml:5:11: gateways.s.tls.cert: cannot read /cfg/missing.pem: ENOENT',
    'c.yaml:5:30: gateways.s.tls.key: /cfg/key.txt is not a PEM file'
  ])
})

// A config error is reported once, at its cause: a gateway that fails (here an unreadable
// certificate, a port clash) does not also make every route naming it say that the gateway
// does not exist; a file with no gateways gets one error, not one more per route.
test('a failed gateway is reported at its cause only, not again at the routes naming it', () => {
  const lines = errors([
    'gateways:',
    '  default: {port: 3443, protocol: HTTPS, tls: {cert: missing.pem, key: key.pem}}',
    '  plain: {port: 3000}',
    '  clash: {port: 3000, protocol: TCP}',
    'routes:',
    '  - name: implicit',
    '  - name: explicit',
    '    gateways: [default, plain, nope]',
    'tcpRoutes:',
    '  - name: t',
    '    gateways: clash',
    '    backends: [{host: "127.0.0.1:9"}]'
  ].join('\n'), p => {
    if (p.endsWith('missing.pem')) throw Object.assign(new Error('nope'), { code: 'EACCES' })
    return '-----BEGIN X-----'
  })
  assert.deepEqual(lines, [
    'c.yaml:2:48: gateways.default.tls.cert: cannot read /cfg/missing.pem: EACCES',
    'c.yaml:4:23: gateways.clash.protocol: port 3000 is already used by gateway "plain" with protocol HTTP',
    'c.yaml:8:5: routes[1].gateways: no gateway named "nope" (gateways: default, plain, clash)'
  ])
  // Routes only, no gateway: one error, the cause.
  assert.deepEqual(errors('routes:\n  - name: a\ntcpRoutes:\n  - {backends: [{host: "127.0.0.1:9"}]}\n'), [
    'c.yaml:1:1: no gateways: a config needs at least one gateway (a listener); an empty or partly written file is refused so that it never replaces a running config'
  ])
})

test('YAML syntax errors carry their position', () => {
  const [line] = errors('gateways:\n  default:\n    port: 3000\n   bad: indent\n')
  assert.match(line!, /^c\.yaml:4:\d+: YAML syntax: /)
})

test('duplicate keys are syntax errors', () => {
  const [line] = errors('gateways:\n  default: {port: 1}\n  default: {port: 2}\n')
  assert.match(line!, /^c\.yaml:3:3: YAML syntax: Map keys must be unique/)
})

test('bad durations are rejected by the schema', () => {
  const [line] = errors('gateways: {default: {port: 1}}\nroutes:\n  - policies: {timeout: {requestTimeout: 10}}\n')
  assert.match(line!, /^c\.yaml:3:\d+: routes\[0\]\.policies\.timeout\.requestTimeout: must be a string, got number 10$/)
})

test('gateways.<name>.http2: false turns HTTP/2 off for the port; gateways sharing a port must agree', () => {
  const on = loadConfigText('gateways: {default: {port: 3000}}\nroutes: [{backends: [{host: "127.0.0.1:8080"}]}]\n', { baseDir: '/' })
  const off = loadConfigText('gateways: {default: {port: 3000, http2: false}}\nroutes: [{backends: [{host: "127.0.0.1:8080"}]}]\n', { baseDir: '/' })
  assert.ok(on.ok && off.ok)
  assert.equal(on.config.ir.binds[0]!.http2, undefined)
  assert.equal(off.config.ir.binds[0]!.http2, false)
  const [line] = errors('gateways:\n  a: {port: 3000, hostname: a.test}\n  b: {port: 3000, hostname: b.test, http2: false}\nroutes: [{gateways: [a, b], backends: [{host: "127.0.0.1:8080"}]}]\n')
  assert.match(line!, /gateways\.b\.http2: gateways sharing port 3000 must agree on http2/)
})

test('gRPC method matches become the path match they mean; malformed ones are positioned errors', () => {
  const load = (match: string) => loadConfigText(`gateways: {default: {port: 3000}}\nroutes: [{matches: [${match}], backends: [{host: "127.0.0.1:8080"}]}]\n`, { baseDir: '/' })
  const pathOf = (match: string) => {
    const r = load(match)
    assert.equal(r.ok, true, match)
    return r.ok ? r.config.ir.binds[0]!.listeners[0]!.routes[0]!.matches[0]!.path : null
  }
  assert.deepEqual(pathOf('{grpc: {service: helloworld.Greeter, method: SayHello}}'), { kind: 'exact', value: '/helloworld.Greeter/SayHello' })
  assert.deepEqual(pathOf('{grpc: {service: helloworld.Greeter}}'), { kind: 'prefix', value: '/helloworld.Greeter' })
  assert.deepEqual(pathOf('{grpc: {method: SayHello}}'), { kind: 'regex', value: '/[^/]+/SayHello' })
  assert.deepEqual(pathOf('{grpc: {service: "helloworld\\\\..*", type: RegularExpression}}'), { kind: 'regex', value: '/helloworld\\..*/[^/]+' })
  assert.deepEqual(errors('gateways: {default: {port: 3000}}\nroutes: [{matches: [{grpc: {}}], backends: [{host: "127.0.0.1:8080"}]}]\n'), ['c.yaml:2:22: routes[0].matches[0].grpc: needs service, method or both'])
  assert.match(errors('gateways: {default: {port: 3000}}\nroutes: [{matches: [{grpc: {service: "a/b"}}], backends: [{host: "127.0.0.1:8080"}]}]\n')[0]!, /routes\[0\]\.matches\[0\]\.grpc\.service: "a\/b" is not a gRPC service name/)
  assert.match(errors('gateways: {default: {port: 3000}}\nroutes: [{matches: [{grpc: {method: X}, path: {exact: /x}}], backends: [{host: "127.0.0.1:8080"}]}]\n')[0]!, /grpc: cannot be used with path/)
  assert.match(errors('gateways: {default: {port: 3000}}\nroutes: [{matches: [{grpc: {method: "(a)\\\\1", type: RegularExpression}}], backends: [{host: "127.0.0.1:8080"}]}]\n')[0]!, /grpc\.method/)
})

// Issue 49: --validate reports every problem in one run. A route the schema refuses is left
// out and the rest is still translated, so its typo and another route's semantic problem (a
// missing file, CEL that cannot type-check, a duplicate name) come together.
test('schema errors inside routes come with the semantic problems of the rest of the file', () => {
  const missing = (p: string): string => { throw Object.assign(new Error(`no ${p}`), { code: 'ENOENT' }) }
  assert.deepEqual(errors([
    'gateways:',
    '  default: {port: 3443, protocol: HTTPS, tls: {cert: c.pem, key: k.pem}}',
    'routes:',
    '  - name: a',
    '    backends: [{hots: "127.0.0.1:1"}]',
    '  - name: b',
    '    policies: {authorization: {rules: ["request.path + 1"]}}',
    '    backends: [{host: "127.0.0.1:1"}]',
    '  - name: b',
    '    backends: [{host: "127.0.0.1:1"}]'
  ].join('\n'), missing), [
    'c.yaml:2:48: gateways.default.tls.cert: cannot read /cfg/c.pem: ENOENT',
    'c.yaml:2:61: gateways.default.tls.key: cannot read /cfg/k.pem: ENOENT',
    'c.yaml:5:17: routes[0].backends[0].hots: unknown field "hots"; did you mean "host"?',
    'c.yaml:7:40: routes[1].policies.authorization.rules[0]: invalid CEL expression "request.path + 1": found no matching overload for \'_+_\' applied to (string, int)',
    'c.yaml:9:5: routes[2].name: duplicate route name "b"'
  ])
  // A schema error outside routes (a gateway's shape) still comes alone: translation needs it.
  assert.deepEqual(errors('gateways:\n  default: {port: "3000"}\nroutes:\n  - policies: {authorization: {rules: ["request.path + 1"]}}\n    backends: [{host: "127.0.0.1:1"}]\n'), [
    'c.yaml:2:13: gateways.default.port: must be an integer, got string "3000"'
  ])
})

test('a backend that cannot be built still has its policies checked', () => {
  assert.deepEqual(errors([
    'gateways: {default: {port: 3000}}',
    'routes:',
    '  - backends:',
    '      - host: "no-port"',
    '        policies: { transformation: { request: { set: { x-a: "request.path + 1" } } } }'
  ].join('\n')), [
    'c.yaml:4:9: routes[0].backends[0].host: "no-port" needs a port: host:port',
    'c.yaml:5:57: routes[0].backends[0].policies.transformation.request.set.x-a: invalid CEL expression "request.path + 1": found no matching overload for \'_+_\' applied to (string, int)'
  ])
})
