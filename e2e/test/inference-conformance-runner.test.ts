/**
 * The conformance runner's mapping of the Inference Extension suite's endpoint picker
 * container to lwepp (e2e/conformance/lwepp-args.ts; docs/conformance.md, "Inference Extension
 * conformance"). The run itself (scripts/inference-conformance with a copy of the suite) is
 * the end-to-end proof; this pins the arguments it depends on.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lweppArgs } from '../conformance/lwepp-args.ts'

test('the suite\'s picker manifest (base.yaml) passes to lwepp as it is, with its --pool-namespace', () => {
  const manifest = ['--pool-name', 'primary-inference-pool', '--pool-namespace', 'inference-conformance-app-backend', '--zap-encoder', 'json', '--grpc-port', '9002', '--grpc-health-port', '9003']
  assert.deepEqual(lweppArgs(manifest, 'elsewhere'), ['--pool-name', 'primary-inference-pool', '--pool-namespace', 'inference-conformance-app-backend', '--zap-encoder', 'json', '--grpc-port', '9002', '--grpc-health-port', '9003'])
})

test('flags lwepp does not have are dropped (reported), --kubeconfig too; --pool-namespace defaults to the pod\'s namespace', () => {
  const dropped: string[] = []
  const args = lweppArgs(['--pool-name=p', '--v', '4', '--config-file', '/config/x.yaml', '--kubeconfig=/etc/kube', '--secure-serving=false', '--tracing'], 'ns-a', f => dropped.push(f))
  assert.deepEqual(args, ['--pool-name=p', '--secure-serving=false', '--pool-namespace=ns-a'])
  assert.deepEqual(dropped, ['--v', '--config-file', '--kubeconfig=/etc/kube', '--tracing'])
})
