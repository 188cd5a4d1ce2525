/**
 * A stand-in Kubernetes API server for the cluster path, until the cluster-mode test harness
 * (a real kube-apiserver) exists: just enough of the API for porticoctl — get a Gateway, list
 * pods by label, and pod port-forward over WebSocket (the channel protocol client-node
 * speaks: the first frame of each channel carries the port; data on channel 0, errors on 1).
 * A pod's ports map to real loopback ports (the portico process's admin server and listener).
 */

import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { WebSocketServer, type WebSocket } from 'ws'

export interface FakePod {
  namespace: string
  name: string
  labels: Record<string, string>
  ready: boolean
  /** Port inside the pod → loopback port here. */
  ports: Record<number, number>
}

export interface FakeKube {
  url: string
  token: string
  gateways: Set<string>
  pods: FakePod[]
  /** Port-forward WebSockets open now, and opened so far. */
  forwards: { open: number, total: number }
  /** Requests seen (method and path), for assertions. */
  requests: string[]
  close(): Promise<void>
}

function podJson (p: FakePod): Record<string, unknown> {
  return {
    metadata: { name: p.name, namespace: p.namespace, labels: p.labels },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: p.ready ? 'True' : 'False' }] }
  }
}

function matches (labels: Record<string, string>, selector: string): boolean {
  return selector.split(',').filter(s => s !== '').every(term => {
    const [k, v] = term.split('=')
    return labels[k!] === v
  })
}

export async function startFakeKube (): Promise<FakeKube> {
  const token = 'test-token'
  const gateways = new Set<string>()
  const pods: FakePod[] = []
  const requests: string[] = []
  const forwards = { open: 0, total: 0 }

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x')
    requests.push(`${req.method} ${url.pathname}`)
    if (req.headers.authorization !== `Bearer ${token}`) return json(res, 401, { kind: 'Status', status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 })
    let m = /^\/apis\/gateway\.networking\.k8s\.io\/v1\/namespaces\/([^/]+)\/gateways\/([^/]+)$/.exec(url.pathname)
    if (m !== null) {
      const [, ns, name] = m
      if (gateways.has(`${ns}/${name}`)) return json(res, 200, { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', metadata: { name, namespace: ns } })
      return json(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: `gateways.gateway.networking.k8s.io "${name}" not found`, reason: 'NotFound', details: { name, group: 'gateway.networking.k8s.io', kind: 'gateways' }, code: 404 })
    }
    m = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/.exec(url.pathname)
    if (m !== null) {
      const selector = url.searchParams.get('labelSelector') ?? ''
      const items = pods.filter(p => p.namespace === m![1] && matches(p.labels, selector)).map(podJson)
      return json(res, 200, { apiVersion: 'v1', kind: 'PodList', metadata: {}, items })
    }
    json(res, 404, { kind: 'Status', status: 'Failure', message: 'the server could not find the requested resource', reason: 'NotFound', code: 404 })
  })

  const wss = new WebSocketServer({ noServer: true, handleProtocols: protocols => protocols.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false })
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://x')
    requests.push(`UPGRADE ${url.pathname}?${url.searchParams.toString()}`)
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/portforward$/.exec(url.pathname)
    const pod = m === null ? undefined : pods.find(p => p.namespace === m[1] && p.name === m[2])
    if (pod === undefined || req.headers.authorization !== `Bearer ${token}`) {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n')
      return
    }
    const port = Number(url.searchParams.get('ports'))
    wss.handleUpgrade(req, socket, head, ws => forward(ws, pod, port))
  })

  function forward (ws: WebSocket, pod: FakePod, port: number): void {
    forwards.open++
    forwards.total++
    ws.once('close', () => { forwards.open-- })
    const prefix = Buffer.from([port & 0xff, port >> 8])
    ws.send(Buffer.concat([Buffer.from([0]), prefix]))
    ws.send(Buffer.concat([Buffer.from([1]), prefix]))
    const target = pod.ports[port]
    const fail = (why: string) => {
      ws.send(Buffer.concat([Buffer.from([1]), Buffer.from(why)]))
      ws.close()
    }
    if (target === undefined) return fail(`error forwarding port ${port} to pod ${pod.name}: nothing listens`)
    const upstream = net.connect({ host: '127.0.0.1', port: target })
    const pending: Buffer[] = []
    let connected = false
    upstream.on('connect', () => {
      connected = true
      for (const b of pending) upstream.write(b)
    })
    upstream.on('data', (chunk: Buffer) => ws.send(Buffer.concat([Buffer.from([0]), chunk])))
    upstream.on('error', err => fail(`error forwarding port ${port} to pod ${pod.name}: ${err.message}`))
    upstream.on('close', () => ws.close())
    ws.on('message', (data: Buffer) => {
      if (data[0] !== 0) return
      const payload = data.subarray(1)
      if (connected) upstream.write(payload)
      else pending.push(payload)
    })
    ws.on('close', () => upstream.destroy())
  }

  await new Promise<void>(resolve => server.listen({ host: '127.0.0.1', port: 0 }, () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    gateways,
    pods,
    forwards,
    requests,
    close: () => new Promise<void>(resolve => {
      for (const c of wss.clients) c.terminate()
      wss.close()
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}

/** A kubeconfig for the fake: plain HTTP (hence insecure-skip-tls-verify), a bearer token. */
export function fakeKubeconfig (kube: FakeKube, namespace = 'default'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'current-context: fake',
    `clusters: [{name: fake, cluster: {server: "${kube.url}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: me, user: {token: ${kube.token}}}]`,
    `contexts: [{name: fake, context: {cluster: fake, user: me, namespace: ${namespace}}}]`,
    ''
  ].join('\n')
}
