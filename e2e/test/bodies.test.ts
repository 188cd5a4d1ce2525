/**
 * Request and response bodies through the proxy: multi-megabyte payloads both ways with
 * their hashes checked, chunked transfer (no content-length) both ways, and streaming — the
 * proxy forwards bytes as they come instead of buffering whole bodies.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { request } from 'undici'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, randomBody, sha256, startBackend } from '@portico/testkit/backends'
import { newAgent } from '@portico/testkit/client'
import { deferred, withTimeout } from '@portico/testkit/wait'

const MiB = 1024 * 1024
const BIG = randomBody(8 * MiB)
const BIG_SHA = sha256(BIG)

describe('bodies', () => {
  let portico: PorticoProcess
  let backend: Backend
  const agent = newAgent()
  /** Hooks for the streaming tests, set per test. */
  let onFirstResponseChunkSent: (() => Promise<void>) | null = null
  let requestChunkSeen: ((at: number) => void) | null = null

  before(async () => {
    backend = await startBackend((req, res) => {
      const url = req.url ?? '/'
      if (url === '/echo') {
        // Streams the request body straight back, keeping the request's framing choice.
        const headers: Record<string, string> = { 'content-type': 'application/octet-stream' }
        if (req.headers['content-length'] !== undefined) headers['content-length'] = req.headers['content-length']
        headers['x-request-framing'] = req.headers['transfer-encoding'] ?? `content-length ${req.headers['content-length']}`
        res.writeHead(200, headers)
        req.pipe(res)
      } else if (url === '/download') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG.length) })
        res.end(BIG)
      } else if (url === '/download-chunked') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' })
        let offset = 0
        const writeMore = () => {
          while (offset < BIG.length) {
            const piece = BIG.subarray(offset, offset + 64 * 1024)
            offset += piece.length
            if (!res.write(piece)) return res.once('drain', writeMore)
          }
          res.end()
        }
        writeMore()
      } else if (url === '/trickle') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' })
        res.write('first chunk;')
        const hook = onFirstResponseChunkSent
        void (hook === null ? Promise.resolve() : hook()).finally(() => res.end('last chunk'))
      } else if (url === '/upload-stream') {
        let first = true
        const hash = createHash('sha256')
        req.on('data', (chunk: Buffer) => {
          hash.update(chunk)
          if (first) {
            first = false
            requestChunkSeen?.(performance.now())
          }
        })
        req.on('end', () => res.end(hash.digest('hex')))
      } else {
        res.writeHead(404).end()
      }
    })
    portico = await startPortico({
      config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host: backend.host }] }] })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
  })

  test('an 8 MiB upload with content-length is echoed back intact', { timeout: 30_000 }, async () => {
    const res = await request(`${portico.url}/echo`, { dispatcher: agent, method: 'POST', body: BIG })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-request-framing'], `content-length ${BIG.length}`)
    assert.equal(res.headers['content-length'], String(BIG.length))
    const got = Buffer.from(await res.body.arrayBuffer())
    assert.equal(got.length, BIG.length)
    assert.equal(sha256(got), BIG_SHA)
  })

  test('an 8 MiB download with content-length arrives intact', { timeout: 30_000 }, async () => {
    const res = await request(`${portico.url}/download`, { dispatcher: agent })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['content-length'], String(BIG.length))
    const got = Buffer.from(await res.body.arrayBuffer())
    assert.equal(sha256(got), BIG_SHA)
  })

  test('a chunked 8 MiB upload (no content-length) reaches the backend chunked and intact', { timeout: 30_000 }, async () => {
    const body = new PassThrough()
    const sent = (async () => {
      for (let offset = 0; offset < BIG.length; offset += MiB) {
        if (!body.write(BIG.subarray(offset, offset + MiB))) await new Promise(resolve => body.once('drain', resolve))
      }
      body.end()
    })()
    const res = await request(`${portico.url}/echo`, { dispatcher: agent, method: 'POST', body })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-request-framing'], 'chunked')
    assert.equal(res.headers['content-length'], undefined)
    assert.equal(res.headers['transfer-encoding'], 'chunked')
    const got = Buffer.from(await res.body.arrayBuffer())
    await sent
    assert.equal(sha256(got), BIG_SHA)
  })

  test('a chunked 8 MiB download (no content-length) arrives chunked and intact', { timeout: 30_000 }, async () => {
    const res = await request(`${portico.url}/download-chunked`, { dispatcher: agent })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['content-length'], undefined)
    assert.equal(res.headers['transfer-encoding'], 'chunked')
    const got = Buffer.from(await res.body.arrayBuffer())
    assert.equal(sha256(got), BIG_SHA)
  })

  test('the first chunk of a response reaches the client before the backend finishes it', { timeout: 15_000 }, async () => {
    const clientGotFirst = deferred()
    let backendWaitedFor: 'client' | 'timeout' | null = null
    onFirstResponseChunkSent = async () => {
      // The backend holds the rest of its response until the client has the first chunk.
      // If the proxy buffered, the client never would: give up after 3 s and fail below.
      backendWaitedFor = await withTimeout(clientGotFirst.promise.then(() => 'client' as const), 3_000, 'client').catch(() => 'timeout' as const)
    }
    try {
      const res = await request(`${portico.url}/trickle`, { dispatcher: agent })
      assert.equal(res.statusCode, 200)
      let text = ''
      for await (const chunk of res.body) {
        if (text === '') clientGotFirst.resolve()
        text += (chunk as Buffer).toString()
      }
      assert.equal(text, 'first chunk;last chunk')
      assert.equal(backendWaitedFor, 'client', 'the client only got the first chunk after the backend had finished the response')
    } finally {
      onFirstResponseChunkSent = null
    }
  })

  test('the first chunk of a request reaches the backend before the client finishes it', { timeout: 15_000 }, async () => {
    const backendGotFirst = deferred<number>()
    requestChunkSeen = at => backendGotFirst.resolve(at)
    try {
      const body = new PassThrough()
      const responsePromise = request(`${portico.url}/upload-stream`, { dispatcher: agent, method: 'POST', body })
      body.write('first part;')
      // The client holds the rest until the backend has seen the first part.
      await withTimeout(backendGotFirst.promise, 3_000, 'the backend did not get the first part of a streamed request body while the client was still sending')
      body.end('second part')
      const res = await responsePromise
      assert.equal(res.statusCode, 200)
      assert.equal(await res.body.text(), sha256('first part;second part'))
    } finally {
      requestChunkSeen = null
    }
  })
})
