/**
 * The mesh state report path: a proxy's xDS client watching a mesh identity's state (here one
 * the test sets; in a real proxy Portico.onMeshState, the mesh CA identity's) tells the controller's XdsServer its state in the node metadata, on connect and
 * on each change, over a real gRPC stream on loopback; the controller turns what it hears into
 * the Gateway's portico.dev/Mesh condition (status/mesh.ts).
 */

import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import type { Server } from '@grpc/grpc-js'
import { XdsServer, startXdsListener } from '@portico/controller'
import { loadConfigText } from '@portico/engine'
import { meshStateFields, readMeshState, MAX_MESH_REASON, type DeltaDiscoveryRequest, type MeshStateReport } from '@portico/xds'
import { XdsClient } from '@portico/proxy/xds-client'
import { meshCondition } from '@portico/controller/status-mesh'
import { deferred, waitUntil } from '@portico/testkit/wait'

const cleanup: Array<() => Promise<void> | void> = []
after(async () => {
  for (const fn of cleanup.reverse()) await fn()
})

/** The client logs its connection's life; nothing of it matters here. */
const quiet = { info () {}, warn () {}, error () {}, debug () {} } as never

/** A mesh identity whose state the test sets, watched as Portico.onMeshState is. */
class SettableMeshState extends EventEmitter {
  private current: MeshStateReport = { state: 'pending', reason: 'waiting for the first certificate from the mesh CA' }
  state (): MeshStateReport {
    return this.current
  }

  set (next: MeshStateReport): void {
    this.current = next
    this.emit('state', next)
  }

  watch (listener: (state: MeshStateReport) => void): () => void {
    this.on('state', listener)
    listener(this.current)
    return () => { this.off('state', listener) }
  }
}

async function eventually (check: () => boolean, ms = 5000): Promise<void> {
  await waitUntil(check, ms, 'the condition')
}

test('a proxy reports its mesh state on connect and on each change; the controller makes it the Gateway\'s Mesh condition', async () => {
  const reports: Array<{ gateway: string, pod: string, report: MeshStateReport }> = []
  const xds = new XdsServer({ onMeshState: (p, report) => reports.push({ gateway: p.gateway, pod: p.pod, report }) })
  const listener = await startXdsListener({ mode: 'plaintext', host: '127.0.0.1', port: 0, register: (server: Server) => xds.register(server) })
  cleanup.push(() => listener.close())
  const loaded = loadConfigText('gateways: {default: {port: 1, address: 127.0.0.1}}\nroutes: [{backends: [{host: "127.0.0.1:9"}]}]\n', { baseDir: '/' })
  assert.ok(loaded.ok)
  xds.setConfig('infra/web', loaded.config.ir)

  const mesh = new SettableMeshState()
  const applied: string[] = []
  const client = new XdsClient({ address: `http://127.0.0.1:${listener.port}`, namespace: 'infra', gateway: 'web', podName: 'web-0', watchMeshState: l => mesh.watch(l), apply: async ir => { applied.push(ir.version) }, log: quiet })
  cleanup.push(() => client.close())
  client.start()

  await eventually(() => reports.length >= 1 && applied.length >= 1)
  assert.deepEqual(reports[0], { gateway: 'infra/web', pod: 'web-0', report: { state: 'pending', reason: 'waiting for the first certificate from the mesh CA' } })
  const latest = () => [{ pod: reports.at(-1)!.pod, report: reports.at(-1)!.report }]
  assert.equal(meshCondition(true, latest(), 1).reason, 'Pending')

  mesh.set({ state: 'failed', reason: 'CA unreachable: 14 UNAVAILABLE: No connection established' })
  await eventually(() => reports.at(-1)!.report.state === 'failed')
  const down = meshCondition(true, latest(), 1)
  assert.deepEqual([down.status, down.reason], ['False', 'CAUnreachable'])
  assert.match(down.message, /^proxy web-0: CA unreachable/)

  mesh.set({ state: 'failed', reason: 'token refused: 16 UNAUTHENTICATED: authenticate failure (istiod logs why: a token audience other than istio-ca, ...)' })
  await eventually(() => /^token refused/.test(reports.at(-1)!.report.reason ?? ''))
  assert.equal(meshCondition(true, latest(), 1).reason, 'TokenRefused')

  mesh.set({ state: 'ready' })
  await eventually(() => reports.at(-1)!.report.state === 'ready')
  assert.deepEqual(reports.at(-1)!.report, { state: 'ready' })
  const ready = meshCondition(true, latest(), 1)
  assert.deepEqual([ready.type, ready.status, ready.reason], ['portico.dev/Mesh', 'True', 'InMesh'])

  // A change report is not an ACK or NACK: the config stays accepted, nothing is re-sent.
  assert.equal(applied.length, 1)
})

test('meshCondition: not in the mesh, no proxy yet, one failing among ready ones, a long reason bounded on the wire', () => {
  assert.equal(meshCondition(false, [], 2).reason, 'NotInMesh')
  assert.equal(meshCondition(true, [], 2).reason, 'Pending')
  const mixed = meshCondition(true, [{ pod: 'b', report: { state: 'ready' } }, { pod: 'a', report: { state: 'failed', reason: 'CA error: 13 INTERNAL' } }], 2)
  assert.deepEqual([mixed.status, mixed.reason, mixed.message], ['False', 'MeshIdentityFailed', 'proxy a: CA error: 13 INTERNAL'])
  assert.equal(meshCondition(true, [{ pod: 'a', report: { state: 'ready' } }, { pod: 'b', report: { state: 'ready' } }], 2).message, 'all 2 proxies hold a mesh identity')
  // Both ends bound the reason; a state that is not one of the three is no report.
  assert.equal(meshStateFields({ state: 'failed', reason: 'x'.repeat(5000) }).mesh_reason!.stringValue.length, MAX_MESH_REASON)
  assert.equal(readMeshState({ metadata: { fields: { mesh_state: { stringValue: 'failed' }, mesh_reason: { stringValue: 'y'.repeat(5000) } } } })!.reason!.length, MAX_MESH_REASON)
  assert.equal(readMeshState({ metadata: { fields: { mesh_state: { stringValue: 'hacked' } } } }), null)
  assert.equal(readMeshState({ metadata: { fields: {} } }), null)
})

test('a state change sent while the controller is still checking the stream\'s token is not lost', async () => {
  const reports: MeshStateReport[] = []
  let release!: () => void
  const checked = new Promise<void>(resolve => { release = resolve })
  // The token check (a TokenReview in a cluster) takes its time; the proxy's state changes meanwhile.
  const checking = deferred()
  const xds = new XdsServer({ authenticate: async () => { checking.resolve(); await checked; return null }, onMeshState: (_p, report) => reports.push(report) })
  // What the server's stream has received, seen beside the XdsServer (which handles it only
  // once the token is checked): the proof the change reached the controller during the check.
  const received: DeltaDiscoveryRequest[] = []
  const listener = await startXdsListener({ mode: 'plaintext', host: '127.0.0.1', port: 0, register: (server: Server) => xds.register(watchingStreams(server, received)) })
  cleanup.push(() => listener.close())
  const mesh = new SettableMeshState()
  const client = new XdsClient({ address: `http://127.0.0.1:${listener.port}`, namespace: 'infra', gateway: 'web', podName: 'web-0', watchMeshState: l => mesh.watch(l), apply: async () => {}, log: quiet })
  cleanup.push(() => client.close())
  client.start()
  // The stream is open and its token under check.
  await checking.promise
  mesh.set({ state: 'failed', reason: 'CA unreachable: 14 UNAVAILABLE' })
  await eventually(() => received.some(r => readMeshState(r.node)?.state === 'failed'))
  assert.equal(reports.length, 0, 'nothing handled while the token is under check')
  release()
  await eventually(() => reports.length >= 2)
  assert.deepEqual(reports.map(r => r.state), ['pending', 'failed'])
})

/**
 * `server` as XdsServer.register sees it, with each ADS stream's requests also pushed to
 * `received` as they arrive (a listener beside the server's own, on the same stream).
 */
function watchingStreams (server: Server, received: DeltaDiscoveryRequest[]): Server {
  type Handler = (stream: NodeJS.EventEmitter) => void
  return {
    addService: (service: Parameters<Server['addService']>[0], impl: Record<string, Handler>) => {
      server.addService(service, Object.fromEntries(Object.entries(impl).map(([name, handle]) => [name, (stream: NodeJS.EventEmitter) => {
        stream.on('data', (req: DeltaDiscoveryRequest) => received.push(req))
        handle(stream)
      }])))
    }
  } as unknown as Server
}
