/**
 * A streamable-HTTP MCP server for benchmarks, built with the official SDK: one tool,
 * `echo`, answering at once; the same server over the legacy HTTP+SSE transport (2024-11-05)
 * at `GET /sse` (its stream) and `POST /messages?sessionId=…`, for an SSE target.
 * Usage: node bench/servers/mcp-server.ts PORT — prints "ready".
 */

import http from 'node:http'
import { randomUUID } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const port = Number(process.argv[2] ?? 0)
const sessions = new Map<string, StreamableHTTPServerTransport>()
const legacy = new Map<string, SSEServerTransport>()

function makeServer (): Server {
  const server = new Server({ name: 'bench-mcp', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'echo', inputSchema: { type: 'object' as const, properties: { message: { type: 'string' } } } }] }))
  server.setRequestHandler(CallToolRequestSchema, async req => ({ content: [{ type: 'text' as const, text: String((req.params.arguments ?? {}).message ?? '') }] }))
  return server
}

http.createServer((req, res) => {
  void (async () => {
    const url = new URL(req.url ?? '/', 'http://x')
    if (req.method === 'GET' && url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', res)
      legacy.set(transport.sessionId, transport)
      res.once('close', () => legacy.delete(transport.sessionId))
      await makeServer().connect(transport)
      return
    }
    if (url.pathname === '/messages') {
      const transport = legacy.get(url.searchParams.get('sessionId') ?? '')
      if (transport === undefined) return void res.writeHead(404).end('unknown session')
      await transport.handlePostMessage(req, res)
      return
    }
    const sid = req.headers['mcp-session-id']
    let transport = typeof sid === 'string' ? sessions.get(sid) : undefined
    if (transport === undefined) {
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true, onsessioninitialized: id => { sessions.set(id, transport!) } })
      await makeServer().connect(transport)
    }
    await transport.handleRequest(req, res)
  })().catch(err => { if (!res.headersSent) res.writeHead(500).end(String(err)) })
}).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))
