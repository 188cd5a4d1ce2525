/**
 * src/tick-maps.ts: with one tick object held, a full GC run while no other tick object is
 * alive leaves `process.nextTick`'s literal feedback monomorphic; without it, the same GC
 * turns it megamorphic (the V8 behaviour the hold works around: if the second test starts to
 * fail on a newer Node, V8 no longer loses that feedback and the hold may go). Read from V8's
 * own print of the function's feedback (`%DebugPrint`, in a child started with
 * --allow-natives-syntax): the slots of kind `DefineKeyedOwnPropertyInLiteral` are the tick
 * object literal's. The last test runs the `portico` binary itself (bin/portico.ts holds one).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from './lib/portico-child.ts'

const MODULE = new URL('../src/tick-maps.ts', import.meta.url).href

/** The child: some ticks, full GCs from timers (no tick object alive), ticks again, the feedback printed. */
function literalSlots (hold: boolean): string[] {
  const script = `
    import { holdTickObjectMaps, heldTickObject } from ${JSON.stringify(MODULE)}
    if (${hold}) holdTickObjectMaps()
    const debugPrint = new Function('f', '%DebugPrint(f)')
    const noop = () => {}
    const turn = () => new Promise(resolve => setImmediate(resolve))
    for (let i = 0; i < 20; i++) { for (let j = 0; j < 100; j++) process.nextTick(noop); await turn() }
    // Six, from timers: compiled code keeps the maps it uses for two more (--retain-maps-for-n-gc).
    for (let i = 0; i < 3; i++) { await new Promise(resolve => setTimeout(resolve, 2)); gc(); gc() }
    for (let j = 0; j < 100; j++) process.nextTick(noop)
    await turn()
    const held = heldTickObject()
    // On stderr: V8 prints to C's stdout, whose end was lost once Node had written to fd 1 itself.
    process.stderr.write('HELD ' + JSON.stringify(held === undefined ? null : Object.keys(held)) + '\\n')
    debugPrint(process.nextTick)
  `
  const dir = mkdtempSync(join(tmpdir(), 'tick-maps-'))
  let r
  try {
    writeFileSync(join(dir, 'child.mjs'), script)
    r = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', join(dir, 'child.mjs')], { encoding: 'utf8' })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(r.status, 0, r.stderr)
  const held = r.stderr.split('\n').find(l => l.startsWith('HELD '))
  assert.equal(held, hold ? 'HELD ["callback","args"]' : 'HELD null', 'the held object is a tick object')
  const slots = [...r.stdout.matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map(m => m[1]!)
  assert.ok(slots.length >= 3, `the tick literal's feedback slots in V8's print:\n${r.stdout}`)
  return slots
}

test('with a tick object held, the tick literal\'s feedback stays monomorphic through full GCs', () => {
  assert.deepEqual(new Set(literalSlots(true)), new Set(['MONOMORPHIC']))
})

test('without it, the same GCs turn the tick literal\'s feedback megamorphic (the V8 behaviour held against)', () => {
  assert.ok(literalSlots(false).includes('MEGAMORPHIC'))
})

/**
 * Preloaded into the binary: the first SIGUSR2 runs six full GCs from timers (no tick object
 * alive), the second prints nextTick's feedback; each says so on stderr.
 */
const PROBE = `
const debugPrint = new Function('f', '%DebugPrint(f)')
let signals = 0
process.on('SIGUSR2', async () => {
  if (++signals === 1) {
    for (let i = 0; i < 3; i++) { await new Promise(resolve => setTimeout(resolve, 2)); gc(); gc() }
    process.stderr.write('PROBE collected\\n')
  } else {
    debugPrint(process.nextTick)
    process.stderr.write('PROBE printed\\n')
  }
})
`

test('the portico binary holds one: its tick literal\'s feedback stays monomorphic through requests, full GCs and requests', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'tick-maps-bin-'))
  const backend = http.createServer((_req, res) => { res.end('hello world\n') })
  await new Promise<void>(resolve => backend.listen(0, '127.0.0.1', resolve))
  const backendPort = (backend.address() as { port: number }).port
  const port = await freePort()
  writeFileSync(join(dir, 'probe.mjs'), PROBE)
  writeFileSync(join(dir, 'config.yaml'), `gateways:\n  default: { port: ${port}, protocol: HTTP }\nroutes:\n  - name: r\n    backends:\n      - host: 127.0.0.1:${backendPort}\n`)
  // V8 prints to C's stdout: a file keeps all of it (see literalSlots).
  const out = openSync(join(dir, 'stdout'), 'w')
  const bin = fileURLToPath(new URL('../bin/portico.ts', import.meta.url))
  const child = spawn(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--import', join(dir, 'probe.mjs'), bin, '-f', join(dir, 'config.yaml')], {
    env: { ...process.env, ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off', LOG_LEVEL: 'warn', WORKERS: '1' },
    stdio: ['ignore', out, 'pipe']
  })
  closeSync(out)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 10 })
  t.after(async () => {
    agent.destroy()
    if (child.exitCode === null) {
      child.kill('SIGKILL')
      await new Promise(resolve => child.once('exit', resolve))
    }
    backend.close()
    rmSync(dir, { recursive: true, force: true })
  })
  let stderr = ''
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString() })
  const said = async (line: string): Promise<void> => {
    for (let i = 0; i < 200 && !stderr.includes(line); i++) await new Promise(resolve => setTimeout(resolve, 50))
    assert.ok(stderr.includes(line), `no "${line}" from the probe: ${stderr}`)
  }
  const get = (): Promise<void> => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent }, res => { res.resume(); res.on('end', resolve) }).on('error', reject)
  })
  const requests = async (n: number): Promise<void> => {
    let sent = 0
    await Promise.all(Array.from({ length: 10 }, async () => { while (sent++ < n) await get() }))
  }
  for (let i = 0; ; i++) {
    try {
      await get()
      break
    } catch (err) {
      if (i === 200) throw err
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
  await requests(500)
  child.kill('SIGUSR2')
  await said('PROBE collected')
  await requests(500)
  child.kill('SIGUSR2')
  await said('PROBE printed')
  child.kill('SIGTERM')
  await new Promise(resolve => child.once('exit', resolve))
  const slots = [...readFileSync(join(dir, 'stdout'), 'utf8').matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map(m => m[1]!)
  assert.ok(slots.length >= 3, `the tick literal's feedback slots in V8's print: ${stderr}`)
  assert.deepEqual(new Set(slots), new Set(['MONOMORPHIC']))
})
