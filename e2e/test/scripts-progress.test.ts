/**
 * scripts/lib/progress.sh, the progress line the tool builds print while a first build runs
 * (test-tools' helm, kube-tools, conformance-tools): a line per interval with its detail,
 * and once stopped nothing left running — no ticker, no sleep, and never the callers' lock
 * (fd 9) held by the ticker.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { makeTempDir, REPO_ROOT } from '@portico/testkit/portico'

const PROGRESS = join(REPO_ROOT, 'scripts/lib/progress.sh')

test('progress_start prints a line per interval with its detail; progress_stop leaves nothing running', () => {
  const dir = makeTempDir('portico-progress-')
  const script = `
set -euo pipefail
. ${JSON.stringify(PROGRESS)}
exec 9>${JSON.stringify(join(dir, 'lock'))}
flock 9
echo 3 > ${JSON.stringify(join(dir, 'n'))}
detail() { echo "$(cat ${JSON.stringify(join(dir, 'n'))}) packages compiled"; }
progress_start "test: still building thing" detail
ticker=$progress_pid
sleep 0.2
# The ticker does not hold the lock's fd.
[ ! -e /proc/$ticker/fd/9 ] && echo "fd9: closed in ticker" >&2
sleep 2.3
progress_stop
echo "ticker=$ticker"
`
  const r = spawnSync('bash', ['-c', script], { env: { ...process.env, PORTICO_PROGRESS_SECONDS: '1' }, encoding: 'utf8', timeout: 20_000 })
  assert.equal(r.status, 0, r.stderr)
  const lines = r.stderr.trim().split('\n')
  assert.deepEqual(lines, [
    'fd9: closed in ticker',
    'test: still building thing (1s, 3 packages compiled)',
    'test: still building thing (2s, 3 packages compiled)'
  ], 'one line a second here (a minute by default), the detail computed in the ticker')
  const ticker = Number(/ticker=(\d+)/.exec(r.stdout)![1])
  assert.equal(existsSync(`/proc/${ticker}`), false, 'the ticker is gone')
})

test('an interval that is not whole minutes reads in seconds; stopping leaves nothing behind', () => {
  const r = spawnSync('bash', ['-c', `. ${JSON.stringify(PROGRESS)}; progress_start "t" ; sleep 1.5; progress_stop`], { env: { ...process.env, PORTICO_PROGRESS_SECONDS: '1' }, encoding: 'utf8', timeout: 20_000 })
  assert.equal(r.stderr, 't (1s)\n')
  // Stopped at once, many times: nothing is left holding the output open (spawnSync would
  // wait for it), which an orphaned `sleep` child used to do now and then.
  const started = Date.now()
  const m = spawnSync('bash', ['-c', `. ${JSON.stringify(PROGRESS)}; for i in $(seq 50); do progress_start "t"; progress_stop; done; echo stopped`], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(m.stdout, 'stopped\n')
  assert.equal(m.stderr, '', 'stopped before the first minute: nothing printed')
  assert.ok(Date.now() - started < 10_000, `returned at once (${Date.now() - started} ms)`)
})
