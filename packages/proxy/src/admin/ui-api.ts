/**
 * `/api/*`: what the web UI (`/ui`) asks the admin server beyond the endpoints porticoctl
 * uses. JSON in, JSON out.
 *
 * - `GET /api/overview`: version, uptime, listeners and ports, readiness, reloads, settings, mesh identity.
 * - `GET /api/logging`, `POST /api/logging {level}`: the log filter (POST needs writes).
 * - `POST /api/cel {expression, token?, vars?}`: evaluates a CEL expression with the
 *   engine's CEL, over `jwt` decoded (not verified) from a pasted token and sample
 *   `request`/`source`/`mcp`/`apiKey`/`basicAuth` objects. Changes nothing.
 * - `POST /api/trace/fire {url, method, headers, body, port, tag}`: sends one request through
 *   a listener of this proxy, tagged so an armed `/debug/trace?header=…` catches it (writes).
 * - `POST /api/mcp/connect|list|call|prompt|read|close`: the MCP playground (writes).
 *
 * Same origin only, no CORS: no `Access-Control-*` header is ever sent; a request whose
 * `Origin` is not this server's (any method, reads too), or whose `Host` is a DNS name other
 * than `localhost` or an allowed one (DNS rebinding, see @portico/ops admin-guard.ts), is refused with 403; POST bodies must be `application/json` (so a cross-site
 * form cannot post one without a preflight that is never granted). Endpoints that change
 * something answer 403 unless `adminWrites` is on.
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { CEL_VARIABLES, PorticoError, compileCel, evalBool, isPorticoError, undici } from '@portico/engine'
import type { AdminView } from './view.ts'
import { version } from '../version.ts'
import { formatAddress } from '../settings.ts'
import { LEVELS } from '@portico/ops'
import { listenerDispatcher, listenerOrigin, listenerTarget } from './loopback.ts'
import { McpPlayground } from './mcp-playground.ts'
import { checkAdminHost, checkSameOrigin, requestFacts, type AdminGuardOptions } from '@portico/ops'
import { performance } from '@portico/engine/clock'

/** The guard options of an admin on 127.0.0.1 with no extra names (unit tests). */
const LOOPBACK_ADMIN: AdminGuardOptions = { bindHost: '127.0.0.1', allowedHosts: [] }

/** The header the UI tags a fired request with (the trace filter is `header=<this>:<tag>`). */
export const UI_TRACE_HEADER = 'x-portico-ui-trace'

/** Largest response body the fire endpoint hands back (the rest is cut, and said so). */
const FIRE_BODY_LIMIT = 64 * 1024

export const LOG_COMPONENTS = ['portico', 'engine', 'listeners', 'request', 'mcp', 'tracing'] as const

/**
 * Same-origin and anti-rebinding checks for every /api request. Stricter than the admin-wide
 * guard (@portico/ops admin-guard.ts): a cross-origin read is refused too, and POST bodies must be JSON.
 */
export function checkApiRequest (req: FastifyRequest, options: AdminGuardOptions = LOOPBACK_ADMIN): string | null {
  const facts = requestFacts(req.method, req.headers)
  const problem = checkAdminHost(facts.host, options) ?? checkSameOrigin(facts)
  if (problem !== null) return problem
  if (req.method === 'POST' && !/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    return 'POST bodies must be application/json'
  }
  return null
}

function body (req: FastifyRequest): Record<string, unknown> {
  const b = req.body
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', 'the body must be a JSON object')
  return b as Record<string, unknown>
}

function str (b: Record<string, unknown>, key: string, required = false): string | undefined {
  const v = b[key]
  if (v === undefined || v === null) {
    if (required) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `"${key}" is required`)
    return undefined
  }
  if (typeof v !== 'string') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `"${key}" must be a string`)
  return v
}

function stringMap (v: unknown, what: string): Record<string, string> {
  if (v === undefined || v === null) return {}
  if (typeof v !== 'object' || Array.isArray(v)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `"${what}" must be an object of strings`)
  const out: Record<string, string> = {}
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `"${what}.${k}" must be a string`)
    out[k] = val
  }
  return out
}

/** Headers as `[[name, value], …]` or `{name: value}`. */
function headerList (v: unknown): Array<[string, string]> {
  if (v === undefined || v === null) return []
  if (Array.isArray(v)) {
    return v.map((pair, i) => {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `"headers[${i}]" must be [name, value]`)
      return [pair[0], pair[1]] as [string, string]
    })
  }
  return Object.entries(stringMap(v, 'headers'))
}

/** The claims of a JWT, decoded and NOT verified (the playground only tries rules). */
export function decodeJwt (token: string): { header: Record<string, unknown>, claims: Record<string, unknown> } {
  const t = token.trim().replace(/^Bearer\s+/i, '')
  const parts = t.split('.')
  if (parts.length < 2) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', 'the token is not a JWT (header.payload.signature)')
  const part = (s: string, what: string): Record<string, unknown> => {
    let value: unknown
    try {
      value = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'))
    } catch {
      throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `the token's ${what} is not base64url JSON`)
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `the token's ${what} is not a JSON object`)
    return value as Record<string, unknown>
  }
  return { header: part(parts[0]!, 'header'), claims: part(parts[1]!, 'payload') }
}

/** A CEL value as JSON (lists, maps, int64 as numbers when exact, bytes as base64). */
export function celToJson (v: unknown, depth = 0): unknown {
  if (depth > 32) return '…'
  if (v === null || v === undefined || typeof v === 'boolean' || typeof v === 'string') return v ?? null
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v)
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('base64') }
  if (v instanceof Error) return { error: v.message }
  const o = v as Record<string | symbol, unknown>
  if (typeof o.value === 'bigint' && Object.keys(o).length <= 2) return celToJson(o.value, depth + 1)
  if (typeof o.entries === 'function' && typeof o.has === 'function') {
    const out: Record<string, unknown> = {}
    for (const [k, val] of (o as unknown as ReadonlyMap<unknown, unknown>).entries()) out[String(k)] = celToJson(val, depth + 1)
    return out
  }
  if (typeof o[Symbol.iterator] === 'function') return [...(o as unknown as Iterable<unknown>)].map(x => celToJson(x, depth + 1))
  const desc = o.desc as { typeName?: string } | undefined
  if (desc?.typeName !== undefined) return { type: desc.typeName }
  if (Array.isArray(v)) return v.map(x => celToJson(x, depth + 1))
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, val] of Object.entries(v)) out[k] = celToJson(val, depth + 1)
    return out
  }
  return String(v)
}

/** Sample variables the CEL playground starts from (what a request would give rules). */
export const SAMPLE_VARS: Record<string, unknown> = {
  request: { method: 'GET', path: '/api/items', pathAndQuery: '/api/items?limit=10', host: 'api.example.com', scheme: 'http', headers: { 'user-agent': 'curl/8.5.0', accept: '*/*' } },
  source: { address: '127.0.0.1', port: 51234 },
  apiKey: null,
  basicAuth: null,
  mcp: null
}

export function registerUiApi (app: FastifyInstance, view: AdminView, guardOptions: AdminGuardOptions = LOOPBACK_ADMIN): { close: () => Promise<void> } {
  const writes = view.settings.adminWrites
  const mcp = new McpPlayground(view)

  const guard = async (req: FastifyRequest, reply: FastifyReply) => {
    const problem = checkApiRequest(req, guardOptions)
    if (problem !== null) {
      const media = problem.startsWith('POST bodies')
      return await reply.code(media ? 415 : 403).send({ error: media ? 'unsupported media type' : 'forbidden', message: problem })
    }
  }
  const needWrites = async (_req: FastifyRequest, reply: FastifyReply) => {
    if (!writes) {
      return await reply.code(403).send({ error: 'read-only', message: 'the admin server is read-only: start Portico with config.adminWrites: true (or ADMIN_WRITES=true) to allow this' })
    }
  }
  const handle = (fn: (req: FastifyRequest) => Promise<unknown>) => async (req: FastifyRequest, reply: FastifyReply) => {
    try {
      return await reply.send(await fn(req))
    } catch (err) {
      // The caller's mistakes (PORTICO_ADMIN_BAD_REQUEST, PORTICO_NOT_A_LISTENER, PORTICO_UNKNOWN_MCP_SESSION) carry their status in the error table.
      if (isPorticoError(err) && err.status !== undefined) return await reply.code(err.status).send({ error: err.status === 404 ? 'not found' : 'bad request', message: err.message })
      return await reply.code(502).send({ error: 'failed', message: (err as Error).message })
    }
  }

  app.register(async api => {
    api.addHook('onRequest', guard)

    api.get('/api/overview', handle(async () => overview(view)))

    api.get('/api/logging', handle(async () => ({ level: view.logs.current, levels: LEVELS, components: LOG_COMPONENTS, writable: writes })))
    api.post('/api/logging', { onRequest: needWrites }, handle(async req => {
      const level = str(body(req), 'level', true)!
      try {
        view.logs.set(level)
      } catch (err) {
        throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', (err as Error).message)
      }
      return { level: view.logs.current, levels: LEVELS, components: LOG_COMPONENTS, writable: writes }
    }))

    api.get('/api/cel', handle(async () => ({ variables: CEL_VARIABLES, sample: SAMPLE_VARS })))
    api.post('/api/cel', handle(async req => evalCel(body(req))))

    api.post('/api/trace/fire', { onRequest: needWrites }, handle(async req => await fire(view, body(req))))

    api.post('/api/mcp/connect', { onRequest: needWrites }, handle(async req => {
      const b = body(req)
      const port = b.port
      if (typeof port !== 'number') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', '"port" must be a listener port')
      return await mcp.connect({ port, path: str(b, 'path', true)!, host: str(b, 'host'), headers: stringMap(b.headers, 'headers'), insecure: b.insecure === true })
    }))
    api.post('/api/mcp/list', { onRequest: needWrites }, handle(async req => await mcp.list(str(body(req), 'session', true)!)))
    api.post('/api/mcp/call', { onRequest: needWrites }, handle(async req => {
      const b = body(req)
      const args = b.arguments ?? {}
      if (typeof args !== 'object' || args === null || Array.isArray(args)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', '"arguments" must be an object')
      return await mcp.callTool(str(b, 'session', true)!, str(b, 'name', true)!, args as Record<string, unknown>)
    }))
    api.post('/api/mcp/prompt', { onRequest: needWrites }, handle(async req => {
      const b = body(req)
      return await mcp.getPrompt(str(b, 'session', true)!, str(b, 'name', true)!, stringMap(b.arguments, 'arguments'))
    }))
    api.post('/api/mcp/read', { onRequest: needWrites }, handle(async req => {
      const b = body(req)
      return await mcp.readResource(str(b, 'session', true)!, str(b, 'uri', true)!)
    }))
    api.post('/api/mcp/close', { onRequest: needWrites }, handle(async req => ({ closed: await mcp.close(str(body(req), 'session', true)!) })))

    api.all('/api/*', async (_req, reply) => await reply.code(404).send({ error: 'not found', message: 'no such admin API endpoint' }))
  })

  return { close: () => mcp.closeAll() }
}

function overview (view: AdminView): Record<string, unknown> {
  const ir = view.engine.config?.ir
  const bound = new Map(view.addresses().map(a => [a.key, a.port]))
  const pending = view.pending()
  const lastError = view.reloads.find(r => !r.ok) ?? null
  const s = view.settings
  return {
    version,
    node: process.version,
    pid: process.pid,
    startedAt: view.startedAt.toISOString(),
    uptimeSeconds: Math.round((Date.now() - view.startedAt.getTime()) / 1000),
    configVersion: ir?.version ?? null,
    ready: pending.length === 0,
    pending,
    ports: view.ports,
    addresses: {
      admin: s.adminAddr === null ? 'off' : formatAddress({ ...s.adminAddr, port: view.ports.admin }),
      stats: s.statsAddr === null ? 'off' : formatAddress({ ...s.statsAddr, port: view.ports.stats }),
      readiness: s.readinessAddr === null ? 'off' : formatAddress({ ...s.readinessAddr, port: view.ports.readiness })
    },
    binds: (ir?.binds ?? []).map(b => ({
      key: b.key,
      address: b.address,
      port: bound.get(b.key) ?? b.port,
      protocol: b.protocol,
      listening: bound.has(b.key),
      listeners: b.listeners.map(l => ({ key: l.key, gateway: l.gateway, name: l.name, hostname: l.hostname ?? null, protocol: l.protocol, routes: l.routes.map(r => r.key) }))
    })),
    reloads: view.reloads,
    lastReloadError: lastError,
    adminWrites: s.adminWrites,
    tracing: s.debugTrace,
    logLevel: view.logs.current,
    traceHeader: UI_TRACE_HEADER,
    // The Overview's Mesh card: the identity's state, as /debug/mesh (never the key or the token).
    mesh: view.meshStatus()
  }
}

function evalCel (b: Record<string, unknown>): Record<string, unknown> {
  const expression = str(b, 'expression', true)!
  const token = str(b, 'token')
  const given = b.vars ?? {}
  if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', '"vars" must be an object')
  let decoded: ReturnType<typeof decodeJwt> | null = null
  if (token !== undefined && token.trim() !== '') decoded = decodeJwt(token)
  const vars: Record<string, unknown> = { ...SAMPLE_VARS, jwt: {}, ...(given as Record<string, unknown>) }
  if (decoded !== null) vars.jwt = decoded.claims
  for (const name of Object.keys(vars)) {
    if (!(CEL_VARIABLES as readonly string[]).includes(name)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `unknown variable "${name}" (known: ${CEL_VARIABLES.join(', ')})`)
  }
  const jwt = decoded === null ? null : { header: decoded.header, claims: decoded.claims, verified: false }
  let program
  try {
    program = compileCel(expression)
  } catch (err) {
    return { ok: false, stage: 'compile', error: (err as Error).message, jwt }
  }
  let value: unknown
  try {
    value = program.evaluate(vars)
  } catch (err) {
    value = err instanceof Error ? err : new Error(String(err))
  }
  const rule = evalBool(program, vars)
  if (value instanceof Error) return { ok: false, stage: 'evaluate', error: value.message, matches: false, jwt }
  return { ok: true, value: celToJson(value), type: value === null ? 'null' : typeof value === 'bigint' ? 'int' : Array.isArray(celToJson(value)) ? 'list' : typeof value, matches: rule.value, ruleError: rule.error, jwt }
}

async function fire (view: AdminView, b: Record<string, unknown>): Promise<Record<string, unknown>> {
  const rawUrl = str(b, 'url', true)!
  let url: URL
  try {
    url = new URL(rawUrl)
  } catch {
    throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `invalid URL "${rawUrl}" (want http://host/path)`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', 'the URL must be http:// or https://')
  const method = (str(b, 'method') ?? 'GET').toUpperCase()
  if (!/^[A-Z]+$/.test(method)) throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', `invalid method "${method}"`)
  const port = b.port
  if (typeof port !== 'number') throw new PorticoError('PORTICO_ADMIN_BAD_REQUEST', '"port" must be a listener port')
  const target = listenerTarget(view, port)
  const tag = str(b, 'tag')
  const headers: Array<[string, string]> = []
  const given = headerList(b.headers)
  const names = new Set(given.map(([n]) => n.toLowerCase()))
  if (!names.has('user-agent')) headers.push(['user-agent', `portico-ui/${version}`])
  if (!names.has('accept')) headers.push(['accept', '*/*'])
  headers.push(...given.filter(([n]) => n.toLowerCase() !== 'host'))
  if (tag !== undefined && tag !== '') headers.push([UI_TRACE_HEADER, tag])
  const reqBody = str(b, 'body')
  const dispatcher = listenerDispatcher(target, { insecure: b.insecure === true })
  const path = `${url.pathname}${url.search}`
  const started = performance.now()
  try {
    const res = await undici().request(`${listenerOrigin(target, url.host)}${path}`, {
      method: method as 'GET',
      headers: headers.flat(),
      body: reqBody === undefined || reqBody === '' || method === 'GET' || method === 'HEAD' ? undefined : reqBody,
      dispatcher
    })
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of res.body) {
      const buf = Buffer.from(chunk as Uint8Array)
      if (size < FIRE_BODY_LIMIT) chunks.push(buf.subarray(0, FIRE_BODY_LIMIT - size))
      size += buf.length
    }
    return {
      status: res.statusCode,
      headers: res.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      bodyBytes: size,
      truncated: size > FIRE_BODY_LIMIT,
      durationMs: Math.round((performance.now() - started) * 100) / 100,
      sent: { method, url: url.href, to: `${target.address}:${target.port}`, headers }
    }
  } catch (err) {
    const e = err as { code?: string, message?: string, cause?: { message?: string } }
    throw new Error(`the request to ${target.address}:${target.port} (Host: ${url.host}) failed: ${e.cause?.message ?? e.message ?? String(err)}`)
  } finally {
    dispatcher.close().catch(() => {})
  }
}
