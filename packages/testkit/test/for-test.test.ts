import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setForTest } from '../src/for-test.ts'

const shared: { handler: string, extra?: string } = { handler: 'ok' }
const ENV = 'PORTICO_TESTKIT_FOR_TEST'

test('a failing test that changed shared state', async t => {
  // The subtest fails after changing the handler twice and setting an env var; its t.after
  // hooks must still put everything back.
  await t.test('fails', { expectFailure: true }, st => {
    setForTest(st, shared, 'handler', 'hang')
    setForTest(st, shared, 'handler', 'deny')
    setForTest(st, shared, 'extra', 'x')
    setForTest(st, process.env, ENV, 'set')
    assert.equal(process.env[ENV], 'set')
    throw new Error('the test fails midway')
  })
  assert.equal(shared.handler, 'ok', 'the value from before the test, not the first change')
  assert.equal('extra' in shared, false, 'a key that was absent is absent again')
  assert.equal(ENV in process.env, false, 'an env var that was unset is unset again')
})

test('undefined deletes the key (process.env would store the string "undefined") and comes back after', async t => {
  process.env[ENV] = 'before'
  await t.test('unsets', st => {
    setForTest(st, process.env, ENV, undefined)
    assert.equal(ENV in process.env, false)
  })
  assert.equal(process.env[ENV], 'before')
  delete process.env[ENV]
})
