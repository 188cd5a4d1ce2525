/**
 * Client side of the tests: undici requests through a test-owned Agent (closed in after
 * hooks so no pooled socket outlives a test file), node:http for headers undici refuses to
 * send (Connection tokens, Keep-Alive), and raw TCP for bytes that are not HTTP at all.
 */

import http from 'node:http'
import { connect } from 'node:net'
import { Agent, request, type Dispatcher } from 'undici'

export interface Response {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
  text: string
}

/** A test's own connection pool; destroy() it in an after hook (close() would wait on a stuck request). */
export function newAgent (options: Agent.Options = {}): Agent {
  return new Agent({ keepAliveTimeout: 10_000, ...options })
}

/** One request with undici; the whole body is read. Rejects after `timeoutMs`. */
export async function send (
  dispatcher: Dispatcher,
  url: string,
  options: { method?: Dispatcher.HttpMethod, headers?: Record<string, string>, body?: string | Buffer, timeoutMs?: number } = {}
): Promise<Response> {
  const res = await request(url, {
    dispatcher,
    method: options.method ?? 'GET',
    headers: options.headers,
    body: options.body,
    signal: AbortSignal.timeout(options.timeoutMs ?? 10_000)
  })
  const body = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, body, text: body.toString('utf8') }
}

export async function getText (dispatcher: Dispatcher, url: string, headers?: Record<string, string>): Promise<Response> {
  return await send(dispatcher, url, { headers })
}

export interface NodeResponse extends Response {
  rawHeaders: string[]
}

/**
 * One request with node:http on a fresh connection (agent: false), which sends headers
 * exactly as given — including hop-by-hop ones undici refuses.
 */
export async function nodeRequest (options: http.RequestOptions & { body?: string | Buffer, timeoutMs?: number }): Promise<NodeResponse> {
  const { body, timeoutMs = 10_000, ...rest } = options
  return await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', agent: false, ...rest }, res => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => {
        const buf = Buffer.concat(chunks)
        resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: buf, text: buf.toString('utf8') })
      })
    })
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no response within ${timeoutMs} ms`)))
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Writes `data` to a fresh TCP connection and returns everything received until the server
 * closes the connection (or `timeoutMs` passes, which rejects).
 */
export async function rawExchange (port: number, data: string | Buffer, timeoutMs = 5_000): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port })
    const chunks: Buffer[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`connection still open after ${timeoutMs} ms; received: ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`))
    }, timeoutMs)
    socket.on('connect', () => socket.write(data))
    socket.on('data', (c: Buffer) => chunks.push(c))
    // A reset after the answer still counts: what matters is what the server said.
    socket.on('error', err => {
      if (chunks.length === 0) {
        clearTimeout(timer)
        reject(err)
      }
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(Buffer.concat(chunks).toString('latin1'))
    })
  })
}

/** Tries a TCP connection; resolves with the error code (e.g. ECONNREFUSED) or 'connected'. */
export async function tryConnect (port: number, timeoutMs = 2_000): Promise<string> {
  return await new Promise(resolve => {
    const socket = connect({ host: '127.0.0.1', port })
    const timer = setTimeout(() => {
      socket.destroy()
      resolve('timeout')
    }, timeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      resolve(err.code ?? err.message)
    })
  })
}

/** The status of a GET of `path` on an open HTTP/2 session (the body read and dropped); rejects on a stream or session error. */
export async function h2Status (session: import('node:http2').ClientHttp2Session, path: string): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    session.once('error', reject)
    const stream = session.request({ ':path': path })
    stream.on('response', h => resolve(Number(h[':status'])))
    stream.on('error', reject)
    stream.resume()
  })
}
