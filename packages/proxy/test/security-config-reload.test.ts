/**
 * Reload input hardening in the proxy (issue 14, items 4 and 9): the file watcher reports a
 * text only once it has settled (a write in pieces is one change), and large texts load in
 * a worker thread with the same result as inline; so does any text that names a file
 * (issue 49: reading a referenced file never blocks the event loop).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs, { appendFileSync, mkdtempSync, rmSync, writeFileSync, type PathLike } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfigText } from '@portico/engine'
import { watchConfigFile } from '../src/file-source.ts'
import { loadConfigOffThread } from '../src/config-loader.ts'

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

function config (routes: number): string {
  let text = 'gateways:\n  default: { port: 3000, address: 127.0.0.1 }\nroutes:\n'
  for (let i = 0; i < routes; i++) text += `  - name: r${i}\n    matches: [{ path: { pathPrefix: /r/${i} } }]\n    backends: [{ host: "127.0.0.1:${8000 + i}" }]\n`
  return text
}

test('the watcher reports a file written in pieces once, whole', { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-watch-'))
  const file = join(dir, 'config.yaml')
  writeFileSync(file, config(1))
  const seen: string[] = []
  const errors: Error[] = []
  // A window much longer than the pauses below, so a loaded machine does not flake.
  const watch = watchConfigFile({ path: file, debounceMs: 400, onChange: t => seen.push(t), onError: e => errors.push(e) })
  watch.setCurrent(config(1))
  try {
    const next = config(40)
    const third = Math.floor(next.length / 3)
    // Truncate, then three pieces with pauses: the watcher must never report a partial text.
    writeFileSync(file, '')
    await sleep(150)
    appendFileSync(file, next.slice(0, third))
    await sleep(150)
    appendFileSync(file, next.slice(third, 2 * third))
    await sleep(150)
    appendFileSync(file, next.slice(2 * third))
    const deadline = Date.now() + 10_000
    while (seen.length === 0 && Date.now() < deadline) await sleep(20)
    await sleep(1_000)
    assert.deepEqual(errors, [])
    assert.equal(seen.length, 1, `reported ${seen.length} versions: ${seen.map(s => s.length).join(', ')} chars`)
    assert.equal(seen[0], next)
  } finally {
    watch.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the watcher confirms a read: a change during the window is read again, not reported half-done', { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-watch-'))
  const file = join(dir, 'config.yaml')
  writeFileSync(file, config(1))
  const seen: string[] = []
  const watch = watchConfigFile({ path: file, debounceMs: 300, onChange: t => seen.push(t), onError: () => {} })
  watch.setCurrent(config(1))
  try {
    const next = config(20)
    // The first piece sits longer than one window (so it is read), but the rest arrives
    // before the confirming read: only the whole file is reported.
    writeFileSync(file, next.slice(0, 100))
    await sleep(450)
    appendFileSync(file, next.slice(100))
    const deadline = Date.now() + 10_000
    while (seen.length === 0 && Date.now() < deadline) await sleep(20)
    await sleep(800)
    assert.deepEqual(seen.map(s => s.length), [next.length])
  } finally {
    watch.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a large text loads in a worker thread with the same result as inline', { timeout: 60_000 }, async () => {
  const text = config(300)
  const inline = loadConfigText(text, { baseDir: '/' })
  const threaded = await loadConfigOffThread(text, { baseDir: '/', inlineBelow: 0 })
  assert.equal(threaded.ok, true)
  assert.deepEqual(threaded, inline)
  const broken = await loadConfigOffThread(text.replace('pathPrefix: /r/7 ', 'pathPrefix: r7 '), { baseDir: '/', inlineBelow: 0 })
  assert.equal(broken.ok, false)
  if (!broken.ok) assert.deepEqual(broken.diagnostics.map(d => [d.path.join('.'), d.line]), [['routes.7.matches.0.path.pathPrefix', 26]])
  const empty = await loadConfigOffThread('# nothing\n'.repeat(100), { baseDir: '/', inlineBelow: 0 })
  assert.equal(empty.ok, false)
})

test('a small text that names files loads in the worker: no file it names is opened on the event loop', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-files-'))
  const htpasswd = join(dir, 'users.htpasswd')
  writeFileSync(htpasswd, 'alice:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\n')
  const text = `gateways:\n  default: { port: 3000, address: 127.0.0.1 }\nroutes:\n  - policies: { basicAuth: { htpasswd: { file: users.htpasswd } } }\n    backends: [{ host: "127.0.0.1:8000" }]\n`
  // Every open on this thread is seen (the worker thread has its own fs bindings).
  const opened: string[] = []
  const open = fs.openSync
  fs.openSync = ((path: PathLike, ...rest: unknown[]) => {
    opened.push(String(path))
    return (open as (...args: unknown[]) => number)(path, ...rest)
  }) as typeof fs.openSync
  syncBuiltinESMExports()
  let result
  try {
    result = await loadConfigOffThread(text, { baseDir: dir })
  } finally {
    fs.openSync = open
    syncBuiltinESMExports()
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(result.ok, true, JSON.stringify(result))
  assert.deepEqual(opened.filter(p => p.startsWith(dir)), [], 'the htpasswd file was read on the main thread')
  if (result.ok) assert.match(JSON.stringify(result.config.ir), /alice/)
  // A text that names no file still loads inline (no worker to start for a few ms of work).
  assert.equal((await loadConfigOffThread(config(2), { baseDir: '/' })).ok, true)
})
