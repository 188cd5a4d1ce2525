/**
 * A stateless streamable-HTTP MCP server (the official SDK's McpServer) as a process of its
 * own, for tests that need one at an address of their choosing (a cluster test host, whose
 * EndpointSlices cannot point at loopback). Tool `whoami` answers with the Authorization
 * header it got ("none" when the gateway removed it). Usage: node mcp-server-process.ts
 * ADDRESS PORT — prints "listening" when ready.
 */

import http from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'

const [address = '127.0.0.1', port = '0'] = process.argv.slice(2)

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const mcp = new McpServer({ name: 'cluster-mcp', version: '1.0.0' })
    mcp.tool('whoami', 'The Authorization header this server received.', async () => ({ content: [{ type: 'text', text: String(req.headers.authorization ?? 'none') }] }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on('close', () => { void transport.close(); void mcp.close() })
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown : undefined
    mcp.connect(transport).then(async () => await transport.handleRequest(req, res, body)).catch(err => {
      if (!res.headersSent) res.writeHead(500).end(String(err))
    })
  })
})
server.listen(Number(port), address, () => process.stdout.write('listening\n'))
