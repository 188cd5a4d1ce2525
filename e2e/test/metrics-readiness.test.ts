/**
 * Metrics on the stats port (checked by the real promtool) and readiness on its own port,
 * against a real portico process; readiness before a config exists, in-process.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { request } from 'undici'
import { Logs, Portico, resolveSettings } from '@portico/proxy'
import { loadConfigText } from '@portico/engine'
import { Writable } from 'node:stream'
import { freePort, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { waitUntil } from '@portico/testkit/wait'
import { requireTool } from '@portico/testkit/tools'
import net from 'node:net'

let backend: Backend
let portico: PorticoProcess
let stats: string
let readiness: string
let tcpPort: number

before(async () => {
  backend = await startBackend((_req, res) => res.end('ok'))
  const [statsPort, readyPort] = [await freePort(), await freePort()]
  tcpPort = await freePort()
  stats = `http://127.0.0.1:${statsPort}`
  readiness = `http://127.0.0.1:${readyPort}`
  portico = await startPortico({
    env: { STATS_ADDR: `127.0.0.1:${statsPort}`, READINESS_ADDR: `127.0.0.1:${readyPort}` },
    config: port => ({
      gateways: { default: { port, address: '127.0.0.1' }, tcp: { port: tcpPort, address: '127.0.0.1', protocol: 'TCP' } },
      routes: [{ name: 'app', matches: [{ path: { pathPrefix: '/app' } }], backends: [{ host: backend.host }] }],
      tcpRoutes: [{ name: 'raw', gateways: 'tcp', backends: [{ host: backend.host }] }]
    })
  })
})

after(async () => {
  await portico?.stop()
  await backend?.close()
})

async function text (url: string, method = 'GET') {
  const res = await request(url, { method })
  return { status: res.statusCode, body: await res.body.text(), type: res.headers['content-type'] }
}

test('requests are counted by route, backend, status and reason', async () => {
  for (let i = 0; i < 3; i++) await text(`${portico.url}/app/${i}`)
  await text(`${portico.url}/missing`)
  const { status, body, type } = await text(`${stats}/metrics`)
  assert.equal(status, 200)
  assert.match(String(type), /^text\/plain/)
  assert.match(body, new RegExp(`portico_requests_total\\{gateway="default",listener="default",route="app",backend="${backend.host.replace(/\./g, '\\.')}",method="GET",status="200",reason="Upstream",protocol="http1"\\} 3`))
  assert.match(body, /portico_requests_total\{gateway="default",listener="default",route="unknown",backend="unknown",method="GET",status="404",reason="NotFound",protocol="http1"\} 1/)
  assert.match(body, /portico_request_duration_seconds_bucket\{le="0\.001",gateway="default"/)
  assert.match(body, /portico_upstream_call_duration_seconds_count\{backend="127\.0\.0\.1:\d+"\} 3/)
  assert.match(body, /portico_downstream_connections_total\{bind="127\.0\.0\.1:\d+",protocol="HTTP"\} \d+/)
  assert.match(body, /portico_config_reloads_total\{result="success"\} 1/)
  assert.match(body, /portico_build_info\{version="[^"]+",node="v\d+/)
  assert.match(body, /portico_nodejs_eventloop_lag_seconds /)
  assert.match(body, /portico_process_resident_memory_bytes /)
  assert.equal((await text(`${stats}/stats/prometheus`)).status, 200)
  assert.equal((await text(`${stats}/other`)).status, 404)
})

test('connections of a TCP listener are counted by route, backend and how they ended, with their bytes', async () => {
  // An HTTP request sent as raw bytes through the TCP listener; the backend closes after it.
  const request = 'GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'
  const answer = await new Promise<string>((resolve, reject) => {
    let got = ''
    const s = net.connect(tcpPort, '127.0.0.1', () => s.write(request))
    s.setEncoding('utf8').on('data', (c: string) => { got += c })
    s.on('close', () => resolve(got))
    s.on('error', reject)
  })
  assert.match(answer, /^HTTP\/1\.1 200/)
  let body = ''
  await waitUntil(async () => { body = (await text(`${stats}/metrics`)).body; return body.includes('portico_tcp_connections_total{') }, 5_000, 'the connection counted')
  const host = backend.host.replace(/\./g, '\\.')
  assert.match(body, new RegExp(`portico_tcp_connections_total\\{gateway="tcp",listener="tcp",route="tcp:raw",backend="${host}",protocol="tcp",reason="Done"\\} 1`))
  assert.match(body, new RegExp(`portico_tcp_bytes_total\\{gateway="tcp",listener="tcp",route="tcp:raw",protocol="tcp",direction="received"\\} ${request.length}`))
  assert.match(body, new RegExp(`portico_tcp_bytes_total\\{gateway="tcp",listener="tcp",route="tcp:raw",protocol="tcp",direction="sent"\\} ${answer.length}`))
  assert.match(body, /portico_tcp_connection_duration_seconds_bucket\{le="0\.1",gateway="tcp"/)
  assert.match(body, /portico_downstream_connections_total\{bind="127\.0\.0\.1:\d+",protocol="TCP"\} 1/)
  assert.match(body, /# TYPE portico_downstream_connections_open gauge\n/)
  assert.match(body, /portico_downstream_connections_open\{bind="127\.0\.0\.1:\d+",protocol="TCP"\} 0/)
})

test('promtool check metrics accepts the exposition', async t => {
  const promtool = requireTool(t, 'PROMTOOL', 'promtool')
  if (promtool === null) return
  const { body } = await text(`${stats}/metrics`)
  const out = spawnSync(promtool, ['check', 'metrics'], { input: body, encoding: 'utf8' })
  assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
})

test('readiness: 200 ready once listening; other paths 404, other methods 405', async () => {
  assert.deepEqual(await text(`${readiness}/healthz/ready`).then(r => [r.status, r.body]), [200, 'ready\n'])
  assert.equal((await text(`${readiness}/healthz/ready`, 'POST')).status, 405)
  assert.equal((await text(`${readiness}/`)).status, 404)
})

test('readiness is 503 naming what is pending until a config is installed', async () => {
  const readyPort = await freePort()
  const sink = new Writable({ write (_c, _e, cb) { cb() } })
  const settings = resolveSettings({ adminAddr: 'off', statsAddr: 'off', readinessAddr: `127.0.0.1:${readyPort}` }, {}, false)
  const p = new Portico({ settings, logs: new Logs({ level: 'error', format: 'json', stream: sink }) })
  await p.startServers()
  try {
    assert.deepEqual(await text(`http://127.0.0.1:${readyPort}/healthz/ready`).then(r => [r.status, r.body]), [503, 'not ready, pending: config\n'])
    const gwPort = await freePort()
    const loaded = loadConfigText(`gateways: {default: {port: ${gwPort}, address: 127.0.0.1}}\n`, { baseDir: '/' })
    assert.ok(loaded.ok)
    await p.start(loaded.config)
    assert.deepEqual(await text(`http://127.0.0.1:${readyPort}/healthz/ready`).then(r => [r.status, r.body]), [200, 'ready\n'])
  } finally {
    await p.shutdown('test')
  }
})
