/**
 * The controller's admin server (/logging) takes the proxy admin's guard: a cross-site POST
 * cannot change log levels, and a DNS-rebinding Host cannot read them.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import http from 'node:http'
import { connect } from 'node:net'
import { Logs } from '@portico/ops'
import { startAdminServer } from '../src/servers.ts'

/** A request with exactly these headers (fetch would refuse to set Host or Origin). */
function request (url: string, options: { method?: string, headers?: Record<string, string> } = {}): Promise<{ statusCode: number, body: { text(): Promise<string> } }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', headers: options.headers }, res => {
      let text = ''
      res.setEncoding('utf8').on('data', (c: string) => { text += c }).on('end', () => resolve({ statusCode: res.statusCode ?? 0, body: { text: async () => text } }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('controller admin: cross-site writes and rebinding Hosts are refused; porticoctl-style requests work', async () => {
  const logs = new Logs({ level: 'info', format: 'json', stream: new PassThrough() })
  const server = await startAdminServer('127.0.0.1', 0, logs)
  const url = `http://127.0.0.1:${server.port}/logging`
  try {
    const crossSite = await request(`${url}?level=debug`, { method: 'POST', headers: { origin: 'http://evil.example', 'content-type': 'text/plain' } })
    assert.equal(crossSite.statusCode, 403)
    await crossSite.body.text()
    const fetchSite = await request(`${url}?level=debug`, { method: 'POST', headers: { 'sec-fetch-site': 'cross-site' } })
    assert.equal(fetchSite.statusCode, 403)
    await fetchSite.body.text()
    assert.equal(logs.levelOf('deployer'), 'info')

    const rebinding = await request(url, { headers: { host: 'evil.example' } })
    assert.equal(rebinding.statusCode, 403)
    await rebinding.body.text()

    const plain = await request(`${url}?level=debug`, { method: 'POST' })
    assert.equal(plain.statusCode, 200)
    assert.match(await plain.body.text(), /deployer=debug/)
    const local = await request(url, { headers: { host: `localhost:${server.port}` } })
    assert.equal(local.statusCode, 200)
    await local.body.text()
  } finally {
    await server.close()
  }
})

/** Writes raw bytes and returns all that comes back before the server closes the connection. */
function rawExchange (port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(data))
    let text = ''
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`still open; got ${JSON.stringify(text)}`)) }, 5_000)
    socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
    socket.on('error', () => {})
    socket.on('close', () => { clearTimeout(timer); resolve(text) })
  })
}

test('controller admin: two Host lines or an absolute-form target are a 400 that closes the connection', async () => {
  const logs = new Logs({ level: 'info', format: 'json', stream: new PassThrough() })
  const server = await startAdminServer('127.0.0.1', 0, logs)
  try {
    for (const head of [
      'POST /logging?level=debug HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nContent-Length: 0\r\n\r\n',
      'POST http://evil.example/logging?level=debug HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n'
    ]) {
      const answer = await rawExchange(server.port, head + 'GET /logging HTTP/1.1\r\nHost: localhost\r\n\r\n')
      assert.match(answer, /^HTTP\/1\.1 400 /, JSON.stringify(answer))
      assert.match(answer, /\r\nConnection: close\r\n/i, JSON.stringify(answer))
      assert.equal(answer.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, JSON.stringify(answer))
    }
    assert.equal(logs.levelOf('deployer'), 'info')
  } finally {
    await server.close()
  }
})
