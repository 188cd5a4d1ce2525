/**
 * `policies.promptGuard` of ai backends at load: the IR it becomes, and what is refused with
 * file:line:col — a pattern only a backtracking engine could run, a guard naming two kinds,
 * a guard on a host backend; the moderation key redacted in dumps.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfigText, formatDiagnostic } from '../src/index.ts'
import { redactSecrets } from '../src/ir/redact.ts'

const head = [
  'gateways: {default: {port: 3000}}',
  'routes:',
  '  - name: a',
  '    backends:',
  '      - ai: {name: llm, provider: {openAI: {}}}',
  '        policies:',
  '          promptGuard:'
]

test('promptGuard becomes the ai backend\'s IR, with defaults', () => {
  const result = loadConfigText([
    ...head,
    '            request:',
    '              - regex: {action: reject, rules: [{builtin: Email}, {pattern: "(?i)project titan", name: titan}], rejection: {message: no}}',
    '              - webhook: {url: "http://127.0.0.1:9000/check"}',
    '            response:',
    '              - openAIModeration: {auth: {key: sk-test-portico}, failureMode: open, timeout: 2s}'
  ].join('\n'), { baseDir: '/cfg' })
  assert.equal(result.ok, true, result.ok ? '' : result.diagnostics.map(d => formatDiagnostic('c.yaml', d)).join('\n'))
  if (!result.ok) return
  const backend = result.config.ir.backends.find(b => b.kind === 'ai')!
  assert.deepEqual(backend.ai!.promptGuard, {
    request: [
      { kind: 'regex', action: 'reject', rules: [{ builtin: 'Email' }, { pattern: '(?i)project titan', name: 'titan', maxLength: 256 }], rejection: { status: 403, message: 'no' } },
      { kind: 'webhook', url: 'http://127.0.0.1:9000/check', timeoutMs: 5000, failureMode: 'closed', maxResponseBytes: 1048576, rejection: { status: 403 } }
    ],
    response: [
      { kind: 'openAIModeration', url: 'https://api.openai.com/v1/moderations', model: 'omni-moderation-latest', auth: { apiKey: 'sk-test-portico' }, timeoutMs: 2000, failureMode: 'open', rejection: { status: 403 } }
    ]
  })
  assert.ok(!JSON.stringify(redactSecrets(result.config.ir)).includes('sk-test-portico'), 'the moderation key is redacted in dumps')
})

test('refused at load, with file:line:col: a backtracking-only pattern, two kinds in one guard, a guard on a host backend', () => {
  const result = loadConfigText([
    ...head,
    '            request:',
    '              - regex:',
    '                  action: mask',
    '                  rules:',
    '                    - pattern: "(a+)\\\\1"',
    '                    - pattern: "(?=secret)\\\\w+"',
    '                    - {builtin: Email, name: x}',
    '              - {regex: {action: mask, rules: [{builtin: Ssn}]}, webhook: {url: "http://x"}}',
    '  - name: b',
    '    backends:',
    '      - host: 127.0.0.1:8080',
    '        policies:',
    '          promptGuard: {request: [{regex: {action: reject, rules: [{builtin: Ssn}]}}]}'
  ].join('\n'), { baseDir: '/cfg' })
  assert.equal(result.ok, false)
  if (result.ok) return
  const lines = result.diagnostics.map(d => formatDiagnostic('c.yaml', d))
  const expect = (prefix: string, why: RegExp) => assert.ok(lines.some(l => l.startsWith(prefix) && why.test(l)), `${prefix} … ${why}\n${lines.join('\n')}`)
  expect('c.yaml:12:23: routes[0].backends[0].policies.promptGuard.request[0].regex.rules[0].pattern: ', /backreference .* not supported/)
  expect('c.yaml:13:23: routes[0].backends[0].policies.promptGuard.request[0].regex.rules[1].pattern: ', /lookahead .* not supported/)
  expect('c.yaml:14:23: routes[0].backends[0].policies.promptGuard.request[0].regex.rules[2]: ', /name and maxLength apply to a pattern/)
  expect('c.yaml:15:17: routes[0].backends[0].policies.promptGuard.request[1]: ', /exactly one of regex, webhook or openAIModeration \(got regex, webhook\)/)
  expect('c.yaml:20:11: routes[1].backends[0].policies.promptGuard: ', /applies to ai backends/)
})
