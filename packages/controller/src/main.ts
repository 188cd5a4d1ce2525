/**
 * `portico-controller`: the control plane. Settings come from the environment (the Helm
 * chart sets them); the cluster from the kubeconfig (in-cluster in a pod).
 */

import { KubeConfig } from '@kubernetes/client-node'
import { Logs } from '@portico/ops'
import { createRequire } from 'node:module'
import { resolveControllerSettings, type ControllerSettings } from './settings.ts'
import { Controller } from './controller.ts'
import { KubeHttp } from './kube/http.ts'
import { tokenReviewAuthenticator } from './token-review.ts'
import { startXdsListener } from './xds/listener.ts'
import { loadXdsTls } from './xds/ca-secret.ts'
import { LeaderElector } from './leader.ts'
import { COMPONENTS, startAdminServer, startHealthServer, startMetricsServer, type RunningServer } from './servers.ts'

const version = (createRequire(import.meta.url)('../package.json') as { version: string }).version

export async function main (): Promise<void> {
  let settings: ControllerSettings
  try {
    settings = resolveControllerSettings(process.env, version)
  } catch (err) {
    process.stderr.write(`portico-controller: ${(err as Error).message}\n`)
    process.exit(2)
  }
  const logs = new Logs({ level: settings.logLevel, format: process.env.LOG_FORMAT === 'text' ? 'text' : 'json' })
  const log = logs.for('default')
  for (const c of COMPONENTS) logs.for(c)
  for (const warning of settings.unavailable) log.warn({ setting: warning.split(':')[0] }, warning)

  const kc = new KubeConfig()
  kc.loadFromDefault()
  const api = new KubeHttp(kc)
  const controller = new Controller(kc, settings, {
    syncer: logs.for('portico/syncer'),
    translator: logs.for('portico/translator'),
    gatewayController: logs.for('gateway-controller'),
    deployer: logs.for('deployer')
  }, settings.xdsAuth ? tokenReviewAuthenticator(api, settings.tokenAudience) : undefined)

  const servers: RunningServer[] = []
  let xdsListening = false
  process.on('uncaughtException', err => log.error({ err }, 'uncaught exception'))
  process.on('unhandledRejection', err => log.error({ err }, 'unhandled rejection'))
  try {
    servers.push(await startHealthServer(settings.healthPort, () => [...(controller.ready ? [] : ['informers']), ...(xdsListening ? [] : ['xds'])]))
    servers.push(await startMetricsServer(settings.metricsPort, controller.metrics))
    if (settings.adminAddr !== null) servers.push(await startAdminServer(settings.adminAddr.host, settings.adminAddr.port, logs))

    let tls: Awaited<ReturnType<typeof loadXdsTls>> | undefined
    if (settings.xdsMode !== 'plaintext') {
      const svc = settings.serviceName
      const ns = settings.namespace
      tls = await loadXdsTls(api, ns, settings.xdsTlsSecret, [`${svc}.${ns}.svc`, `${svc}.${ns}.svc.cluster.local`, `${svc}.${ns}`, svc, 'localhost'])
      controller.xdsCa = tls.caPem
    }
    let serving = tls?.serving
    const xds = await startXdsListener({
      mode: settings.xdsMode,
      host: '0.0.0.0',
      port: settings.xdsPort,
      ...(serving !== undefined ? { tls: () => serving! } : {}),
      register: server => controller.xds.register(server)
    })
    servers.push(xds)
    xdsListening = true
    if (tls?.renew != null) {
      // Serving certificates live a day; a new one every 12 hours.
      const renew = tls.renew
      setInterval(() => {
        renew().then(next => { serving = next; xds.rotate() }, err => log.error({ err: (err as Error).message }, 'cannot renew the xDS certificate'))
      }, 12 * 3_600_000).unref()
    }

    const leader = settings.leaderElection ? new LeaderElector(api, { namespace: settings.namespace, name: 'portico-controller', identity: settings.podName }) : null
    leader?.start()
    await controller.start(leader)
    log.info({ version, xds: `${settings.xdsMode} :${xds.port}`, health: settings.healthPort, metrics: settings.metricsPort }, 'portico controller started')

    const stop = async (signal: string) => {
      log.info({ signal }, 'shutting down')
      await leader?.release()
      await controller.stop()
      await Promise.allSettled(servers.map(s => s.close()))
      logs.flush()
      process.exit(0)
    }
    process.on('SIGTERM', () => { void stop('SIGTERM') })
    process.on('SIGINT', () => { void stop('SIGINT') })
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'cannot start')
    logs.flush()
    process.exit(1)
  }
}
