/**
 * V8's allocation-site pretenuring stays off in Portico (src/v8-flags.ts, PRETENURING_FLAG):
 * with it, a full GC under a load of short connections tipped their objects' allocation
 * sites into the old generation, and from then on every connection was kept until the next
 * full GC, which came every fraction of a second.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { runOldSpaceScript } from '@portico/testkit/old-space'
import { pretenuringGiven } from '../src/v8-flags.ts'

const SCRIPT = fileURLToPath(new URL('./lib/connection-churn.ts', import.meta.url))

test('with the flags Portico sets, connections that come and go after a full GC are not kept in the old generation', async () => {
  const grewMb = await runOldSpaceScript(SCRIPT)
  // Without the flag: ~6 MB here (the sites tipped by the full GC); with it, ~0.1.
  assert.ok(grewMb < 2, `old space grew by ${grewMb} MB over 150,000 streams`)
})

test('a pretenuring setting of the user\'s own is left alone', () => {
  assert.equal(pretenuringGiven([], undefined), false)
  assert.equal(pretenuringGiven(['--allocation-site-pretenuring'], undefined), true)
  assert.equal(pretenuringGiven(['--no-allocation-site-pretenuring'], undefined), true)
  assert.equal(pretenuringGiven([], '--no_allocation_site_pretenuring'), true)
  assert.equal(pretenuringGiven(['--allocation-site-pretenuring-x'], undefined), false, 'another flag')
})
