/**
 * util/emitter-init.ts: the copies of Node's EventEmitter.init that keep its inline caches to
 * the classes a serving process builds.
 *   - On the Node Portico runs, the copies are in use (a Node whose `init` changed fails here,
 *     so the copies are checked against it again);
 *   - what `init` leaves on an emitter is the same after `renewEmitterInit()` (fields, their
 *     order and values; shape mode; captured rejections; a bad option refused alike);
 *   - a Worker from `startWorkerThread` has the same fields as a plain one, and its messages,
 *     errors and exit arrive; a construction that throws leaves `Worker` as it was;
 *   - in fresh processes, V8's feedback for `init`: with three classes seen (as a proxy
 *     serving HTTP has) it stays polymorphic after `startWorkerThread` and goes megamorphic
 *     after a plain `new Worker()`; with seven (a default start-up) it is megamorphic, and
 *     after `renewEmitterInit()` the classes built from then on leave it polymorphic.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { promisify } from 'node:util'
import { Worker } from 'node:worker_threads'
import { EMITTER_INIT_COPIED, startWorkerThread } from '../src/util/emitter-init.ts'

const run = promisify(execFile)
const dir = mkdtempSync(join(tmpdir(), 'emitter-init-'))
const MODULE = new URL('../src/util/emitter-init.ts', import.meta.url).href

/** A thread that echoes messages, and throws when told to. */
const echo = join(dir, 'echo.mjs')
writeFileSync(echo, `
  import { parentPort } from 'node:worker_threads'
  parentPort.on('message', m => {
    if (m === 'throw') throw new Error('told to')
    parentPort.postMessage(m)
  })
`)
const ECHO = new URL(`file://${echo}`)

type Fields = Record<string | symbol, unknown>

/** An emitter's own fields: key and value, functions and objects by type (their identity differs per object). Also run, as source, in the renewal test's process. */
function fieldsOf (o: object): Array<[string, unknown]> {
  return Reflect.ownKeys(o).map(k => {
    const v = (o as Fields)[k]
    return [String(k), v !== null && (typeof v === 'object' || typeof v === 'function') ? `${typeof v} ${Object.getPrototypeOf(v) === null ? 'null-prototype' : ''}` : v]
  })
}

test('the copies of EventEmitter.init are in use on this Node (if not, Node changed init: check the copies against it)', () => {
  assert.equal(EMITTER_INIT_COPIED, true)
})

test('after renewEmitterInit, emitters get the same fields from init as before, and a bad option is refused alike', async () => {
  // In a process of its own: the renewal is for the rest of the process's life.
  const script = join(dir, 'fields.mjs')
  writeFileSync(script, `
    import { EventEmitter } from 'node:events'
    import { Readable } from 'node:stream'
    import { renewEmitterInit } from ${JSON.stringify(MODULE)}
    ${String(fieldsOf)}
    const fields = fieldsOf
    class Preset extends EventEmitter {}
    Preset.prototype._events = undefined
    const make = () => ({
      plain: fields(new EventEmitter()),
      capture: fields(new EventEmitter({ captureRejections: true })),
      readable: fields(new Readable()),
      preset: fields(new Preset()),
      // Fields of its own before init (shape mode).
      own: (() => { const o = Object.create(EventEmitter.prototype); o._events = { x: undefined }; o._maxListeners = 3; EventEmitter.init.call(o); return fields(o) })(),
      refused: (() => { try { new EventEmitter({ captureRejections: 'yes' }); return 'accepted' } catch (err) { return err.code } })()
    })
    const before = make()
    const renewed = renewEmitterInit()
    const after = make()
    process.stdout.write(JSON.stringify({ renewed, before, after }))
  `)
  const { stdout } = await run(process.execPath, [script], { timeout: 30_000 })
  const result = JSON.parse(stdout) as { renewed: boolean, before: Record<string, unknown>, after: Record<string, unknown> }
  assert.equal(result.renewed, true)
  assert.deepEqual(result.after, result.before)
  assert.equal(result.before.refused, 'ERR_INVALID_ARG_TYPE')
})

test('a Worker from startWorkerThread is a plain Worker: its fields in order, messages, errors and exit', { timeout: 60_000 }, async () => {
  const plain = new Worker(ECHO, { stdin: false })
  const mine = startWorkerThread(ECHO, { stdin: false })
  try {
    assert.equal(Object.getPrototypeOf(Worker), EventEmitter)
    assert.ok(mine instanceof Worker && mine instanceof EventEmitter)
    assert.deepEqual(fieldsOf(mine), fieldsOf(plain))
    mine.postMessage('hello')
    assert.deepEqual(await once(mine, 'message'), ['hello'])
    // Both listeners before the message: 'exit' can follow 'error' before this function
    // resumes, and a listener added after it would wait forever (a CI run hung here).
    const failed = once(mine, 'error') as Promise<[Error]>
    // (Not events.once: it rejects when 'error' comes first, which here it does.)
    const exited = new Promise<[number]>(resolve => mine.once('exit', (code: number) => resolve([code])))
    mine.postMessage('throw')
    const [err] = await failed
    assert.equal(err.message, 'told to')
    const [code] = await exited
    assert.equal(code, 1)
  } finally {
    await plain.terminate()
    await mine.terminate()
  }
})

test('a construction that throws leaves Worker\'s super constructor as it was', () => {
  assert.throws(() => startWorkerThread(new URL('file:///no/such/worker.mjs'), { eval: true } as never))
  assert.equal(Object.getPrototypeOf(Worker), EventEmitter)
  assert.ok(new Readable() instanceof EventEmitter)
})

/**
 * Whether any of `init`'s inline caches is megamorphic at the end of `body`, run in a fresh
 * process (V8's own print of the function's feedback; `classes(n)` builds n emitter classes
 * 50 times each, enough for V8 to keep feedback).
 */
async function initMegamorphic (name: string, body: string): Promise<boolean> {
  const file = join(dir, `${name}.mjs`)
  writeFileSync(file, `
    import { EventEmitter } from 'node:events'
    import { Worker } from 'node:worker_threads'
    import { renewEmitterInit, startWorkerThread } from ${JSON.stringify(MODULE)}
    const classes = n => {
      const made = Array.from({ length: n }, () => class extends EventEmitter {})
      for (let i = 0; i < 50; i++) for (const C of made) new C()
    }
    ${body};
    %DebugPrint(EventEmitter.init);
  `)
  // The threads print nothing; their stdio is not piped into the process's (as the export
  // thread's is not), which would build the process's stdout stream here.
  const { stdout } = await run(process.execPath, ['--allow-natives-syntax', file], { timeout: 30_000, maxBuffer: 1 << 24 })
  const feedback = stdout.slice(stdout.indexOf('- feedback vector:'))
  assert.match(feedback, /- slot #\d+ LoadProperty/, `no feedback printed:\n${stdout.slice(0, 2000)}`)
  return /MEGAMORPHIC/.test(feedback)
}

const THREAD_OPTIONS = `new URL(${JSON.stringify(ECHO.href)}), { stdin: false, stdout: true, stderr: true }`

test('with three classes seen, init stays polymorphic after startWorkerThread and goes megamorphic after new Worker()', async () => {
  assert.equal(await initMegamorphic('worker-mine', `classes(3); await startWorkerThread(${THREAD_OPTIONS}).terminate()`), false)
  assert.equal(await initMegamorphic('worker-plain', `classes(3); await new Worker(${THREAD_OPTIONS}).terminate()`), true)
})

test('with seven classes seen, init is megamorphic; after renewEmitterInit the next three leave it polymorphic, a thread too', async () => {
  assert.equal(await initMegamorphic('start-up', 'classes(7); classes(3)'), true)
  assert.equal(await initMegamorphic('renewed', `classes(7); renewEmitterInit(); classes(3); await startWorkerThread(${THREAD_OPTIONS}).terminate()`), false)
})
