/**
 * The JSON logs' writer (src/line-writer.ts): lines arrive whole and in order, batched;
 * a destination that does not drain costs bounded memory and says what it dropped.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, write as writeFn, writeSync as writeSyncFn } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LineWriter } from '../src/line-writer.ts'

function withFile (fn: (fd: number, read: () => string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'portico-lines-'))
  const path = join(dir, 'out.log')
  const fd = openSync(path, 'w')
  return fn(fd, () => readFileSync(path, 'utf8')).finally(() => {
    closeSync(fd)
    rmSync(dir, { recursive: true, force: true })
  })
}

async function until (what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`)
    await new Promise(resolve => setTimeout(resolve, 5))
  }
}

test('lines arrive whole and in order, in batches of at most maxWrite bytes (a longer line alone)', async () => {
  await withFile(async (fd, read) => {
    const w = new LineWriter({ fd, minLength: 100, maxWrite: 256 })
    const lines = Array.from({ length: 500 }, (_, i) => `{"n":${i},"s":"${'é'.repeat(i % 40)}"}\n`)
    lines.splice(250, 0, `{"long":"${'x'.repeat(1000)}"}\n`)
    for (const l of lines) w.write(l)
    // (Logs calls flush() every 250 ms: what is left under minLength goes then.)
    await until('all lines written', () => { w.flush(); return read() === lines.join('') })
  })
})

test('each write is whole lines of at most maxWrite bytes — cut by bytes, not characters — or one longer line', async () => {
  await withFile(async (fd, read) => {
    const writes: Buffer[] = []
    const io = {
      write: ((f: number, b: Buffer, o: number, n: number, p: null, cb: (err: NodeJS.ErrnoException | null, n: number) => void) => {
        writes.push(Buffer.from(b.subarray(o, o + n)))
        writeFn(f, b, o, n, p, cb)
      }) as typeof writeFn,
      writeSync: writeSyncFn
    }
    const w = new LineWriter({ fd, minLength: 2000, maxWrite: 1024, io })
    // Two bytes a character: a batch of 1024 characters is ~2048 bytes.
    const lines = Array.from({ length: 300 }, (_, i) => `{"n":${i},"s":"${'é'.repeat(20 + (i % 60))}"}\n`)
    lines.splice(150, 0, `{"long":"${'é'.repeat(2000)}"}\n`)
    for (const l of lines) w.write(l)
    // (Logs calls flush() every 250 ms: what is left under minLength goes then.)
    await until('all lines written', () => { w.flush(); return read() === lines.join('') })
    for (const b of writes) {
      assert.equal(b.at(-1), 10, 'a write ends at a line end')
      const text = b.toString('utf8')
      assert.ok(b.length <= 1024 || text.indexOf('\n') === text.length - 1, `a ${b.length}-byte write holds one line only if it is longer than maxWrite`)
    }
    assert.ok(writes.length >= 1 + Buffer.byteLength(lines.join('')) / 1024, `${writes.length} writes`)
  })
})

test('batches are encoded into a few buffers, reused once written, not a new one each (each was a malloc)', async () => {
  await withFile(async (fd, read) => {
    const buffers = new Set<ArrayBufferLike>()
    // Batches sealed and waiting behind the write in flight, at most: on a loaded machine a
    // write can take long enough for batches to queue, and each holds a buffer, as it must.
    let mostWaiting = 0
    const io = {
      write: ((f: number, b: Buffer, o: number, n: number, p: null, cb: (err: NodeJS.ErrnoException | null, n: number) => void) => {
        buffers.add(b.buffer)
        mostWaiting = Math.max(mostWaiting, (w as unknown as { ready: Buffer[] }).ready.length)
        writeFn(f, b, o, n, p, cb)
      }) as typeof writeFn,
      writeSync: writeSyncFn
    }
    // The access log's sizes in a one-loop proxy (ops/src/logs.ts).
    const w = new LineWriter({ fd, minLength: 16000, maxWrite: 16384, io })
    const lines = Array.from({ length: 6000 }, (_, i) => `{"n":${i},"s":"${i % 7 === 0 ? 'é€😀' : 'x'.repeat(i % 300)}"}\n`)
    // Paced as requests come, so writes keep up: lines arrive while one is in flight, but no
    // backlog builds (a backlog takes a buffer per waiting batch, as it must).
    for (const [i, l] of lines.entries()) {
      w.write(l)
      if (i % 20 === 0) await new Promise(resolve => setTimeout(resolve, 1))
    }
    await until('all lines written', () => { w.flush(); return read() === lines.join('') })
    const batches = Math.ceil(Buffer.byteLength(lines.join('')) / 16384)
    // One being filled besides those queued (the one being written among them) when the
    // writes kept up: 3 on a quiet machine; never one per batch.
    assert.ok(buffers.size <= Math.max(3, 1 + mostWaiting), `${buffers.size} buffers with at most ${mostWaiting} batches queued`)
    assert.ok(buffers.size * 4 <= batches, `${buffers.size} buffers for ${batches}+ batches`)
  })
})

test('flushSync writes what waits at once', async () => {
  await withFile(async (fd, read) => {
    const w = new LineWriter({ fd, minLength: 1_000_000, maxWrite: 16384 })
    w.write('{"a":1}\n')
    w.write('{"b":2}\n')
    assert.equal(read(), '', 'below minLength nothing is written yet')
    w.flushSync()
    assert.equal(read(), '{"a":1}\n{"b":2}\n')
  })
})

test('flushSync waits out a full stdout (EAGAIN) and writes everything', async () => {
  await withFile(async (fd, read) => {
    let refusals = 2
    const io = {
      write: writeFn,
      writeSync: ((f: number, b: Buffer, o: number, n: number) => {
        if (refusals-- > 0) throw Object.assign(new Error('EAGAIN'), { code: 'EAGAIN' })
        return writeSyncFn(f, b, o, Math.min(n, 5)) // and short writes
      }) as typeof writeSyncFn
    }
    const w = new LineWriter({ fd, minLength: 1_000_000, maxWrite: 16384, io })
    w.write('{"a":1}\n')
    w.write('{"b":2}\n')
    w.flushSync()
    assert.equal(read(), '{"a":1}\n{"b":2}\n')
  })
})

test('beyond maxBuffered, lines are dropped and counted; a line says so once writing resumes', async () => {
  await withFile(async (fd, read) => {
    const w = new LineWriter({ fd, minLength: 1_000_000, maxWrite: 16384, maxBuffered: 100 })
    const kept: string[] = []
    for (let i = 0; i < 20; i++) {
      const line = `{"n":${i}}\n`
      if (w.write(line)) kept.push(line)
    }
    assert.ok(kept.length > 0 && kept.length < 20, `${kept.length} kept`)
    w.flush()
    await until('the drop reported', () => read().includes('log lines dropped'))
    const out = read().split('\n').filter(l => l !== '')
    assert.deepEqual(out.slice(0, kept.length), kept.map(l => l.trimEnd()))
    const report = JSON.parse(out.at(-1)!) as { level: number, dropped: number, component: string }
    assert.equal(report.level, 40)
    assert.equal(report.component, 'logs')
    assert.equal(report.dropped, 20 - kept.length)
  })
})

test('threads sharing a pipe with maxWrite PIPE_BUF: no line is ever cut by another writer\'s, whatever its characters', async () => {
  const writer = new URL('../src/line-writer.ts', import.meta.url).href
  // Four threads write 3,000 lines of 300–600 bytes each to the same stdout, a pipe read
  // here; a third of the lines are two bytes a character (é), so batches sized in characters
  // come out over 4096 bytes and must be cut at line ends.
  const script = `
import { Worker, isMainThread, threadId } from 'node:worker_threads'
import { LineWriter } from ${JSON.stringify(writer)}
if (isMainThread) {
  for (let i = 0; i < 4; i++) new Worker(new URL(import.meta.url))
} else {
  const w = new LineWriter({ fd: 1, minLength: 4000, maxWrite: 4096 })
  for (let i = 0; i < 3000; i++) {
    w.write(JSON.stringify({ thread: threadId, n: i, pad: (i % 3 === 0 ? 'é' : 'p').repeat(250 + (i % 50)) }) + '\\n')
    if (i % 100 === 0) await new Promise(resolve => setImmediate(resolve))
  }
  w.flush()
  await new Promise(resolve => setTimeout(resolve, 200))
  w.flushSync()
}
`
  const { spawn } = await import('node:child_process')
  const dir = mkdtempSync(join(tmpdir(), 'portico-lines-'))
  const file = join(dir, 'writers.mjs')
  const { writeFileSync } = await import('node:fs')
  writeFileSync(file, script)
  try {
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d })
    // A reader that lags keeps the pipe full, so writers block part-way: where a write
    // larger than PIPE_BUF would be split and interleaved.
    const lag = setInterval(() => { if (child.stdout.isPaused()) child.stdout.resume(); else child.stdout.pause() }, 5)
    await new Promise<void>(resolve => child.once('close', () => resolve()))
    clearInterval(lag)
    const lines = out.split('\n').filter(l => l !== '')
    const bad = lines.filter(l => { try { JSON.parse(l); return false } catch { return true } })
    assert.deepEqual(bad.map(l => l.slice(0, 80)), [])
    assert.equal(lines.length, 4 * 3000)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
