/**
 * An InferencePool picker's addresses as one gRPC channel target (ir/picker-targets.ts):
 * `target` alone, or gRPC's address list with `fallbackTargets` (the picker Service's other
 * ready endpoints, the controller's), which the client's pick_first policy walks in order;
 * and the IR check refusing fallbacks gRPC cannot list with the target. The socket side
 * (the first address down, the next one picks) is e2e/test/cluster-inference-picker-endpoints.test.ts.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { channelTarget, fallbackTargetsProblem, MAX_FALLBACK_TARGETS } from '../src/ir/picker-targets.ts'
import { validateIR } from '../src/ir/validate.ts'
import type { BackendIR, InferencePoolIR, ProxyIR } from '../src/ir/types.ts'

test('channelTarget: the target alone, or gRPC\'s ipv4:/ipv6: address list in order', () => {
  assert.equal(channelTarget({ target: 'epp.models.svc.cluster.local:9002' }), 'epp.models.svc.cluster.local:9002')
  assert.equal(channelTarget({ target: '10.0.0.1:9002', fallbackTargets: [] }), '10.0.0.1:9002')
  assert.equal(channelTarget({ target: '10.0.0.1:9002', fallbackTargets: ['10.0.0.3:9002', '10.0.0.2:9003'] }), 'ipv4:10.0.0.1:9002,10.0.0.3:9002,10.0.0.2:9003')
  assert.equal(channelTarget({ target: '[fd00::1]:9002', fallbackTargets: ['[fd00::2]:9002'] }), 'ipv6:[fd00::1]:9002,[fd00::2]:9002')
  // What cannot be one list is the target alone (validateIR refuses such an IR first).
  assert.equal(channelTarget({ target: '10.0.0.1:9002', fallbackTargets: ['[fd00::2]:9002'] }), '10.0.0.1:9002')
})

test('fallbackTargetsProblem: IP literals of the target\'s family, valid ports, bounded', () => {
  assert.equal(fallbackTargetsProblem({ target: 'epp:9002' }), null)
  assert.equal(fallbackTargetsProblem({ target: '10.0.0.1:9002', fallbackTargets: ['10.0.0.2:9002'] }), null)
  assert.match(fallbackTargetsProblem({ target: 'epp:9002', fallbackTargets: ['10.0.0.2:9002'] })!, /need target to be an IP address and port, not epp:9002/)
  assert.match(fallbackTargetsProblem({ target: '10.0.0.1:9002', fallbackTargets: ['[fd00::2]:9002'] })!, /\[fd00::2\]:9002 is not an IPv4 address and port/)
  assert.match(fallbackTargetsProblem({ target: '[fd00::1]:9002', fallbackTargets: ['fd00::2'] })!, /not an IPv6 address and port/)
  for (const bad of ['epp-2:9002', '10.0.0.2', '10.0.0.2:0', '10.0.0.2:65536', '10.0.0.2:80,10.0.0.3:80', '[10.0.0.2]:80']) {
    assert.notEqual(fallbackTargetsProblem({ target: '10.0.0.1:9002', fallbackTargets: [bad] }), null, bad)
  }
  const many = Array.from({ length: MAX_FALLBACK_TARGETS + 1 }, (_, i) => `10.0.1.${i}:9002`)
  assert.match(fallbackTargetsProblem({ target: '10.0.0.1:9002', fallbackTargets: many })!, /more than 15 fallbackTargets/)
  assert.equal(fallbackTargetsProblem({ target: '10.0.0.1:9002', fallbackTargets: many.slice(1) }), null)
})

function pool (picker: Partial<InferencePoolIR['picker']>): BackendIR {
  return {
    key: 'inferencepool/apps/llama#x',
    kind: 'static',
    name: 'llama',
    protocol: 'http',
    endpoints: [{ host: '10.1.0.1', port: 8000 }],
    target: 'apps/llama',
    inferencePool: { name: 'apps/llama', subsetHint: false, picker: { target: '10.0.0.1:9002', tls: { insecureSkipVerify: true }, failureMode: 'FailClose', timeoutMs: 10_000, maxBodyBytes: 1024, ...picker } }
  }
}

test('validateIR: a pool\'s fallbackTargets that cannot share the target\'s channel are refused with their path', () => {
  const ir = (b: BackendIR): ProxyIR => ({ version: 'v', binds: [], backends: [b] })
  assert.deepEqual(validateIR(ir(pool({ fallbackTargets: ['10.0.0.2:9002'] }))), [])
  const refused = validateIR(ir(pool({ fallbackTargets: ['epp-2.apps.svc.cluster.local:9002'] })))
  assert.deepEqual(refused.map(d => d.path.join('.')), ['backends.0.inferencePool.picker.fallbackTargets'])
  assert.match(refused[0]!.message, /not an IPv4 address and port/)
})
