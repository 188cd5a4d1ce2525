import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isCliError, type CliErrorCode } from '../src/errors.ts'
import type { V1Pod } from '@kubernetes/client-node'
import { parseAdminAddr } from '../src/targets/local.ts'
import { parseGatewayRef, proxyTarget, controllerTarget } from '../src/targets/resolve.ts'
import { isPodReady, readyPodNames } from '../src/targets/pods.ts'
import { kubeconfigSource } from '../src/targets/kubeconfig.ts'
import { loadKubeConfig } from '../src/targets/kube.ts'
import { parseLevels, checkSetArg } from '../src/log/controller.ts'
import { parseTimeout, parsePort } from '../src/args.ts'
import { splitPassthrough } from '../src/main.ts'

function code (fn: () => unknown, expected: CliErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isCliError(err, expected), `expected ${expected}, got ${String(err)}`)
    if (pattern !== undefined) assert.match(err.message, pattern)
    return true
  })
}

test('admin addresses', () => {
  assert.deepEqual(parseAdminAddr('127.0.0.1:15000'), { host: '127.0.0.1', port: 15000 })
  assert.deepEqual(parseAdminAddr(':9000'), { host: '127.0.0.1', port: 9000 })
  assert.deepEqual(parseAdminAddr('[::1]:15000'), { host: '::1', port: 15000 })
  assert.deepEqual(parseAdminAddr('localhost:1'), { host: 'localhost', port: 1 })
  code(() => parseAdminAddr('15000'), 'PORTICOCTL_USAGE', /invalid admin address "15000"/)
  code(() => parseAdminAddr('h:70000'), 'PORTICOCTL_USAGE')
})

test('gateway references', () => {
  assert.equal(parseGatewayRef('gateway/web'), 'web')
  assert.equal(parseGatewayRef('gateways/web'), 'web')
  assert.equal(parseGatewayRef('web'), 'web')
  code(() => parseGatewayRef('deploy/web'), 'PORTICOCTL_USAGE', /only gateways/)
  code(() => parseGatewayRef('gateway/'), 'PORTICOCTL_USAGE')
  code(() => parseGatewayRef('gateway/ns/web'), 'PORTICOCTL_USAGE', /-n NAMESPACE/)
})

test('target flags: --local or a gateway, not both, not neither', () => {
  assert.equal(proxyTarget(undefined, { local: true }).description, '127.0.0.1:15000')
  assert.equal(proxyTarget(undefined, { local: true, adminAddr: '127.0.0.1:1234' }).description, '127.0.0.1:1234')
  assert.equal(controllerTarget({ local: true }).description, '127.0.0.1:9095')
  assert.equal(proxyTarget('gateway/web', { namespace: 'apps' }).kind, 'cluster')
  code(() => proxyTarget('gateway/web', { local: true }), 'PORTICOCTL_USAGE', /not both/)
  code(() => proxyTarget(undefined, {}), 'PORTICOCTL_USAGE', /which proxy\?/)
  code(() => proxyTarget('gateway/web', { adminAddr: '1.2.3.4:5' }), 'PORTICOCTL_USAGE', /--admin-addr goes with --local/)
})

function pod (name: string, ready: boolean, extra: { phase?: string, deleting?: boolean } = {}): V1Pod {
  return {
    metadata: { name, deletionTimestamp: extra.deleting === true ? new Date() : undefined },
    status: { phase: extra.phase ?? 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] }
  }
}

test('only Running, Ready, not terminating pods are used, sorted by name', () => {
  assert.equal(isPodReady(pod('a', true)), true)
  assert.equal(isPodReady(pod('a', false)), false)
  assert.equal(isPodReady(pod('a', true, { phase: 'Pending' })), false)
  assert.equal(isPodReady(pod('a', true, { deleting: true })), false)
  assert.deepEqual(readyPodNames([pod('c', true), pod('b', false), pod('a', true)]), ['a', 'c'])
})

test('no kubeconfig: a clear error, whatever the reason', async () => {
  const home = mkdtempSync(join(tmpdir(), 'porticoctl-home-'))
  try {
    code(() => kubeconfigSource({ env: { KUBECONFIG: '/nonexistent/kubeconfig', HOME: home } }), 'PORTICOCTL_NO_KUBECONFIG', /KUBECONFIG=\/nonexistent\/kubeconfig names no existing file \(use --local/)
    code(() => kubeconfigSource({ env: { HOME: home } }), 'PORTICOCTL_NO_KUBECONFIG', /KUBECONFIG is not set and .*\.kube\/config does not exist/)
    code(() => kubeconfigSource({ kubeconfig: join(home, 'nope'), env: {} }), 'PORTICOCTL_NO_KUBECONFIG', /--kubeconfig .*nope does not exist/)
    // ~/.kube/config is found; a context that is not there is an error too.
    mkdirSync(join(home, '.kube'))
    writeFileSync(join(home, '.kube', 'config'), [
      'apiVersion: v1', 'kind: Config', 'current-context: test',
      'clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]',
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: test, context: {cluster: c, user: u, namespace: apps}}]', ''
    ].join('\n'))
    assert.deepEqual(kubeconfigSource({ env: { HOME: home } }), { kind: 'files', files: [join(home, '.kube', 'config')], from: '~/.kube/config' })
    assert.equal((await loadKubeConfig({ env: { HOME: home } })).getCurrentCluster()?.server, 'http://127.0.0.1:1')
    await assert.rejects(loadKubeConfig({ env: { HOME: home }, context: 'other' }), /no kubeconfig context "other" \(have: test\)/)
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
})

test('controller levels and --set', () => {
  assert.deepEqual(parseLevels('portico/syncer=info\ndeployer=debug\n'), [['portico/syncer', 'info'], ['deployer', 'debug']])
  assert.equal(checkSetArg('deployer=debug'), 'deployer=debug')
  code(() => checkSetArg('deployer'), 'PORTICOCTL_USAGE', /use component=level/)
  code(() => checkSetArg('deployer='), 'PORTICOCTL_USAGE')
})

test('--timeout, --port and the -- split', () => {
  assert.equal(parseTimeout('30s'), 30_000)
  assert.equal(parseTimeout('1.5'), 1500)
  assert.equal(parseTimeout('0'), null)
  code(() => parseTimeout('soon'), 'PORTICOCTL_USAGE', /invalid --timeout "soon"/)
  assert.equal(parsePort('3000'), 3000)
  code(() => parsePort('0'), 'PORTICOCTL_USAGE')
  code(() => parsePort('80a'), 'PORTICOCTL_USAGE')
  assert.deepEqual(splitPassthrough(['proxy', 'trace', '--local', '--', 'http://h/', '--', '-v']), { own: ['proxy', 'trace', '--local'], passthrough: ['http://h/', '--', '-v'] })
})
