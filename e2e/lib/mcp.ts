/**
 * MCP parts for tests: the reference server `@modelcontextprotocol/server-everything` as a
 * stdio target, a streamable-HTTP MCP server built with the official SDK (tools that
 * exercise sampling, elicitation, roots, progress, cancellation, logging and pagination),
 * and the official SDK client pointed at a Portico MCP route.
 */

import http from 'node:http'
import { readdirSync, readFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import {
  CallToolRequestSchema, CompleteRequestSchema, CreateMessageRequestSchema, ElicitRequestSchema, GetPromptRequestSchema, ListPromptsRequestSchema,
  ListResourcesRequestSchema, ListRootsRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema, SetLevelRequestSchema,
  SubscribeRequestSchema, type CallToolResult, type ClientCapabilities
} from '@modelcontextprotocol/sdk/types.js'
import type { Socket } from 'node:net'

const require = createRequire(import.meta.url)

/** The entry script of server-everything, run with this test's own Node. */
export const EVERYTHING_SCRIPT = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js')

/**
 * The processes under `pid` (any depth, children of every thread: a worker thread's spawns
 * are children of its own task) whose command line contains `marker` — real processes from
 * /proc, not what the gateway says it runs.
 */
export function processesUnder (pid: number, marker: string): number[] {
  const found: number[] = []
  const walk = (p: number) => {
    let tasks: string[] = []
    try {
      tasks = readdirSync(`/proc/${p}/task`)
    } catch {
      return
    }
    for (const tid of tasks) {
      let children: number[] = []
      try {
        children = readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(x => x !== '').map(Number)
      } catch {}
      for (const child of children) {
        try {
          if (readFileSync(`/proc/${child}/cmdline`, 'utf8').includes(marker)) found.push(child)
        } catch {}
        walk(child)
      }
    }
  }
  walk(pid)
  return found
}

export function everythingTarget (name = 'everything'): { name: string, stdio: { cmd: string, args: string[] } } {
  return { name, stdio: { cmd: process.execPath, args: [EVERYTHING_SCRIPT, 'stdio'] } }
}

export interface SdkServer {
  url: string
  port: number
  /** Cancellation notifications the server saw, by request. */
  cancelled: string[]
  /** Sessions the server knows. */
  sessions: Map<string, StreamableHTTPServerTransport>
  /** `params._meta` of each tools/call, in order (the trace context a gateway propagates). */
  toolCallMeta: Array<Record<string, unknown>>
  /** The tool names of the tools/call the server has answered, in order (the answer handed to its transport). */
  answered: string[]
  /** The resource URIs of each notifications/resources/updated the server has sent, in order. */
  updated: string[]
  close(): Promise<void>
}

/**
 * A streamable-HTTP MCP server built with the SDK's low-level Server. Tools:
 * `add`, `sample` (asks the client to sample), `elicit` (asks the client for input), `roots`
 * (asks the client for its roots), `slow` (progress notifications, honours cancellation),
 * `log` (a logging notification); 30 `item-N` tools paginated 10 at a time; prompt `greet`
 * (its `who` completes to Ada, Alan, Grace); resources `memo://one` and `memo://two`
 * (subscribable).
 */
export async function startSdkServer (name = 'sdk'): Promise<SdkServer> {
  const sessions = new Map<string, StreamableHTTPServerTransport>()
  const cancelled: string[] = []
  const toolCallMeta: Array<Record<string, unknown>> = []
  const answered: string[] = []
  const updated: string[] = []

  const makeServer = () => {
    const server = new Server({ name: `${name}-server`, version: '1.0.0' }, {
      capabilities: { tools: { listChanged: true }, prompts: {}, resources: { subscribe: true }, logging: {}, completions: {} },
      instructions: `The ${name} test server.`
    })
    const items = Array.from({ length: 30 }, (_, i) => ({ name: `item-${i}`, description: `item ${i}`, inputSchema: { type: 'object' as const } }))
    const tools = [
      { name: 'add', description: 'adds a and b', inputSchema: { type: 'object' as const, properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } },
      { name: 'sample', description: 'asks the client to sample', inputSchema: { type: 'object' as const, properties: { prompt: { type: 'string' } } } },
      { name: 'elicit', description: 'asks the user for a name', inputSchema: { type: 'object' as const } },
      { name: 'roots', description: 'lists the client roots', inputSchema: { type: 'object' as const } },
      { name: 'slow', description: 'reports progress then answers', inputSchema: { type: 'object' as const, properties: { steps: { type: 'number' }, delayMs: { type: 'number' } } } },
      { name: 'log', description: 'sends a logging notification', inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } } },
      ...items
    ]
    server.setRequestHandler(ListToolsRequestSchema, async req => {
      const start = req.params?.cursor !== undefined ? Number(req.params.cursor) : 0
      const page = tools.slice(start, start + 10)
      return start + 10 < tools.length ? { tools: page, nextCursor: String(start + 10) } : { tools: page }
    })
    const callTool: Parameters<typeof server.setRequestHandler<typeof CallToolRequestSchema>>[1] = async (req, extra): Promise<CallToolResult> => {
      const args = (req.params.arguments ?? {}) as Record<string, unknown>
      toolCallMeta.push({ ...req.params._meta })
      switch (req.params.name) {
        case 'add':
          return { content: [{ type: 'text', text: String(Number(args.a) + Number(args.b)) }] }
        case 'sample': {
          const result = await server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? 'hello') } }], maxTokens: 10 }, { relatedRequestId: extra.requestId })
          return { content: [{ type: 'text', text: `sampled: ${(result.content as { text?: string }).text ?? ''}` }] }
        }
        case 'elicit': {
          const result = await server.elicitInput({ message: 'your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } }, { relatedRequestId: extra.requestId })
          return { content: [{ type: 'text', text: `elicited: ${result.action} ${JSON.stringify(result.content ?? {})}` }] }
        }
        case 'roots': {
          const result = await server.listRoots(undefined, { relatedRequestId: extra.requestId })
          return { content: [{ type: 'text', text: `roots: ${result.roots.map(r => r.uri).join(',')}` }] }
        }
        case 'slow': {
          const steps = Number(args.steps ?? 3)
          const delay = Number(args.delayMs ?? 50)
          const token = req.params._meta?.progressToken
          for (let i = 1; i <= steps; i++) {
            if (extra.signal.aborted) {
              cancelled.push(String(extra.requestId))
              return { content: [{ type: 'text', text: 'cancelled' }], isError: true }
            }
            await new Promise(resolve => setTimeout(resolve, delay))
            if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } })
          }
          if (extra.signal.aborted) cancelled.push(String(extra.requestId))
          return { content: [{ type: 'text', text: `done after ${steps} steps` }] }
        }
        case 'log':
          await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: name, data: String(args.text ?? '') } })
          return { content: [{ type: 'text', text: 'logged' }] }
        default:
          if (req.params.name.startsWith('item-')) return { content: [{ type: 'text', text: req.params.name }] }
          return { content: [{ type: 'text', text: `unknown tool ${req.params.name}` }], isError: true }
      }
    }
    server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const result = await callTool(req, extra)
      answered.push(req.params.name)
      return result
    })
    server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: [{ name: 'greet', arguments: [{ name: 'who', required: true }] }] }))
    server.setRequestHandler(GetPromptRequestSchema, async req => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Hello ${String(req.params.arguments?.who ?? 'nobody')} from ${name}` } }]
    }))
    server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [{ uri: 'memo://one', name: 'one' }, { uri: 'memo://two', name: 'two' }] }))
    server.setRequestHandler(ReadResourceRequestSchema, async req => ({ contents: [{ uri: req.params.uri, text: `content of ${req.params.uri}` }] }))
    server.setRequestHandler(SubscribeRequestSchema, async req => {
      setTimeout(() => { void server.sendResourceUpdated({ uri: req.params.uri }).then(() => updated.push(req.params.uri)) }, 20)
      return {}
    })
    server.setRequestHandler(SetLevelRequestSchema, async () => ({}))
    server.setRequestHandler(CompleteRequestSchema, async req => ({
      completion: { values: ['Ada', 'Alan', 'Grace'].filter(n => n.startsWith(req.params.argument.value)) }
    }))
    return server
  }

  const sockets = new Set<Socket>()
  const httpServer = http.createServer((req, res) => {
    void (async () => {
      const sid = req.headers['mcp-session-id']
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined
      if (transport === undefined) {
        if (typeof sid === 'string') {
          res.writeHead(404).end()
          return
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: id => { sessions.set(id, transport!) }
        })
        transport.onclose = () => { if (transport!.sessionId !== undefined) sessions.delete(transport!.sessionId) }
        await makeServer().connect(transport)
      }
      await transport.handleRequest(req, res)
    })().catch(err => {
      if (!res.headersSent) res.writeHead(500).end(String(err))
    })
  })
  httpServer.on('connection', s => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>(resolve => httpServer.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const port = (httpServer.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    cancelled,
    sessions,
    toolCallMeta,
    answered,
    updated,
    close: async () => {
      for (const t of sessions.values()) await t.close().catch(() => {})
      await new Promise<void>(resolve => {
        httpServer.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
    }
  }
}

export interface ClientOptions {
  capabilities?: ClientCapabilities
  /** Answers sampling requests (default: echoes the prompt upper-cased). */
  sampling?: (text: string) => string
  /** Answers elicitation requests. */
  elicit?: () => { action: 'accept' | 'decline' | 'cancel', content?: Record<string, unknown> }
  roots?: string[]
  transport?: 'streamable' | 'sse'
  sessionId?: string
}

/** The official SDK client connected to a Portico MCP endpoint. */
export async function connectClient (url: string, options: ClientOptions = {}): Promise<{ client: Client, transport: StreamableHTTPClientTransport | SSEClientTransport }> {
  const client = new Client({ name: 'e2e-client', version: '1.0.0' }, {
    capabilities: options.capabilities ?? { sampling: {}, elicitation: {}, roots: { listChanged: true } }
  })
  client.setRequestHandler(CreateMessageRequestSchema, async req => {
    const text = (req.params.messages[0]?.content as { text?: string }).text ?? ''
    return { role: 'assistant', model: 'test-model', content: { type: 'text', text: options.sampling?.(text) ?? text.toUpperCase() } }
  })
  client.setRequestHandler(ElicitRequestSchema, async () => options.elicit?.() ?? { action: 'accept', content: { name: 'Ada' } })
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: (options.roots ?? ['file:///work']).map(uri => ({ uri, name: uri })) }))
  const transport = options.transport === 'sse'
    ? new SSEClientTransport(new URL(url))
    : new StreamableHTTPClientTransport(new URL(url), options.sessionId !== undefined ? { sessionId: options.sessionId } : undefined)
  await client.connect(transport)
  return { client, transport }
}

/** The text of the first content item of a tool result. */
export function textOf (result: unknown): string {
  const content = (result as { content?: Array<{ type: string, text?: string }> }).content ?? []
  return content.find(c => c.type === 'text')?.text ?? ''
}
