/**
 * The trace TUI in a real terminal: porticoctl runs inside tmux (its own server socket)
 * against a running standalone portico; the test types keys with send-keys and reads the
 * screen with capture-pane, polling with a bounded timeout instead of sleeping.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { freePort, startPortico, type PorticoProcess } from '@portico/testkit/portico'
import { startEchoBackend, type Backend } from '@portico/testkit/backends'
import { findTool } from '@portico/testkit/tools'
import { PORTICOCTL_BIN } from '@portico/testkit/porticoctl'
import { FIXTURES } from './fixtures.ts'

const tmuxPath = findTool('TMUX_BIN', 'tmux')
// A tmux server of our own (its socket in a temp dir), so no user's sessions are touched.
const socketDir = mkdtempSync(join(tmpdir(), 'porticoctl-tmux-'))
const SOCKET = join(socketDir, 'tmux.sock')
const SESSION = 'ctl'

function tmux (...args: string[]): string {
  const r = spawnSync(tmuxPath!, ['-S', SOCKET, ...args], { encoding: 'utf8', timeout: 5000 })
  if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}

function screen (session = SESSION): string {
  return tmux('capture-pane', '-p', '-t', session)
}

/**
 * Polls the screen until `pattern` is on it and the screen has stopped changing (two
 * captures 50 ms apart alike), so assertions never read a half-drawn pane; 10 s at most.
 */
async function waitScreen (pattern: RegExp, session = SESSION, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let previous: string | null = null
  for (;;) {
    const text = screen(session)
    if (pattern.test(text) && text === previous) return text
    previous = pattern.test(text) ? text : null
    if (Date.now() > deadline) throw new Error(`screen never showed ${String(pattern)} (or never settled); it shows:\n${text}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

function keys (...k: string[]): void {
  tmux('send-keys', '-t', SESSION, ...k)
}

function skipWithoutTmux (t: { skip: (why: string) => void }): boolean {
  if (tmuxPath !== null) return false
  if (process.env.CI === 'true') throw new Error('tmux not found')
  t.skip('tmux not found')
  return true
}

function quote (s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`
}

let backend: Backend
let portico: PorticoProcess
let adminAddr: string

before(async () => {
  if (tmuxPath === null) return
  backend = await startEchoBackend('app')
  adminAddr = `127.0.0.1:${await freePort()}`
  portico = await startPortico({
    env: { ADMIN_ADDR: adminAddr },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' } },
      routes: [
        { name: 'dead', matches: [{ path: { pathPrefix: '/dead' } }], backends: [{ host: '127.0.0.1:1' }] },
        { name: 'app', matches: [{ path: { pathPrefix: '/app' } }], policies: { requestHeaderModifier: { set: { 'x-route': 'app' } } }, backends: [{ host: backend.host }] }
      ]
    })
  })
})

after(async () => {
  if (tmuxPath !== null) spawnSync(tmuxPath, ['-S', SOCKET, 'kill-server'], { stdio: 'ignore' })
  rmSync(socketDir, { recursive: true, force: true })
  await portico?.stop()
  await backend?.close()
})

test('the trace TUI: list, pane switch, each detail mode, scrolling, quit', async t => {
  if (skipWithoutTmux(t)) return
  const command = `${quote(process.execPath)} ${quote(PORTICOCTL_BIN)} proxy trace --local --admin-addr ${adminAddr}; echo "EXIT=$?"; sleep 60`
  tmux('new-session', '-d', '-s', SESSION, '-x', '200', '-y', '50', 'env', 'TERM=xterm-256color', 'sh', '-c', command)

  // Watch mode: waiting, then the request another client sends.
  await waitScreen(/waiting for the next request from any client/)
  const res = await request(`${portico.url}/app/tui?x=1`)
  assert.equal(res.statusCode, 200)
  await res.body.text()
  let s = await waitScreen(/trace complete: 16 events/)
  assert.match(s, /▸ Events \(16\)/, 'the list has the focus')
  assert.match(s, /#\s+Type\s+Summary/)
  assert.match(s, /›\s+1\s+Request Start\s+GET \/app\/tui\?x=1/)
  for (const row of [/ 2\s+Snapshot\s+request · initial request/, / 3\s+Policies\s+gateway: none/, / 5\s+Route\s+selected app \(2 evaluated\)/,
    / 6\s+Policies\s+route: requestHeaderModifier/, /10\s+Backend Start\s+target=127\.0\.0\.1:\d+/, /11\s+Backend Result\s+status=200/, /16\s+Request Done\s+status=200/]) {
    assert.match(s, row)
  }
  assert.match(s, /Detail #1 Request Start · mode: \[e\] EVENT/)
  assert.match(s, /"type": "requestStarted"/)

  // Down to the route selection: event mode shows the raw event.
  keys('Down', 'Down', 'Down', 'Down')
  s = await waitScreen(/Detail #5 Route/)
  assert.match(s, /›\s+5\s+Route/)
  assert.match(s, /"selectedRoute": "app"/)
  assert.match(s, /"evaluatedRoutes": \[/)

  // s: the snapshot at that point (the latest, after the gateway policies).
  keys('s')
  s = await waitScreen(/\[s\] SNAPSHOT/)
  assert.match(s, /request snapshot · gateway policies \(the latest snapshot at event #5: #4\)/)
  assert.match(s, /pathAndQuery: \/app\/tui\?x=1/)

  // d: the diff of that snapshot against the previous request snapshot.
  keys('d')
  s = await waitScreen(/\[d\] DIFF/)
  assert.match(s, /--- initial request/)
  assert.match(s, /\+\+\+ gateway policies/)
  assert.match(s, /\+\s+x-forwarded-for: 127\.0\.0\.1/)

  // The route policies' snapshot: its diff shows the header the route set (its value
  // redacted: request header values policies set are, unless the header is a public one).
  keys('Down', 'Down')
  s = await waitScreen(/Detail #7 Snapshot/)
  assert.match(s, /request snapshot · route policies \(#7\) against gateway policies \(#4\)/)
  assert.match(s, /\+\s+x-route: "?<redacted>"?/)

  // e on a policy selection: 20+ lines, more than the pane shows; tab and scroll.
  keys('Up', 'e')
  s = await waitScreen(/Detail #6 Policies · mode: \[e\] EVENT.*lines 1-\d+ of \d+/)
  keys('Tab')
  s = await waitScreen(/▸ Detail #6/)
  assert.doesNotMatch(s, /▸ Events/)
  keys('Down', 'Down')
  s = await waitScreen(/lines 3-\d+ of \d+/)
  assert.match(s, /›\s+6\s+Policies/, 'scrolling the detail pane does not move the selection')
  keys('Tab')
  await waitScreen(/▸ Events/)

  // q quits with status 0.
  keys('q')
  await waitScreen(/EXIT=0/)
})

test('the TUI replays a saved trace (-f) on a terminal', async t => {
  if (skipWithoutTmux(t)) return
  const command = `${quote(process.execPath)} ${quote(PORTICOCTL_BIN)} proxy trace -f ${quote(`${FIXTURES}get-200.jsonl`)}; echo "REPLAY_EXIT=$?"; sleep 60`
  tmux('new-session', '-d', '-s', 'replay', '-x', '120', '-y', '30', 'env', 'TERM=xterm-256color', 'sh', '-c', command)
  const wait = async (pattern: RegExp) => await waitScreen(pattern, 'replay')
  let s = await wait(/replay of .*get-200\.jsonl: 16 events/)
  assert.match(s, /Events \(16\)  1-\d+/, 'a short terminal scrolls the list')
  tmux('send-keys', '-t', 'replay', 'End', 's')
  s = await wait(/Detail #16 Request Done · mode: \[e\] event  \[s\] SNAPSHOT/)
  assert.match(s, /›\s+16\s+Request Done\s+status=200/)
  assert.match(s, /response snapshot · final response \(the latest snapshot at event #16: #14\)/)
  tmux('send-keys', '-t', 'replay', 'q')
  await wait(/REPLAY_EXIT=0/)
})
