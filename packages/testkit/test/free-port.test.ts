import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ephemeralRange, freePort, pickRange, reservePort } from '../src/free-port.ts'

test('picks come from below the kernel\'s ephemeral range, where no outgoing connection takes a port', async () => {
  assert.deepEqual(ephemeralRange('32768\t60999\n'), [32768, 60999])
  assert.deepEqual(ephemeralRange('garbage'), [32768, 60999])
  assert.deepEqual(pickRange([32768, 60999]), [20000, 32767])
  // A range starting low leaves room above it; one covering nearly everything leaves none.
  assert.deepEqual(pickRange([15000, 40000]), [40001, 65535])
  assert.deepEqual(pickRange([1024, 65000]), [20000, 65535])
  const [first] = ephemeralRange()
  for (let i = 0; i < 20; i++) {
    const port = await freePort()
    assert.ok(port >= 20000 && port < first, `${port} is below ${first}`)
  }
})

test('a port is never handed out twice, and never one something listens on', async () => {
  const seen = new Set<number>()
  for (let i = 0; i < 200; i++) {
    const port = await freePort()
    assert.ok(!seen.has(port), `${port} handed out twice`)
    seen.add(port)
  }
  // Every port picked can be bound on all addresses.
  const port = await freePort()
  const server = createServer()
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen({ port }, resolve) })
  server.close()
})

test('a reservation held by a live process is refused; one left by an exited process is taken over', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ports-test-'))
  // Ports below 20000, which freePort never picks (pickRange): this process's own picks in the
  // tests above are remembered as its own, and refused — 10002 among the 201 picks failed it in CI.
  try {
    // Another live process (the test runner, our parent) holds 10001.
    writeFileSync(join(dir, '10001'), String(process.ppid))
    assert.equal(reservePort(10001, dir), false)
    // A process that has exited held 10002.
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString()
    writeFileSync(join(dir, '10002'), gone)
    assert.equal(reservePort(10002, dir), true)
    assert.equal(readFileSync(join(dir, '10002'), 'utf8'), String(process.pid))
    // Ours now: not handed out again.
    assert.equal(reservePort(10002, dir), false)
    // Free: taken.
    assert.equal(reservePort(10003, dir), true)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('reservations are removed when the process exits', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ports-test-'))
  try {
    const url = new URL('../src/free-port.ts', import.meta.url).href
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', `const { reservePort } = await import(${JSON.stringify(url)}); console.log(reservePort(20005, ${JSON.stringify(dir)}))`], { encoding: 'utf8' })
    assert.equal(run.stdout.trim(), 'true', run.stderr)
    assert.throws(() => readFileSync(join(dir, '20005')), /ENOENT/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
