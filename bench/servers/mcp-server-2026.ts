/**
 * A 2026-07-28 MCP server for benchmarks, built with the official SDK v2 (`createMcpHandler`
 * on node:http, JSON answers): one tool, `echo`, answering at once. It also serves
 * initialize-era clients (the SDK's stateless legacy leg). Usage: node
 * bench/servers/mcp-server-2026.ts PORT — prints "ready".
 */

import http from 'node:http'
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import * as z from 'zod'

const port = Number(process.argv[2] ?? 0)
const handler = createMcpHandler(() => {
  const server = new McpServer({ name: 'bench-mcp-2026', version: '1.0.0' })
  server.registerTool('echo', { description: 'echoes', inputSchema: { message: z.string() } }, async ({ message }) => ({ content: [{ type: 'text', text: message }] }))
  return server
})

http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v)
    const body = req.method === 'POST' ? Buffer.concat(chunks) : undefined
    handler.fetch(new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, ...(body !== undefined ? { body } : {}) })).then(async response => {
      const out = Buffer.from(await response.arrayBuffer())
      res.writeHead(response.status, { ...Object.fromEntries(response.headers), 'content-length': String(out.length) })
      res.end(out)
    }, (err: Error) => res.writeHead(500).end(err.message))
  })
}).listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))
