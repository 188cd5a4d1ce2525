/**
 * A streamable-HTTP MCP server for benchmarks, built with the official SDK: one tool,
 * `echo`, answering at once. Usage: node bench/servers/mcp-server.ts PORT — prints "ready".
 */

import http from 'node:http'
import { randomUUID } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const port = Number(process.argv[2] ?? 0)
const sessions = new Map<string, StreamableHTTPServerTransport>()

function makeServer (): Server {
  const server = new Server({ name: 'bench-mcp', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'echo', inputSchema: { type: 'object' as const, properties: { message: { type: 'string' } } } }] }))
  server.setRequestHandler(CallToolRequestSchema, async req => ({ content: [{ type: 'text' as const, text: String((req.params.arguments ?? {}).message ?? '') }] }))
  return server
}

http.createServer((req, res) => {
  void (async () => {
    const sid = req.headers['mcp-session-id']
    let transport = typeof sid === 'string' ? sessions.get(sid) : undefined
    if (transport === undefined) {
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true, onsessioninitialized: id => { sessions.set(id, transport!) } })
      await makeServer().connect(transport)
    }
    await transport.handleRequest(req, res)
  })().catch(err => { if (!res.headersSent) res.writeHead(500).end(String(err)) })
}).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))
