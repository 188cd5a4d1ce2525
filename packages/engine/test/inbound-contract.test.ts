/**
 * The engine's contract with a listener's server (src/http/inbound.ts): the engine names
 * Node's server classes nowhere else but where an upgrade's own answers are written (Node's
 * ServerResponse on the handed-over socket, http/upgrade.ts), and Node's HTTP/1.1 server
 * provides every member the contract lists. HTTP/2's compatibility objects are held to it in
 * packages/proxy/test/http2-inbound.test.ts (the proxy adapts them).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import http from 'node:http'
import { type AddressInfo } from 'node:net'
import { join, relative } from 'node:path'
import { Readable } from 'node:stream'
import { INBOUND_REQUEST_HEAD, INBOUND_RESPONSE_MEMBERS } from '../src/http/inbound.ts'

const SRC = join(import.meta.dirname, '../src')

/** Files allowed to name Node's classes, and why. */
const UPGRADE_PATH = new Set(['http/inbound.ts', 'http/upgrade.ts'])

function sources (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(e => e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [])
}

test('the engine takes InboundRequest/InboundResponse: Node\'s IncomingMessage and ServerResponse are named only where an upgrade\'s answers are written', () => {
  const offenders: string[] = []
  for (const file of sources(SRC)) {
    const rel = relative(SRC, file)
    const lines = readFileSync(file, 'utf8').split('\n')
    lines.forEach((line, i) => {
      const code = line.replace(/\/\/.*$/, '')
      if (/^\s*\*/.test(code) || !/\b(IncomingMessage|ServerResponse)\b/.test(code)) return
      // On the upgrade path: the import, the upgrade's own functions, Node's response built on its socket.
      if (UPGRADE_PATH.has(rel) && (/import type \{ IncomingMessage \} from 'node:http'/.test(code) || /[Uu]pgrade|new http\.ServerResponse/.test(code) || rel === 'http/inbound.ts')) return
      offenders.push(`${rel}:${i + 1}: ${line.trim()}`)
    })
  }
  assert.deepEqual(offenders, [], 'take http/inbound.ts\'s types instead')
})

test('Node\'s HTTP/1.1 server provides every member of the contract', async () => {
  const seen = await new Promise<{ request: string[], readable: boolean, response: string[] }>((resolve, reject) => {
    const server = http.createServer((req, res) => {
      resolve({ request: INBOUND_REQUEST_HEAD.filter(m => !(m in req)), readable: req instanceof Readable, response: INBOUND_RESPONSE_MEMBERS.filter(m => !(m in res)) })
      res.end()
    })
    server.listen(0, '127.0.0.1', () => {
      http.get({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' }, res => {
        res.resume()
        res.on('end', () => server.close())
      }).on('error', reject)
    })
  })
  assert.deepEqual(seen, { request: [], readable: true, response: [] })
})
