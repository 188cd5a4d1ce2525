/**
 * Stop requests (src/stop-requests.ts): a wrapper's copy of a Ctrl-C is not a second signal,
 * a later signal is; which parents are shims whose exit means "stop".
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { isShimCommandLine, SAME_STOP_MS, wireStopRequests } from '../src/stop-requests.ts'

test('signals within SAME_STOP_MS of the first are the same stop; a later one stops now', () => {
  let clock = 1000
  const seen: string[] = []
  const wired = wireStopRequests({
    stop: reason => seen.push(`stop ${reason}`),
    stopNow: signal => seen.push(`now ${signal}`),
    onSameStop: signal => seen.push(`same ${signal}`),
    now: () => clock
  })
  try {
    process.emit('SIGINT', 'SIGINT')
    clock += 1
    process.emit('SIGTERM', 'SIGTERM') // pnpm exec, 1 ms after the terminal's SIGINT
    clock += SAME_STOP_MS
    process.emit('SIGINT', 'SIGINT') // the user, pressing Ctrl-C again
    assert.deepEqual(seen, ['stop SIGINT', 'same SIGTERM', 'now SIGINT'])
  } finally {
    wired.dispose()
  }
})

test('a shim is a shell running a node_modules/.bin script; nothing else is watched', () => {
  assert.equal(isShimCommandLine('/bin/sh\0/repo/node_modules/.bin/node\0/repo/node_modules/@portico/proxy/bin/portico.ts\0-f\0x.yaml\0'), true)
  assert.equal(isShimCommandLine('sh\0./node_modules/.bin/node\0portico.ts\0'), true)
  assert.equal(isShimCommandLine('/usr/bin/bash\0/repo/node_modules/.bin/portico\0'), true)
  assert.equal(isShimCommandLine('node\0/usr/local/bin/pnpm\0exec\0portico\0'), true, 'pnpm exec')
  assert.equal(isShimCommandLine('/usr/bin/node\0/usr/lib/node_modules/npm/bin/npx-cli.js\0portico\0'), true, 'npx')
  for (const other of [
    '-bash\0', // an interactive shell: nohup portico & must outlive it
    '/bin/bash\0/repo/scripts/quickstart\0',
    'node\0/repo/packages/proxy/bin/portico.ts\0',
    '/sbin/init\0',
    'script\0-qec\0portico\0/dev/null\0',
    ''
  ]) assert.equal(isShimCommandLine(other), false, JSON.stringify(other))
})
