/**
 * The web UI's MCP playground, run in the proxy process: the official MCP SDK client
 * connects (streamable HTTP) to an MCP route of one of this proxy's own listeners — the
 * connection always goes to that listener, the URL's host only names the Host header — and
 * the browser drives it through `/api/mcp/*`, same-origin. A session handle lives until it is
 * closed, or idles for SESSION_IDLE_MS; at most MAX_SESSIONS at once (the oldest goes).
 */

import { randomUUID } from 'node:crypto'
import type { Agent, fetch as undiciFetch } from 'undici'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { PorticoError, undici } from '@portico/engine'
import type { AdminView } from './view.ts'
import { version } from '../version.ts'
import { listenerDispatcher, listenerOrigin, listenerTarget } from './loopback.ts'

export const SESSION_IDLE_MS = 10 * 60_000
export const MAX_SESSIONS = 8
const CALL_TIMEOUT_MS = 60_000

export interface ConnectRequest {
  port: number
  /** Path of the MCP route, e.g. `/mcp`. */
  path: string
  /** Host header (and TLS server name); default `localhost`. */
  host?: string
  /** Extra request headers (say, `Authorization: Bearer …`). */
  headers?: Record<string, string>
  insecure?: boolean
}

interface Session {
  id: string
  client: Client
  transport: StreamableHTTPClientTransport
  dispatcher: Agent
  url: string
  lastUsed: number
  notifications: Array<{ at: string, method: string, params: unknown }>
}

export class McpPlayground {
  private readonly sessions = new Map<string, Session>()
  private readonly sweeper: NodeJS.Timeout
  private readonly view: Pick<AdminView, 'addresses'>

  constructor (view: Pick<AdminView, 'addresses'>) {
    this.view = view
    this.sweeper = setInterval(() => this.sweep(), 30_000)
    this.sweeper.unref()
  }

  async connect (req: ConnectRequest): Promise<Record<string, unknown>> {
    const target = listenerTarget(this.view, req.port)
    const path = req.path.startsWith('/') ? req.path : `/${req.path}`
    const host = req.host === undefined || req.host === '' ? 'localhost' : req.host
    if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:.]+\](:\d{1,5})?$/.test(host)) throw new Error(`invalid host "${host}"`)
    const url = `${listenerOrigin(target, host)}${path}`
    const dispatcher = listenerDispatcher(target, { insecure: req.insecure === true, timeoutMs: 0 })
    const fetchVia: FetchLike = async (input, init) => await (undici().fetch(input, { ...(init as object), dispatcher } as Parameters<typeof undiciFetch>[1]) as unknown as Promise<Response>)
    // The SDK's client (and zod under it) loads with the first playground session, not with the admin server.
    const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/streamableHttp.js')
    ])
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      fetch: fetchVia,
      requestInit: { headers: { ...(req.headers ?? {}) } }
    })
    const client = new Client({ name: 'portico-ui', version }, { capabilities: {} })
    const session: Session = { id: randomUUID(), client, transport, dispatcher, url, lastUsed: Date.now(), notifications: [] }
    client.fallbackNotificationHandler = async n => {
      session.notifications.push({ at: new Date().toISOString(), method: n.method, params: n.params ?? null })
      if (session.notifications.length > 50) session.notifications.shift()
    }
    try {
      await client.connect(transport, { timeout: CALL_TIMEOUT_MS })
    } catch (err) {
      await client.close().catch(() => {})
      dispatcher.close().catch(() => {})
      throw err
    }
    this.sessions.set(session.id, session)
    while (this.sessions.size > MAX_SESSIONS) {
      const oldest = [...this.sessions.values()].sort((a, b) => a.lastUsed - b.lastUsed)[0]!
      await this.close(oldest.id)
    }
    return {
      session: session.id,
      url,
      mcpSessionId: transport.sessionId ?? null,
      protocolVersion: transport.protocolVersion ?? null,
      serverInfo: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? {},
      instructions: client.getInstructions() ?? null
    }
  }

  private get (id: string): Session {
    const s = this.sessions.get(id)
    if (s === undefined) throw new PorticoError('PORTICO_UNKNOWN_MCP_SESSION', `no MCP playground session ${id} (closed or expired: connect again)`)
    s.lastUsed = Date.now()
    return s
  }

  /** Tools, prompts, resources and resource templates (each list, or the error of its call). */
  async list (id: string): Promise<Record<string, unknown>> {
    const { client, notifications } = this.get(id)
    const caps = client.getServerCapabilities() ?? {}
    const opts = { timeout: CALL_TIMEOUT_MS }
    const one = async (has: boolean, call: () => Promise<unknown>) => {
      if (!has) return { items: [], unsupported: true }
      try {
        return { items: await call() }
      } catch (err) {
        return { items: [], error: (err as Error).message }
      }
    }
    const all = async <T>(page: (cursor: string | undefined) => Promise<{ nextCursor?: string | undefined } & Record<string, unknown>>, key: string): Promise<T[]> => {
      const out: T[] = []
      let cursor: string | undefined
      for (let i = 0; i < 50; i++) {
        const r = await page(cursor)
        out.push(...(r[key] as T[]))
        cursor = r.nextCursor
        if (cursor === undefined) break
      }
      return out
    }
    const [tools, prompts, resources, resourceTemplates] = await Promise.all([
      one(caps.tools !== undefined, () => all(c => client.listTools(c === undefined ? {} : { cursor: c }, opts), 'tools')),
      one(caps.prompts !== undefined, () => all(c => client.listPrompts(c === undefined ? {} : { cursor: c }, opts), 'prompts')),
      one(caps.resources !== undefined, () => all(c => client.listResources(c === undefined ? {} : { cursor: c }, opts), 'resources')),
      one(caps.resources !== undefined, () => all(c => client.listResourceTemplates(c === undefined ? {} : { cursor: c }, opts), 'resourceTemplates'))
    ])
    return { tools, prompts, resources, resourceTemplates, notifications }
  }

  async callTool (id: string, name: string, args: Record<string, unknown>): Promise<unknown> {
    return await this.get(id).client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS })
  }

  async getPrompt (id: string, name: string, args: Record<string, string>): Promise<unknown> {
    return await this.get(id).client.getPrompt({ name, arguments: args }, { timeout: CALL_TIMEOUT_MS })
  }

  async readResource (id: string, uri: string): Promise<unknown> {
    return await this.get(id).client.readResource({ uri }, { timeout: CALL_TIMEOUT_MS })
  }

  /** Ends the MCP session (DELETE upstream) and forgets the handle. */
  async close (id: string): Promise<boolean> {
    const s = this.sessions.get(id)
    if (s === undefined) return false
    this.sessions.delete(id)
    await s.transport.terminateSession().catch(() => {})
    await s.client.close().catch(() => {})
    await s.dispatcher.close().catch(() => {})
    return true
  }

  private sweep (): void {
    const now = Date.now()
    for (const s of this.sessions.values()) {
      if (now - s.lastUsed > SESSION_IDLE_MS) void this.close(s.id)
    }
  }

  async closeAll (): Promise<void> {
    clearInterval(this.sweeper)
    await Promise.allSettled([...this.sessions.keys()].map(id => this.close(id)))
  }
}
