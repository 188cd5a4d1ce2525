/**
 * Every thread that serves requests renews Node's EventEmitter.init once it serves
 * (@portico/engine's util/emitter-init.ts says why): `portico -f` with one event loop, and
 * each data-plane worker with two. Read from inside the running process by a preloaded probe
 * (execArgv is inherited, so worker threads run it too).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { waitUntil } from '@portico/testkit/wait'
import { freePort, porticoStarted } from './lib/portico-child.ts'
import { START_FLAGS } from '../src/v8-flags.ts'

const BIN = fileURLToPath(new URL('../bin/portico.ts', import.meta.url))
const PROXY_DIR = fileURLToPath(new URL('..', import.meta.url))

/** Each thread's `init` (`node` or `renewed`) as the probe last wrote it. */
function lastByThread (file: string): Map<string, string> {
  const last = new Map<string, string>()
  if (!existsSync(file)) return last
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const at = line.lastIndexOf(' ')
    if (at > 0) last.set(line.slice(0, at), line.slice(at + 1))
  }
  return last
}

/**
 * Each thread's `init` once the proxy has started and `expected` holds of what the probe
 * wrote (or 10 s passed: the test's assertion then says what was seen). Waiting for the file
 * rather than a fixed time: under load a worker renews later than any fixed sleep.
 */
async function initByThread (workers: string, expected: (threads: Map<string, string>) => boolean): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'portico-emitter-init-'))
  const seen = join(dir, 'init.txt')
  // Preloaded, so it holds Node's own init before Portico runs.
  const probe = 'data:text/javascript,' + encodeURIComponent(`
import { EventEmitter } from 'node:events'
import { appendFileSync } from 'node:fs'
import { isMainThread, threadId } from 'node:worker_threads'
const thread = isMainThread ? 'main' : 'thread ' + threadId
const nodeInit = EventEmitter.init
setInterval(() => appendFileSync(${JSON.stringify(seen)}, thread + ' ' + (EventEmitter.init === nodeInit ? 'node' : 'renewed') + '\\n'), 50).unref()
`)
  const port = await freePort()
  writeFileSync(join(dir, 'config.yaml'), `gateways:\n  default: { port: ${port}, protocol: HTTP }\nroutes:\n  - backends: [{ host: 127.0.0.1:9 }]\n`)
  const child = spawn(process.execPath, [...START_FLAGS, '--import', probe, BIN, '-f', join(dir, 'config.yaml')], {
    cwd: PROXY_DIR,
    env: { ...process.env, LOG_LEVEL: 'info', ADMIN_ADDR: '127.0.0.1:0', STATS_ADDR: '127.0.0.1:0', READINESS_ADDR: '127.0.0.1:0', WORKERS: workers },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  try {
    await porticoStarted(child)
    await waitUntil(() => expected(lastByThread(seen)), 10_000, 'the probe to see the expected threads').catch(() => {})
    return lastByThread(seen)
  } finally {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
}

test('portico -f with one event loop renews EventEmitter.init once it serves', async () => {
  const threads = await initByThread('1', seen => seen.get('main') === 'renewed')
  assert.equal(threads.get('main'), 'renewed')
})

test('with two data-plane workers (WORKERS=3: the primary serves as the third loop), each worker renews it too', async () => {
  const workersRenewed = (threads: Map<string, string>): number => [...threads].filter(([thread, state]) => thread !== 'main' && state === 'renewed').length
  const threads = await initByThread('3', seen => workersRenewed(seen) >= 2 && seen.get('main') === 'renewed')
  const renewed = [...threads].filter(([thread, state]) => thread !== 'main' && state === 'renewed')
  // Two workers, and nothing else that serves (an export thread or config loader would not run here).
  assert.equal(renewed.length, 2, JSON.stringify([...threads]))
  assert.equal(threads.get('main'), 'renewed', 'the primary serves too')
})
