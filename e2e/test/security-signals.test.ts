/**
 * Signals (issue 14, item 8): SIGHUP used to end the process at once (Node's default), with
 * no log line and no drain. Now it re-reads the config file and keeps serving.
 *
 * The config path is a symlink into another directory (as a Kubernetes ConfigMap mount is),
 * so an edit of the target is not seen by the directory watcher: only SIGHUP applies it.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, symlinkSync, writeFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { configText, gateway, makeTempDir, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { nodeRequest } from '../lib/client.ts'
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
