import { test } from 'node:test'
import assert from 'node:assert/strict'
import { deferred, waitUntil, withTimeout } from '../src/wait.ts'
import { startEchoBackend } from '../src/backends.ts'
import { send, newAgent } from '../src/client.ts'

test('waitUntil resolves once the check holds and names what it waited for when it never does', async () => {
  let n = 0
  await waitUntil(() => ++n >= 3, 1_000, 'three polls', 1)
  assert.equal(n, 3)
  await assert.rejects(waitUntil(() => false, 30, 'the impossible', 5), /timed out after 30 ms waiting for the impossible/)
  let polls = 0
  await assert.rejects(waitUntil(() => { polls++; return false }, 30, () => `the impossible after ${polls} polls`, 5), /waiting for the impossible after \d+ polls/)
  assert.ok(polls > 1, 'the message is built at the timeout, not at the start')
})

test('withTimeout passes a settled promise through and rejects a stuck one with the message', async () => {
  const d = deferred<string>()
  d.resolve('done')
  assert.equal(await withTimeout(d.promise, 1_000, 'never'), 'done')
  await assert.rejects(withTimeout(deferred().promise, 20, 'stuck'), /stuck \(after 20 ms\)/)
})

test('an echo backend describes the request it got; send reads the whole answer', async () => {
  const backend = await startEchoBackend('b1')
  const agent = newAgent()
  try {
    const r = await send(agent, `${backend.url}/x?y=1`, { method: 'POST', body: 'abc' })
    assert.equal(r.status, 200)
    const echoed = JSON.parse(r.text) as { name: string, url: string, bodyLength: number }
    assert.deepEqual([echoed.name, echoed.url, echoed.bodyLength], ['b1', '/x?y=1', 3])
    assert.equal(backend.requests.length, 1)
  } finally {
    await agent.destroy()
    await backend.close()
  }
})
