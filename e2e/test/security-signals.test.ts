/**
 * Signals (issue 14, item 8): SIGHUP used to end the process at once (Node's default), with
 * no log line and no drain. Now it re-reads the config file and keeps serving.
 *
 * The config path is a symlink into another directory (as a Kubernetes ConfigMap mount is),
 * so an edit of the target is not seen by the directory watcher: only SIGHUP applies it.
 *
 * Stopping from a terminal (issue 49): Ctrl-C in a real pty (util-linux `script`) of
 * `pnpm exec portico` and of `./scripts/quickstart` drains an in-flight request and frees
 * the port (pnpm used to pass the keypress on as a SIGTERM 1 ms later, taken as a second
 * signal: exit at once); and the gateway run by pnpm's non-exec shim for `node` stops when
 * the shim is stopped, instead of living on with its ports.
 */

import { after, before, describe, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, symlinkSync, writeFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { configText, freePort, gateway, makeTempDir, PORTICO_BIN, type PorticoProcess, processAlive, QUIET_ENV, REPO_ROOT, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { nodeRequest } from '@portico/testkit/client'
import { deferred, waitUntil } from '@portico/testkit/wait'
import type { ConfigFile } from '@portico/engine'

function config (port: number, body: string): ConfigFile {
  return {
    gateways: { default: gateway(port) },
    routes: [{ name: 'hello', policies: { directResponse: { status: 200, body } } }]
  }
}

describe('security: signals', () => {
  let portico: PorticoProcess
  let root: string
  let target: string

  before(async () => {
    root = makeTempDir('portico-sighup-')
    const data = join(root, 'data')
    const mount = join(root, 'mount')
    mkdirSync(data)
    mkdirSync(mount)
    target = join(data, 'config.yaml')
    writeFileSync(target, '')
    symlinkSync(target, join(mount, 'config.yaml'))
    // startPortico writes the config through the symlink (into `target`).
    portico = await startPortico({ dir: mount, config: port => config(port, 'v1'), env: { MAX_CONFIG_SIZE: '64KiB' } })
  })

  after(async () => {
    await portico?.stop()
    rmSync(root, { recursive: true, force: true })
  })

  async function body (): Promise<string> {
    const res = await nodeRequest({ port: portico.port, path: '/' })
    assert.equal(res.status, 200, res.text)
    return res.text
  }

  test('SIGHUP does not stop the process; it is logged and the gateway keeps serving', { timeout: 15_000 }, async () => {
    assert.equal(await body(), 'v1')
    const from = portico.stdout.length
    portico.signal('SIGHUP')
    await portico.waitForOutput(/SIGHUP: config unchanged/, { fromStdout: from, timeoutMs: 5_000 })
    assert.equal(portico.exit, null, `portico exited on SIGHUP\n${portico.output}`)
    assert.equal(await body(), 'v1')
  })

  test('SIGHUP re-reads the config file and applies it', { timeout: 15_000 }, async () => {
    writeFileSync(target, configText(config(portico.port, 'v2')))
    const from = portico.stdout.length
    portico.signal('SIGHUP')
    await portico.waitForOutput(/config reloaded/, { fromStdout: from, timeoutMs: 5_000 })
    assert.equal(await body(), 'v2')
    assert.equal(portico.exit, null)
  })

  test('SIGHUP with a broken file keeps the current config and the process', { timeout: 15_000 }, async () => {
    writeFileSync(target, 'gateways: [\n')
    const from = portico.stdout.length
    portico.signal('SIGHUP')
    await portico.waitForOutput(/config reload rejected/, { fromStdout: from, timeoutMs: 5_000 })
    assert.equal(await body(), 'v2')
    assert.equal(portico.exit, null)
  })

  test('SIGHUP with a file over the size limit refuses it unread, as the watcher does', { timeout: 15_000 }, async () => {
    writeFileSync(target, configText(config(portico.port, 'v3')) + `# ${'x'.repeat(100 * 1024)}\n`)
    const from = portico.stdout.length
    portico.signal('SIGHUP')
    const text = await portico.waitForOutput(/config reload rejected/, { fromStdout: from, timeoutMs: 5_000 })
    assert.match(text, /64 KiB/)
    assert.equal(await body(), 'v2')
  })
})

describe('stopping from a terminal: Ctrl-C drains, and the gateway never outlives what the user started', () => {
  let backend: Backend
  const seen = new Map<string, () => void>()
  before(async () => {
    // Answers 1.5 s after the request: long enough to be in flight when Ctrl-C comes.
    backend = await startBackend((req, res) => {
      req.resume()
      seen.get(req.url!)?.()
      setTimeout(() => res.end('slow done'), 1500)
    })
  })
  after(async () => {
    await backend.close()
  })

  function slowConfig (port: number): ConfigFile {
    return { gateways: { default: gateway(port) }, routes: [{ name: 'slow', backends: [{ host: backend.host }] }] }
  }

  /** A request that reaches the backend before this resolves; its answer comes later. */
  async function inFlight (port: number, path: string): Promise<{ answer: Promise<{ status: number, text: string }> }> {
    const arrived = deferred<void>()
    seen.set(path, () => arrived.resolve())
    const answer = nodeRequest({ port, path })
    answer.catch(() => {})
    await arrived.promise
    return { answer }
  }

  function portOpen (port: number): Promise<boolean> {
    return new Promise(resolve => {
      const socket = net.connect({ host: '127.0.0.1', port })
      socket.once('connect', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
  }

  /** `command` (a shell line) in a pseudo-terminal of its own; `ctrlC` types the key there. */
  function inPty (t: TestContext, command: string, cwd: string, env: Record<string, string>): { child: ChildProcess, output: () => string, ctrlC: () => void, closed: Promise<void> } | null {
    if (spawnSync('script', ['--version'], { stdio: 'ignore' }).error !== undefined) {
      t.skip('script (util-linux) not installed')
      return null
    }
    const child = spawn('script', ['-qec', command, '/dev/null'], { cwd, env: { ...process.env, ...QUIET_ENV, ...env }, stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    child.stdout!.setEncoding('utf8').on('data', (s: string) => { out += s })
    const closed = new Promise<void>(resolve => child.once('close', () => resolve()))
    t.after(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await closed
    })
    return { child, output: () => out, ctrlC: () => child.stdin!.write('\x03'), closed }
  }

  /** The gateway's pid, from its "portico started" log line. */
  async function gatewayPid (output: () => string): Promise<number> {
    await waitUntil(() => /"msg":"portico started"/.test(output()), 30_000, `no start:\n${output()}`)
    return Number(/"pid":(\d+)[^\n]*"msg":"portico started"/.exec(output())![1])
  }

  test('Ctrl-C of `pnpm exec portico`: the in-flight request completes, then the port is freed', { timeout: 60_000 }, async t => {
    if (spawnSync('pnpm', ['--version'], { stdio: 'ignore' }).error !== undefined) return t.skip('pnpm not on PATH')
    const dir = makeTempDir('portico-ctrlc-')
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const port = await freePort()
    writeFileSync(join(dir, 'config.yaml'), configText(slowConfig(port)))
    const pty = inPty(t, `exec pnpm exec portico -f ${JSON.stringify(join(dir, 'config.yaml'))}`, REPO_ROOT, { WORKERS: '1' })
    if (pty === null) return
    const pid = await gatewayPid(pty.output)
    const { answer } = await inFlight(port, '/pnpm')
    pty.ctrlC()
    const res = await answer
    assert.equal(res.status, 200, res.text)
    assert.equal(res.text, 'slow done', 'the request in flight was drained, not cut')
    await waitUntil(() => !processAlive(pid), 15_000, 'the gateway exits after its drain')
    assert.equal(await portOpen(port), false, 'its port is free')
    // (pnpm itself returns at once, closing the terminal, so the gateway's later log lines are not seen here.)
    assert.doesNotMatch(pty.output(), /second signal: exiting now/)
  })

  test('Ctrl-C of ./scripts/quickstart: the request completes, and the command returns only once the port is free', { timeout: 60_000 }, async t => {
    // The quick start as shipped, in a copy of the repository's layout whose setup step is a
    // no-op (the real one runs pnpm install) and whose example config is a test's.
    const root = makeTempDir('portico-quickstart-')
    t.after(() => rmSync(root, { recursive: true, force: true }))
    mkdirSync(join(root, 'scripts'))
    mkdirSync(join(root, 'examples'))
    copyFileSync(join(REPO_ROOT, 'scripts/quickstart'), join(root, 'scripts/quickstart'))
    writeFileSync(join(root, 'scripts/setup'), '#!/bin/sh\nexit 0\n')
    chmodSync(join(root, 'scripts/setup'), 0o755)
    for (const name of ['node_modules', 'package.json', 'pnpm-workspace.yaml', 'packages']) symlinkSync(join(REPO_ROOT, name), join(root, name))
    const port = await freePort()
    writeFileSync(join(root, 'examples/quickstart.yaml'), configText(slowConfig(port)))
    const pty = inPty(t, `exec ${JSON.stringify(join(root, 'scripts/quickstart'))}`, root, { WORKERS: '1' })
    if (pty === null) return
    const pid = await gatewayPid(pty.output)
    const { answer } = await inFlight(port, '/quickstart')
    let answered = false
    void answer.then(() => { answered = true }, () => { answered = true })
    pty.ctrlC()
    await pty.closed
    // What the user started has returned: by then the request was answered and the port freed.
    assert.equal(answered, true, `the command returned before the request in flight was answered\n${pty.output()}`)
    assert.equal(await portOpen(port), false, 'the port is free once the command returned')
    assert.equal(processAlive(pid), false)
    const res = await answer
    assert.equal(res.status, 200, res.text)
    assert.equal(res.text, 'slow done')
  })

  test('`pnpm exec portico` killed outright (SIGKILL, nothing passed on): the gateway drains and stops, its port freed', { timeout: 60_000 }, async t => {
    if (spawnSync('pnpm', ['--version'], { stdio: 'ignore' }).error !== undefined) return t.skip('pnpm not on PATH')
    const dir = makeTempDir('portico-pnpm-kill-')
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const port = await freePort()
    writeFileSync(join(dir, 'config.yaml'), configText(slowConfig(port)))
    const pnpm = spawn('pnpm', ['exec', 'portico', '-f', join(dir, 'config.yaml')], { cwd: REPO_ROOT, env: { ...process.env, ...QUIET_ENV, WORKERS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    pnpm.stdout!.setEncoding('utf8').on('data', (s: string) => { out += s })
    const pid = await gatewayPid(() => out)
    t.after(() => { if (processAlive(pid)) process.kill(pid, 'SIGKILL') })
    const { answer } = await inFlight(port, '/pnpm-kill')
    pnpm.kill('SIGKILL')
    const res = await answer
    assert.equal(res.status, 200, res.text)
    assert.equal(res.text, 'slow done', 'drained')
    await waitUntil(() => !processAlive(pid), 15_000, 'the gateway outlived pnpm')
    assert.equal(await portOpen(port), false, 'its port is free')
  })

  test('the gateway run by pnpm\'s non-exec shim for node stops when the shim is stopped, draining first', { timeout: 60_000 }, async t => {
    // `pnpm install` writes node_modules/.bin/node as a shell script that runs Node as its
    // child (no exec); `pnpm exec` passes its SIGTERM to that shell, not to Node.
    const dir = makeTempDir('portico-shim-')
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true })
    const shim = join(dir, 'node_modules/.bin/node')
    writeFileSync(shim, `#!/bin/sh\n${JSON.stringify(process.execPath)} "$@"\nexit $?\n`)
    chmodSync(shim, 0o755)
    const port = await freePort()
    writeFileSync(join(dir, 'config.yaml'), configText(slowConfig(port)))
    const child = spawn(shim, [PORTICO_BIN, '-f', join(dir, 'config.yaml')], { env: { ...process.env, ...QUIET_ENV, WORKERS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout!.setEncoding('utf8').on('data', (s: string) => { out += s })
    const pid = await gatewayPid(() => out)
    t.after(() => { if (processAlive(pid)) process.kill(pid, 'SIGKILL') })
    assert.notEqual(pid, child.pid, 'Node runs as the shim\'s child')
    const { answer } = await inFlight(port, '/shim')
    child.kill('SIGTERM')
    const res = await answer
    assert.equal(res.status, 200, res.text)
    assert.equal(res.text, 'slow done', 'drained')
    await waitUntil(() => !processAlive(pid), 15_000, `the gateway outlived its shim\n${out}`)
    assert.equal(await portOpen(port), false, 'its port is free')
    assert.match(out, /"reason":"parent exited"/)
  })
})
