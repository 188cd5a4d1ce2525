/**
 * A 2026-07-28 MCP server for tests: the official SDK v2 server (`createMcpHandler`, which
 * also serves initialize-era clients through its stateless legacy fallback) on node:http,
 * with a few tools that show what a gateway must carry through: a multi-round-trip tool
 * (input_required with the server's own requestState), a tool a route may hide, a slow
 * tool with progress, and an answer larger than a gateway's message limit. Every request
 * the server receives is recorded (method, Mcp-Method header) for "did it reach the
 * target" assertions.
 */

import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createHmac } from 'node:crypto'
import { McpServer, createMcpHandler, inputRequired, acceptedContent, completable } from '@modelcontextprotocol/server'
import * as z from 'zod'

export interface ModernServer {
  url: string
  /** JSON-RPC methods received (POST bodies), in order. */
  received: Array<{ method: string, headers: IncomingHttpHeaders }>
  /** Names of tools whose call was cancelled (the client closed its stream, or a cancellation). */
  cancelled: string[]
  /** Publishes notifications/resources/updated to the subscriptions/listen streams that asked for `uri`. */
  resourceUpdated(uri: string): void
  close(): Promise<void>
}

const STATE_KEY = 'modern-test-server-state-key'
const sign = (value: string) => `${value}.${createHmac('sha256', STATE_KEY).update(value).digest('base64url')}`
const verify = (state: unknown) => typeof state === 'string' && state.includes('.') && sign(state.slice(0, state.lastIndexOf('.'))) === state

export interface ModernServerOptions {
  /** `reject`: a 2026-07-28-only server (initialize-era requests refused); default: both eras. */
  legacy?: 'stateless' | 'reject'
}

export async function startModernServer (name = 'modern', options: ModernServerOptions = {}): Promise<ModernServer> {
  const cancelled: string[] = []
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name, version: '1.0.0' }, { capabilities: { resources: { subscribe: true, listChanged: true }, tools: { listChanged: true } } })
    server.registerTool('echo', { description: 'echoes its text' }, async () => ({ content: [{ type: 'text', text: `echo from ${name}` }] }))
    server.registerTool('secret', { description: 'a tool a route may hide' }, async () => ({ content: [{ type: 'text', text: 'the secret' }] }))
    server.registerTool('big', { description: 'an answer of 256 KiB' }, async () => ({ content: [{ type: 'text', text: 'x'.repeat(256 * 1024) }] }))
    server.registerTool('greet', { description: 'asks for a name (input_required), then greets' }, async ctx => {
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name')
      if (answer === undefined) {
        return inputRequired({
          inputRequests: { user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } }) },
          requestState: sign(`greet:${Date.now()}`)
        })
      }
      // The state is the server's own: it comes back through the gateway unchanged, or not at all.
      const state = ctx.mcpReq.requestState()
      return { content: [{ type: 'text', text: `Hello, ${String(answer.name)}! (${verify(state) ? 'state-ok' : 'state-bad'})` }] }
    })
    server.registerResource('memo', 'memo://one', { description: 'a memo' }, async uri => ({ contents: [{ uri: uri.href, text: `content of ${uri.href} from ${name}` }] }))
    server.registerPrompt('greet', {
      description: 'greets someone',
      argsSchema: z.object({ who: completable(z.string(), value => ['Ada', 'Alan', 'Grace'].filter(n => n.startsWith(value))) })
    }, async ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello ${who} from ${name}` } }] }))
    server.registerTool('slow', { description: 'waits until cancelled (or 10 s)' }, async ctx => {
      await new Promise<void>(resolve => {
        const timer = setTimeout(resolve, 10_000)
        ctx.mcpReq.signal.addEventListener('abort', () => { cancelled.push('slow'); clearTimeout(timer); resolve() }, { once: true })
      })
      return { content: [{ type: 'text', text: 'slow done' }] }
    })
    server.registerTool('progress', { description: 'reports progress twice, then answers' }, async ctx => {
      const token = ctx.mcpReq._meta?.progressToken
      if (token !== undefined) {
        for (const progress of [1, 2]) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 2 } })
      }
      return { content: [{ type: 'text', text: 'progressed' }] }
    })
    return server
  }, { legacy: options.legacy ?? 'stateless' })
  const received: ModernServer['received'] = []
  const http = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      if (req.method === 'POST') {
        try {
          received.push({ method: String((JSON.parse(body.toString('utf8')) as { method?: unknown }).method ?? 'response'), headers: req.headers })
        } catch {
          received.push({ method: 'unparsable', headers: req.headers })
        }
      }
      const headers = new Headers()
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v)
      // The client closing its connection is how 2026-07-28 cancels: the handler sees it as the request's signal.
      const closed = new AbortController()
      res.once('close', () => { if (!res.writableFinished) closed.abort() })
      const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        signal: closed.signal,
        ...(req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE' ? {} : { body })
      })
      handler.fetch(request).then(async response => {
        res.writeHead(response.status, Object.fromEntries(response.headers))
        if (response.body !== null) for await (const chunk of response.body) res.write(chunk)
        res.end()
      }, (err: Error) => {
        res.writeHead(500).end(err.message)
      })
    })
  })
  await new Promise<void>(resolve => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    received,
    cancelled,
    resourceUpdated: uri => handler.notify.resourceUpdated(uri),
    close: async () => {
      await handler.close()
      http.closeAllConnections()
      await new Promise(resolve => http.close(resolve))
    }
  }
}
