/**
 * The admin server's routes: a Fastify app on the server admin/server.ts listens with (its
 * `serverFactory`), built when the first admin request arrives -- Fastify, ajv, find-my-way,
 * semver and the rest (~285 modules) are not part of starting a gateway. Every request first
 * passes the guard against cross-site writes and DNS rebinding (@portico/ops admin-guard.ts),
 * the first one included.
 */

import type * as Http from 'node:http'
import Fastify from 'fastify'
import { isPorticoError } from '@portico/engine'
import type { Logger } from 'pino'
import type { AdminView } from './view.ts'
import type { Address } from '../settings.ts'
import { configDump } from './config-dump.ts'
import { registerTraceRoutes } from './trace-stream.ts'
import { memoryStats } from './memory.ts'
import { tasksDump, workersTasksDump } from './tasks.ts'
import { cpuProfile, heapProfile } from './pprof.ts'
import type { HeapSampler } from './heap-sampler.ts'
import { findUiDir, registerUiStatic } from './ui-static.ts'
import { registerUiApi } from './ui-api.ts'
import { checkAdminMessage, checkAdminRequest, requestFacts, type AdminGuardOptions } from '@portico/ops'

export const ADMIN_ENDPOINTS: Array<[method: string, path: string, what: string]> = [
  ['GET', '/config_dump', 'the loaded configuration (secrets redacted)'],
  ['GET, POST', '/debug/trace', 'SSE stream of the next request\'s trace; filters: path, route, method, host, header'],
  ['GET, POST', '/logging', 'show the log level; POST ?level=<filter> sets it (e.g. info,engine=debug)'],
  ['GET', '/memory', 'process and V8 heap statistics'],
  ['GET', '/debug/pprof/profile', 'CPU profile (pprof), ?seconds=1..300 (default 10)'],
  ['GET', '/debug/pprof/heap', 'heap profile (pprof)'],
  ['GET', '/debug/tasks', 'listeners, connections, in-flight requests, pools, child processes'],
  ['GET', '/debug/mesh', 'the mesh identity: source, state and reason, SPIFFE ID, expiry, CA settings (no key, no token)'],
  ['GET', '/debug/workers', 'data-plane worker threads (the primary is the other serving loop): state, restarts, config generation, heap'],
  ['POST', '/debug/workers/terminate', '?worker=N: end worker N at once, as a crash would (it is restarted)'],
  ['POST', '/quitquitquit', 'graceful shutdown'],
  ['GET', '/ui', 'web UI (a browser asking for / is redirected there; /?format=text for this list)'],
  ['GET, POST', '/api/*', 'the web UI\'s JSON API (same-origin; changes need adminWrites)']
]

/** What the admin server is given (admin/server.ts); its app reads all of it. */
export interface AdminServerOptions {
  /** The running proxy, as admin sees it. */
  view: AdminView
  /** The admin server's own log (refused requests, a failed load of the app). */
  log: Logger
  address: Address
  /** Called by /quitquitquit after the response is sent. */
  onQuit: () => void
}

export interface AdminApp {
  /** Answers one request of the admin server (Fastify's request handler). */
  handle: (req: Http.IncomingMessage, res: Http.ServerResponse) => void
  /** Closes the UI's MCP sessions and the app (the server is closed by admin/server.ts). */
  close: () => Promise<void>
}

/**
 * Builds the admin app on `server` (listening already) and waits until it can answer. `heap`
 * was started with the server: the heap profile covers allocations since the process started
 * serving admin, not since its first admin request.
 */
export async function buildAdminApp (options: AdminServerOptions, server: Http.Server, heap: HeapSampler): Promise<AdminApp> {
  const { view, log } = options
  let handle: AdminApp['handle'] | undefined
  // The server is admin/server.ts's; Fastify gets its request handler rather than a server of
  // its own (the server's timeouts are set there as Fastify would set them).
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    serverFactory: handler => {
      handle = handler
      return server
    }
  })

  // Before anything else, on every path (404s included): no cross-site writes, no rebinding.
  const guard: AdminGuardOptions = { bindHost: options.address.host, allowedHosts: view.settings.adminAllowedHosts }
  app.addHook('onRequest', async (req, reply) => {
    const bad = checkAdminMessage(req.raw.url ?? '/', req.raw.rawHeaders)
    if (bad !== null) {
      log.debug({ method: req.method, url: req.raw.url, reason: bad }, 'admin request refused')
      return await reply.code(400).header('connection', 'close').type('text/plain').send(`bad request: ${bad}\n`)
    }
    const problem = checkAdminRequest(requestFacts(req.method, req.headers), guard)
    if (problem === null) return
    log.debug({ method: req.method, url: req.url, host: req.headers.host, origin: req.headers.origin, secFetchSite: req.headers['sec-fetch-site'], reason: problem }, 'admin request refused')
    if (req.url.startsWith('/api/')) return await reply.code(403).send({ error: 'forbidden', message: problem })
    return await reply.code(403).type('text/plain').send(`forbidden: ${problem}\n`)
  })

  const uiDir = findUiDir()
  app.get('/', async (req, reply) => {
    // Browsers (Accept: text/html) go to the web UI; curl, porticoctl and tests get the list.
    const wantsText = (req.query as { format?: string }).format === 'text'
    if (uiDir !== null && !wantsText && /\btext\/html\b/.test(req.headers.accept ?? '')) return reply.redirect('/ui/', 302)
    const lines = ADMIN_ENDPOINTS.map(([m, p, w]) => `${m.padEnd(10)} ${p.padEnd(22)} ${w}`)
    return reply.type('text/plain').send(`portico admin\n\n${lines.join('\n')}\n${uiDir === null ? '\n(the web UI is not built here)\n' : ''}`)
  })
  registerUiStatic(app, uiDir)
  const uiApi = registerUiApi(app, view, guard)

  app.get('/config_dump', async (_req, reply) => {
    const dump = configDump(view)
    ;(dump.config as Record<string, unknown>).logging = { level: view.logs.current, format: view.settings.logFormat }
    return reply.type('application/json').send(JSON.stringify(dump, null, 2))
  })

  registerTraceRoutes(app, view.engine.hub, view.pool)

  const logging = async (req: { query: unknown, method: string }, reply: import('fastify').FastifyReply) => {
    const level = (req.query as { level?: string }).level
    if (req.method === 'POST' && level !== undefined) {
      try {
        view.logs.set(level)
      } catch (err) {
        return reply.code(400).type('text/plain').send(`${(err as Error).message}\n`)
      }
    }
    return reply.type('text/plain').send(`current log level is ${view.logs.current}\n`)
  }
  app.get('/logging', logging)
  app.post('/logging', logging)

  const pool = view.pool
  app.get('/memory', async () => pool === null ? memoryStats() : { ...memoryStats(), workers: await pool.heaps() })
  app.get('/debug/mesh', async () => view.meshStatus())
  app.get('/debug/tasks', async () => pool === null ? tasksDump(view) : await workersTasksDump(view, pool))
  app.get('/debug/workers', async () => {
    if (pool === null) return { workers: 1, threads: [] }
    const heaps = new Map((await pool.heaps()).map(h => [h.worker, h.heap]))
    return { workers: view.settings.workers, threads: pool.info().map(w => ({ ...w, heap: heaps.get(w.worker) ?? null })) }
  })
  app.post('/debug/workers/terminate', async (req, reply) => {
    const n = Number((req.query as { worker?: string }).worker)
    if (pool === null || !await pool.terminate(n)) return reply.code(400).type('text/plain').send(`no running worker "${(req.query as { worker?: string }).worker ?? ''}"\n`)
    return reply.type('text/plain').send(`worker ${n} terminated; it is restarted\n`)
  })

  app.get('/debug/pprof/profile', async (req, reply) => {
    const raw = (req.query as { seconds?: string }).seconds
    const seconds = raw === undefined ? 10 : Number(raw)
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > 300) {
      return reply.code(400).type('text/plain').send(`invalid seconds "${raw}": an integer from 1 to 300 (default 10)\n`)
    }
    // With data-plane workers the requests run on every loop: worker 1 unless ?worker= names
    // another (0: the primary, which serves its share, the admin and MCP sessions).
    const rawWorker = (req.query as { worker?: string }).worker
    const worker = pool === null ? 0 : rawWorker === undefined ? 1 : Number(rawWorker)
    if (pool !== null && (!Number.isInteger(worker) || worker < 0 || worker > view.settings.workers - 1)) {
      return reply.code(400).type('text/plain').send(`invalid worker "${rawWorker}": 0 (the primary) to ${view.settings.workers - 1}\n`)
    }
    try {
      const profile = worker === 0 ? await cpuProfile(seconds) : await pool!.profile(worker, seconds)
      return reply.type('application/octet-stream').header('content-disposition', 'attachment; filename="cpu.pb.gz"').send(Buffer.from(profile))
    } catch (err) {
      if (isPorticoError(err, 'PORTICO_PROFILE_BUSY')) return reply.code(409).type('text/plain').send(`${err.message}\n`)
      throw err
    }
  })
  app.get('/debug/pprof/heap', async (_req, reply) => {
    const profile = await heapProfile(heap)
    return reply.type('application/octet-stream').header('content-disposition', 'attachment; filename="heap.pb.gz"').send(Buffer.from(profile))
  })

  app.post('/quitquitquit', async (_req, reply) => {
    reply.raw.once('finish', () => options.onQuit())
    return reply.type('text/plain').send('shutdown now\n')
  })

  await app.ready()
  return {
    handle: handle!,
    close: async () => {
      await uiApi.close()
      await app.close()
    }
  }
}
