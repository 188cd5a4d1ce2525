/**
 * Downstream HTTP/2: h2 (ALPN on HTTPS binds) and h2c with prior knowledge (plain HTTP
 * binds). Node's compatibility API hands the engine Http2ServerRequest/Response objects;
 * this module makes them look like HTTP/1.1 ones where the engine relies on HTTP/1.1 rules,
 * so the engine's pipeline stays protocol-blind and the HTTP/1.1 path pays nothing.
 */

import http2 from 'node:http2'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from '@portico/engine/clock'

/** The client connection preface of RFC 9113 §3.4 (h2c with prior knowledge). */
export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')

/**
 * Settings every downstream HTTP/2 session gets: as many concurrent streams as browsers
 * expect of a proxy, and a header list limit close to Node's 16 KiB HTTP/1.1 limit.
 */
export const H2_SERVER_SETTINGS: http2.Settings = {
  maxConcurrentStreams: 100,
  maxHeaderListSize: 16 * 1024 + 1024
}

/**
 * Headers HTTP/2 forbids in a message (RFC 9113 §8.2.2): Node refuses to send a response
 * carrying one (ERR_HTTP2_INVALID_CONNECTION_HEADERS) and the engine sets `connection: close`
 * on some of its own answers, so they are dropped here.
 */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'])

type Headers = Record<string, string | string[] | number | undefined>

/**
 * Node's compatibility response has no `destroyed`, which the engine reads wherever it asks
 * whether the client is still there (http/inbound.ts: before the backend call once the
 * policies have run, before retries, before each write of a stream). Without it a stream the
 * client reset while extAuthz was deciding still went on to the backend. As on HTTP/1.1,
 * where a response is destroyed once its connection lets go of it, it is its stream's state.
 * Defined once on the class, not per response; a Node that adds its own keeps its own.
 */
if (!('destroyed' in http2.Http2ServerResponse.prototype)) {
  Object.defineProperty(http2.Http2ServerResponse.prototype, 'destroyed', {
    configurable: true,
    get (this: http2.Http2ServerResponse): boolean {
      return this.stream?.destroyed ?? true
    }
  })
}

function withoutConnectionHeaders (headers: Headers): Headers {
  let out: Headers | null = null
  for (const name of Object.keys(headers)) {
    if (!CONNECTION_SPECIFIC.has(name.toLowerCase())) continue
    out ??= { ...headers }
    delete out[name]
  }
  return out ?? headers
}

/**
 * Prepares an HTTP/2 request for the engine (a no-op for HTTP/1.x):
 * - the host is `:authority` when the client sent no Host header (RFC 9113 §8.3.1), so the
 *   Host checks, listener selection and the upstream Host see it;
 * - a body without content-length is marked as one (HTTP/2 frames bodies itself, so a client
 *   need not declare a length; the engine decides "has a body" by HTTP/1.1 framing headers).
 *   transfer-encoding is hop-by-hop: it is never forwarded, the backend call frames the body;
 * - response heads lose the connection-specific headers HTTP/2 forbids.
 */
export function adaptHttp2 (req: IncomingMessage, res: ServerResponse): void {
  if (req.httpVersionMajor !== 2) return
  const headers = req.headers
  const authority = headers[':authority']
  if (headers.host === undefined && typeof authority === 'string') headers.host = authority
  const stream = (req as unknown as http2.Http2ServerRequest).stream
  if (headers['content-length'] === undefined && stream !== undefined && !stream.endAfterHeaders && !stream.readableEnded) {
    headers['transfer-encoding'] = 'chunked'
  }
  const r = res as unknown as http2.Http2ServerResponse
  const writeHead = r.writeHead
  r.writeHead = function (this: http2.Http2ServerResponse, status: number, a?: unknown, b?: unknown) {
    if (typeof a === 'object' && a !== null && !Array.isArray(a)) a = withoutConnectionHeaders(a as Headers)
    if (typeof b === 'object' && b !== null && !Array.isArray(b)) b = withoutConnectionHeaders(b as Headers)
    return (writeHead as (...args: unknown[]) => http2.Http2ServerResponse).call(this, status, a, b)
  } as typeof r.writeHead
  const setHeader = r.setHeader
  r.setHeader = function (this: http2.Http2ServerResponse, name: string, value: string | string[] | number) {
    if (CONNECTION_SPECIFIC.has(name.toLowerCase())) return this
    return setHeader.call(this, name, value)
  } as typeof r.setHeader
}

/**
 * Reads the first bytes of a plain-HTTP connection and calls `onPreface(true)` when they are
 * the HTTP/2 preface, `onPreface(false)` as soon as they cannot be (any HTTP/1.x request);
 * the bytes read are put back first, so whoever serves the socket reads them again. A client
 * that sends nothing gets `onSilent` after `silentMs` (0 = never), as Node's head deadline
 * would have cut it.
 */
export function sniffPreface (socket: Socket, silentMs: number, onPreface: (h2: boolean) => void, onSilent: () => void): void {
  const chunks: Buffer[] = []
  let length = 0
  const timer = silentMs > 0
    ? setTimeout(() => {
      cleanup()
      // Nobody serves the socket now: `onSilent` answers 408 and ends it, and a client that
      // resets it meanwhile must not become an uncaught 'error' (one stack trace each).
      socket.on('error', () => socket.destroy())
      onSilent()
    }, silentMs)
    : undefined
  const onError = (): void => { cleanup(); socket.destroy() }
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk)
    length += chunk.length
    const data = chunks.length === 1 ? chunk : Buffer.concat(chunks)
    const n = Math.min(data.length, H2_PREFACE.length)
    const h2 = data.subarray(0, n).equals(H2_PREFACE.subarray(0, n))
    if (h2 && length < H2_PREFACE.length) return
    cleanup()
    socket.pause()
    socket.unshift(data)
    onPreface(h2)
  }
  const cleanup = (): void => {
    if (timer !== undefined) clearTimeout(timer)
    socket.off('data', onData)
    socket.off('error', onError)
    socket.off('end', onError)
  }
  socket.on('error', onError)
  socket.on('end', onError)
  socket.on('data', onData)
}

/** How a session's prematurely reset streams are judged (Envoy's premature-reset rule, in spirit). */
const RESET_MIN_STREAMS = 100
const RESET_MAX_PER_SECOND = 200

/**
 * Rapid reset (CVE-2023-44487): a client that opens streams and resets them before they are
 * answered makes the gateway start work (a backend call per stream) at no cost of its own.
 * A session is ended with GOAWAY ENHANCE_YOUR_CALM once at least half of its streams (after
 * the first RESET_MIN_STREAMS) were reset unanswered, or more than RESET_MAX_PER_SECOND
 * were in one second; `onAbuse` is told why. Node's own HTTP/2 server lets such a session
 * run for thousands of streams.
 */
export function guardPrematureResets (session: http2.ServerHttp2Session, onAbuse: (detail: { opened: number, premature: number }) => void): void {
  let opened = 0
  let premature = 0
  let windowStart = performance.now()
  let inWindow = 0
  session.on('stream', (stream: http2.ServerHttp2Stream) => {
    opened++
    stream.once('close', () => {
      if (stream.headersSent || stream.rstCode === http2.constants.NGHTTP2_NO_ERROR || session.destroyed) return
      premature++
      const now = performance.now()
      if (now - windowStart > 1000) {
        windowStart = now
        inWindow = 0
      }
      inWindow++
      if ((opened >= RESET_MIN_STREAMS && premature * 2 >= opened) || inWindow > RESET_MAX_PER_SECOND) {
        onAbuse({ opened, premature })
        session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
        session.destroy()
      }
    })
  })
}
