/**
 * The data plane's young generation (packages/proxy/src/v8-flags.ts): a gateway started without
 * a semi-space size runs with Portico's (bin/portico.ts starts Node again with it, same
 * pid); one given by the user (NODE_OPTIONS) is left alone.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { gateway, startPortico } from '../lib/portico.ts'
import { SEMI_SPACE_FLAG, inliningGiven, semiSpaceGiven } from '../../packages/proxy/src/v8-flags.ts'

const argv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')

test('semiSpaceGiven: the flag in either spelling, in execArgv or NODE_OPTIONS', () => {
  assert.equal(semiSpaceGiven([], undefined), false)
  assert.equal(semiSpaceGiven(['--max-semi-space-size=8'], undefined), true)
  assert.equal(semiSpaceGiven([], '--max_semi_space_size=2 --trace-warnings'), true)
  assert.equal(semiSpaceGiven(['--max-old-space-size=512'], '--max-semi-space-sizes'), false)
})

test('inliningGiven: the user\'s own inlining budget (execArgv or NODE_OPTIONS) is left alone', () => {
  assert.equal(inliningGiven([], undefined), false)
  assert.equal(inliningGiven(['--max-inlined-bytecode-size-cumulative=500'], undefined), true)
  assert.equal(inliningGiven([], '--max_inlined_bytecode_size_cumulative=2000'), true)
  assert.equal(inliningGiven(['--max-inlined-bytecode-size=460'], undefined), false, 'the per-function limit is another flag')
})

test('a gateway started without a semi-space size runs with Portico\'s; the user\'s own wins', async () => {
  const plain = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.ok(argv(plain.child.pid!).includes(SEMI_SPACE_FLAG), argv(plain.child.pid!).join(' '))
  } finally {
    await plain.stop()
  }
  const own = await startPortico({ env: { NODE_OPTIONS: '--max-semi-space-size=2' }, config: port => ({ gateways: { default: gateway(port) }, routes: [] }) as never })
  try {
    assert.ok(!argv(own.child.pid!).includes(SEMI_SPACE_FLAG), argv(own.child.pid!).join(' '))
  } finally {
    await own.stop()
  }
})
