/**
 * config.workers / WORKERS: the default is the CPUs the process may use, lowered by a cgroup
 * CPU quota (v2 cpu.max, v1 cfs files) that os.availableParallelism() does not see.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { availableCpus, quotaCpus } from '../src/workers/cpus.ts'
import { resolveSettings } from '../src/settings.ts'
import { intakeHeader, parseIntakeHeader } from '../src/workers/intake.ts'

test('cgroup quotas: v2 cpu.max and v1 cfs files, fractions rounded up, no quota is null', () => {
  assert.equal(quotaCpus({ cpuMax: '200000 100000\n' }), 2)
  assert.equal(quotaCpus({ cpuMax: '150000 100000' }), 2)
  assert.equal(quotaCpus({ cpuMax: '50000 100000' }), 1)
  assert.equal(quotaCpus({ cpuMax: 'max 100000' }), null)
  assert.equal(quotaCpus({ cfsQuota: '400000', cfsPeriod: '100000' }), 4)
  assert.equal(quotaCpus({ cfsQuota: '-1', cfsPeriod: '100000' }), null)
  assert.equal(quotaCpus({}), null)
})

test('available CPUs: the quota of the process\'s own cgroup caps the scheduler\'s count', () => {
  const files = (map: Record<string, string>) => (path: string) => map[path]
  // A pod limited to 2 CPUs on a 64-core node (cgroup v2, its own cgroup mounted as the root).
  assert.equal(availableCpus(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '200000 100000\n' }), 64), 2)
  // The quota on a nested cgroup (v2), found through /proc/self/cgroup.
  assert.equal(availableCpus(files({ '/proc/self/cgroup': '0::/kubepods/pod1/c1\n', '/sys/fs/cgroup/kubepods/pod1/c1/cpu.max': '300000 100000' }), 64), 3)
  // cgroup v1.
  assert.equal(availableCpus(files({ '/proc/self/cgroup': '4:cpu,cpuacct:/docker/abc\n', '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '100000', '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000' }), 8), 1)
  // No quota: the scheduler's count; a quota above it does not raise it.
  assert.equal(availableCpus(files({ '/sys/fs/cgroup/cpu.max': 'max 100000' }), 6), 6)
  assert.equal(availableCpus(files({ '/sys/fs/cgroup/cpu.max': '800000 100000' }), 2), 2)
  assert.equal(availableCpus(files({}), 3), 3)
})

test('WORKERS wins over config.workers; default and auto are the CPUs; bad values are refused', () => {
  const cpus = () => 5
  assert.equal(resolveSettings({}, {}, false, cpus).workers, 5)
  assert.equal(resolveSettings({ workers: 3 }, {}, false, cpus).workers, 3)
  assert.equal(resolveSettings({ workers: 3 }, { WORKERS: '1' }, false, cpus).workers, 1)
  assert.equal(resolveSettings({ workers: 3 }, { WORKERS: 'auto' }, false, cpus).workers, 5)
  for (const bad of ['0', '-1', '1.5', 'many', '257']) {
    assert.throws(() => resolveSettings({}, { WORKERS: bad }, false, cpus), /WORKERS \/ config\.workers: invalid value/)
  }
})

test('WORKER_ACCEPT: reuseport where SO_REUSEPORT balances (Linux), else primary; bad values are refused', () => {
  const cpus = () => 2
  assert.equal(resolveSettings({}, {}, false, cpus).workerAccept, 'reuseport')
  assert.equal(resolveSettings({}, { WORKER_ACCEPT: 'primary' }, false, cpus).workerAccept, 'primary')
  assert.equal(resolveSettings({}, { WORKER_ACCEPT: 'auto' }, false, cpus).workerAccept, 'reuseport')
  assert.throws(() => resolveSettings({}, { WORKER_ACCEPT: 'kernel' }, false, cpus), /WORKER_ACCEPT: invalid value/)
})

test('intake header: only the process token with well-formed client addresses is believed', () => {
  const token = 'a'.repeat(64)
  const client = { bind: '0.0.0.0:8080', remoteAddress: '192.0.2.1', remotePort: 40000, remoteFamily: 'IPv4', localAddress: '127.0.0.1', localPort: 8080 }
  const line = (t: string, body: unknown) => Buffer.from(t + (typeof body === 'string' ? body : JSON.stringify(body)))
  assert.deepEqual(parseIntakeHeader(intakeHeader(token, client).subarray(0, -1), Buffer.from(token)), client)
  assert.equal(parseIntakeHeader(line('b'.repeat(64), client), Buffer.from(token)), 'bad token')
  assert.equal(parseIntakeHeader(line('a'.repeat(10), ''), Buffer.from(token)), 'bad token')
  assert.equal(parseIntakeHeader(line(token, '{nope'), Buffer.from(token)), 'header is not JSON')
  for (const bad of [null, [], { ...client, remotePort: 70000 }, { ...client, localPort: -1 }, { ...client, bind: 1 }, { ...client, remoteAddress: undefined }, { ...client, remotePort: '1' }]) {
    assert.equal(parseIntakeHeader(line(token, bad), Buffer.from(token)), 'header lacks the client addresses', JSON.stringify(bad))
  }
  // Extra fields are dropped, not passed on.
  assert.deepEqual(parseIntakeHeader(line(token, { ...client, admin: true }), Buffer.from(token)), client)
})

test('WORKER_START_TIMEOUT: how long a worker may take to load, 60 s unless given; not a duration is refused', () => {
  assert.equal(resolveSettings({}, {}, false, () => 2).workerStartTimeoutMs, 60_000)
  assert.equal(resolveSettings({}, { WORKER_START_TIMEOUT: '15m' }, false, () => 2).workerStartTimeoutMs, 900_000)
  assert.throws(() => resolveSettings({}, { WORKER_START_TIMEOUT: 'soon' }, false, () => 2), /^Error: WORKER_START_TIMEOUT: invalid duration "soon"/)
})
