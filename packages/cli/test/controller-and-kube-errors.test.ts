/**
 * `controller log` against a stand-in controller admin server (--local), and the cluster
 * path's errors that need no cluster: no kubeconfig, an API server that is not there.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '@portico/testkit/portico'
import { ctl } from '@portico/testkit/porticoctl'
import { startFakeController, type FakeController } from './fake-controller.ts'

let controller: FakeController
let home: string

before(async () => {
  controller = await startFakeController()
  home = mkdtempSync(join(tmpdir(), 'porticoctl-home-'))
})

after(async () => {
  await controller?.close()
  rmSync(home, { recursive: true, force: true })
})

test('controller log --local: show every component, set all with --level, one with --set', async () => {
  const local = ['controller', 'log', '--local', '--admin-addr', controller.addr]
  const show = await ctl(local)
  assert.equal(show.code, 0, show.stderr)
  assert.equal(show.stdout, [
    'COMPONENT            LEVEL',
    'portico/syncer       info',
    'portico/translator   info',
    'gateway-controller   info',
    'deployer             info',
    'default              info',
    ''
  ].join('\n'))
  const set = await ctl([...local, '--level', 'warn', '--set', 'deployer=debug', '--set', 'portico/syncer=trace'])
  assert.equal(set.code, 0, set.stderr)
  assert.match(set.stdout, /^portico\/syncer +trace$/m)
  assert.match(set.stdout, /^deployer +debug$/m)
  assert.match(set.stdout, /^gateway-controller +warn$/m)
  assert.equal(controller.levels.get('default'), 'warn')

  const badComponent = await ctl([...local, '--set', 'nope=debug'])
  assert.equal(badComponent.code, 2)
  assert.equal(badComponent.stderr, 'porticoctl: --set nope=debug: unknown component "nope"\n')
  const badShape = await ctl([...local, '--set', 'deployer'])
  assert.equal(badShape.code, 2)
  assert.match(badShape.stderr, /--set "deployer": use component=level/)
  const closed = `127.0.0.1:${await freePort()}`
  const down = await ctl(['controller', 'log', '--local', '--admin-addr', closed])
  assert.equal(down.code, 1)
  assert.equal(down.stderr, `porticoctl: cannot reach the controller's admin server at ${closed} (is the controller running? use --admin-addr)\n`)
})

test('no kubeconfig: every cluster command says so and exits 1', async () => {
  const env = { KUBECONFIG: join(home, 'does-not-exist'), HOME: home }
  for (const args of [
    ['proxy', 'trace', 'gateway/web', '-n', 'apps', '--raw'],
    ['proxy', 'trace', 'gateway/web', '--raw', '--', 'http://example.test/'],
    ['proxy', 'config', 'all', 'gateway/web', '-n', 'apps'],
    ['proxy', 'config', 'backends', 'gateway/web'],
    ['proxy', 'log', 'gateway/web', '-n', 'apps'],
    ['controller', 'log']
  ]) {
    const r = await ctl(args, { env })
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stderr, `porticoctl: no kubeconfig: KUBECONFIG=${env.KUBECONFIG} names no existing file (use --local for a standalone instance)\n`)
  }
  const noHome = await ctl(['proxy', 'log', 'gateway/web'], { env: { KUBECONFIG: '', HOME: home, KUBERNETES_SERVICE_HOST: '' } })
  assert.equal(noHome.code, 1)
  assert.equal(noHome.stderr, `porticoctl: no kubeconfig: KUBECONFIG is not set and ${join(home, '.kube', 'config')} does not exist (use --local for a standalone instance)\n`)
})

test('an API server that is not there: a clear error, exit 1', async () => {
  const port = await freePort()
  const kubeconfig = join(home, 'kubeconfig')
  writeFileSync(kubeconfig, [
    'apiVersion: v1', 'kind: Config', 'current-context: test',
    `clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]`,
    'users: [{name: u, user: {token: t}}]',
    'contexts: [{name: test, context: {cluster: c, user: u}}]', ''
  ].join('\n'))
  const r = await ctl(['proxy', 'log', 'gateway/web', '--kubeconfig', kubeconfig])
  assert.equal(r.code, 1)
  assert.match(r.stderr, new RegExp(`^porticoctl: cannot reach the Kubernetes API server at http://127\\.0\\.0\\.1:${port} \\(get gateway default/web\\): ECONNREFUSED\\n$`))
})
