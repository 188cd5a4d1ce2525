/**
 * The admin server, on 127.0.0.1:15000 unless configured: inspection and control of one proxy.
 * Bound to loopback by default because it has no authentication; every request first passes
 * the guard against cross-site writes and DNS rebinding (@portico/ops admin-guard.ts).
 *
 * Plain node:http listens at start; the routes (admin/app.ts, a Fastify app) are built when
 * the first request arrives, and that request — like any arriving meanwhile — waits for them.
 * Fastify and what it loads (ajv, find-my-way, semver, fast-json-stringify: ~285 modules)
 * took ~180 ms of a ~480 ms start for a server most gateways are never asked anything on
 * (docs/multicore.md, "Start-up"). A first request refused by the guard is refused by the
 * same hook as any other, so the refusal is the same.
 */

import type * as Http from 'node:http'
import type { Duplex } from 'node:stream'
import http from '@portico/engine/node-http'
import { HeapSampler } from './heap-sampler.ts'
// Types only: app.ts itself loads with the first admin request.
import type { AdminApp, AdminServerOptions } from './app.ts'

export type { AdminServerOptions } from './app.ts'

export interface AdminServer {
  port: number
  /** Whether the admin app (Fastify) is built: false until the first admin request. */
  appBuilt: () => boolean
  close: () => Promise<void>
}

/** Fastify's timeouts for a server it creates itself (fastify.js defaults), kept now that it is given one. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000

export async function startAdminServer (options: AdminServerOptions): Promise<AdminServer> {
  const { log } = options
  // Started with the server, not with the app: a heap profile covers allocations since then.
  const heap = new HeapSampler()
  await heap.start()

  let app: AdminApp | null = null
  let building: Promise<AdminApp> | null = null
  let closing = false
  const server = http.createServer()
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS
  server.requestTimeout = 0
  server.setTimeout(0)

  const build = (): Promise<AdminApp> => building ??= (async () => {
    const started = performance.now()
    const { buildAdminApp } = await import('./app.ts')
    const built = await buildAdminApp(options, server, heap)
    if (closing) {
      await built.close()
      throw new Error('the admin server is closing')
    }
    app = built
    log.debug({ ms: Math.round(performance.now() - started) }, 'admin app loaded (first admin request)')
    return built
  })().catch((err: unknown) => {
    // The next request tries again; this one, and those waiting with it, get a 500.
    building = null
    throw err
  })

  server.on('request', (req: Http.IncomingMessage, res: Http.ServerResponse) => {
    if (app !== null) {
      app.handle(req, res)
      return
    }
    // The request's body stays in its stream, unread, until the app reads it.
    build().then(built => built.handle(req, res), (err: unknown) => {
      log.error({ err, method: req.method, url: req.url }, 'admin app failed to load')
      if (res.headersSent) res.destroy()
      else res.writeHead(500, { 'content-type': 'text/plain', connection: 'close' }).end('admin server error: the admin app failed to load (see the log)\n')
    })
  })
  // Once built, Fastify answers a malformed request itself (its own clientError listener); before,
  // this answers it as Fastify's default handler does.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (app === null) answerClientError(err, socket)
  })

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: options.address.host, port: options.address.port }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const addr = server.address()
  return {
    port: typeof addr === 'object' && addr !== null ? addr.port : options.address.port,
    appBuilt: () => app !== null,
    close: async () => {
      closing = true
      heap.stop()
      const built = app ?? await building?.catch(() => null) ?? null
      await built?.close()
      await new Promise<void>(resolve => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    }
  }
}

/** What Fastify's default clientError handler writes (fastify.js defaultClientErrorHandler). */
function answerClientError (err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [code, message] = err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
    ? [408, 'Client Timeout']
    : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Exceeded maximum allowed HTTP header size'] : [400, 'Client Error']
  const status = http.STATUS_CODES[code]!
  const body = `{"error":"${status}","message":"${message}","statusCode":${code}}`
  if (socket.writable) socket.write(`HTTP/1.1 ${code} ${status}\r\nContent-Length: ${body.length}\r\nContent-Type: application/json\r\n\r\n${body}`)
  socket.destroy(err)
}
