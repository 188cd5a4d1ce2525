/**
 * An MCP server with every fixture the official conformance suite's server scenarios ask
 * for (`@modelcontextprotocol/conformance`, the "everything server" role), written here from
 * the scenarios' stated requirements with the official SDK v2 (`@modelcontextprotocol/server`).
 *
 * One endpoint, `/mcp`, serves both eras, as a current server would:
 *  - 2026-07-28 requests (stateless, `_meta` per request) go to `createMcpHandler` with
 *    `legacy: 'reject'`;
 *  - initialize-era requests get a stateful session (`Mcp-Session-Id`) on the SDK's
 *    streamable HTTP transport with an in-memory event store, so SSE streams can be closed
 *    and resumed (the SSE-polling scenario) and subscriptions outlive one request.
 * Host and Origin must be localhost names (the DNS-rebinding scenario).
 *
 * The same tool definitions serve both eras; where an era differs (input from the client is
 * a server-to-client request before 2026-07-28 and an `input_required` result from it on),
 * the fixtures are the scenario's own for that era.
 *
 * Run by hand: node e2e/conformance/mcp/everything-server.ts [--port N] [--legacy-only]
 */

import http from 'node:http'
import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import {
  McpServer, ResourceTemplate, WebStandardStreamableHTTPServerTransport, acceptedContent, completable, createMcpHandler,
  createRequestStateCodec, fromJsonSchema, inputRequired, isLegacyRequest, MissingRequiredClientCapabilityError,
  type EventStore, type JSONRPCMessage, type ServerContext
} from '@modelcontextprotocol/server'
import * as z from 'zod'

/** A 1×1 red PNG and a few samples of silent WAV: the smallest real media. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
const WAV = Buffer.concat([
  Buffer.from('RIFF'), Buffer.from([44, 0, 0, 0]), Buffer.from('WAVEfmt '), Buffer.from([16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1f, 0, 0, 0x80, 0x3e, 0, 0, 2, 0, 16, 0]),
  Buffer.from('data'), Buffer.from([8, 0, 0, 0]), Buffer.alloc(8)
]).toString('base64')

const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' }, contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' } },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false
} as const

const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } as const
/** The client's declared capabilities: `_meta` per request (2026-07-28), or its initialize. */
function clientCapabilities (ctx: ServerContext, server: McpServer): Record<string, unknown> {
  const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>
  const caps = envelope.clientCapabilities ?? envelope['io.modelcontextprotocol/clientCapabilities'] ?? server.server.getClientCapabilities()
  return caps !== null && typeof caps === 'object' ? caps as Record<string, unknown> : {}
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))
const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] })

/** requestState is attacker-controlled on re-entry: HMAC-signed, and checked before the handler runs. */
const stateCodec = createRequestStateCodec<{ round: number, tool: string }>({ key: 'conformance-everything-server-request-state-key!!' })

function buildServer (era: 'legacy' | 'modern'): McpServer {
  const server = new McpServer({ name: 'portico-conformance-everything', version: '1.0.0' }, {
    capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, logging: {}, completions: {} },
    requestState: { verify: stateCodec.verify }
  })

  // ---- tools/call content ---------------------------------------------------------------
  server.registerTool('test_simple_text', { description: 'Returns simple text' }, async () => text('This is a simple text response for testing.'))
  server.registerTool('test_image_content', { description: 'Returns an image' }, async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }))
  server.registerTool('test_audio_content', { description: 'Returns audio' }, async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }))
  server.registerTool('test_embedded_resource', { description: 'Returns an embedded resource' }, async () => ({
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
  }))
  server.registerTool('test_multiple_content_types', { description: 'Returns text, an image and a resource' }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } }
    ]
  }))
  server.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing')
  })
  server.registerTool('json_schema_2020_12_tool', { description: 'Tool with JSON Schema 2020-12 features', inputSchema: fromJsonSchema(JSON_SCHEMA_2020_12) }, async () => text('ok'))

  // ---- notifications during a call ------------------------------------------------------
  server.registerTool('test_tool_with_logging', { description: 'Logs three messages while it works' }, async ctx => {
    await ctx.mcpReq.log('info', 'Tool execution started')
    await sleep(50)
    await ctx.mcpReq.log('info', 'Tool processing data')
    await sleep(50)
    await ctx.mcpReq.log('info', 'Tool execution completed')
    return text('Tool with logging executed successfully')
  })
  server.registerTool('test_tool_with_progress', { description: 'Reports progress 0, 50, 100 of 100' }, async ctx => {
    const token = ctx.mcpReq._meta?.progressToken
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } })
      if (progress < 100) await sleep(50)
    }
    return text('Tool with progress executed successfully')
  })

  // ---- input from the client: server requests (initialize era) ---------------------------
  if (era === 'legacy') {
    server.registerTool('test_sampling', { description: 'Asks the client to sample', inputSchema: { prompt: z.string() } }, async ({ prompt }, ctx) => {
      const result = await ctx.mcpReq.send({ method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 } })
      const content = (result as { content?: { text?: string } }).content
      return text(`LLM response: ${content?.text ?? JSON.stringify(content)}`)
    })
    server.registerTool('test_elicitation', { description: 'Asks the user for input', inputSchema: { message: z.string() } }, async ({ message }, ctx) => {
      const result = await ctx.mcpReq.send({
        method: 'elicitation/create',
        params: { message, requestedSchema: { type: 'object', properties: { username: { type: 'string', description: "User's response" }, email: { type: 'string', description: "User's email address" } }, required: ['username', 'email'] } }
      })
      return text(`User response: ${JSON.stringify(result)}`)
    })
    server.registerTool('test_elicitation_sep1034_defaults', { description: 'Elicitation with defaults' }, async ctx => {
      const result = await ctx.mcpReq.send({
        method: 'elicitation/create',
        params: {
          message: 'Please review and update the form fields with defaults',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', description: 'User name', default: 'John Doe' },
              age: { type: 'integer', description: 'User age', default: 30 },
              score: { type: 'number', description: 'User score', default: 95.5 },
              status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
              verified: { type: 'boolean', description: 'Verification status', default: true }
            },
            required: []
          }
        }
      }) as { action: string, content?: unknown }
      return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)
    })
    server.registerTool('test_elicitation_sep1330_enums', { description: 'Elicitation with every enum form' }, async ctx => {
      const result = await ctx.mcpReq.send({
        method: 'elicitation/create',
        params: {
          message: 'Please select options from the enum fields',
          requestedSchema: {
            type: 'object',
            properties: {
              untitledSingle: { type: 'string', description: 'Untitled single-select', enum: ['option1', 'option2', 'option3'] },
              titledSingle: { type: 'string', description: 'Titled single-select', oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }] },
              legacyEnum: { type: 'string', description: 'Legacy titled enum', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
              untitledMulti: { type: 'array', description: 'Untitled multi-select', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
              titledMulti: { type: 'array', description: 'Titled multi-select', items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] } }
            },
            required: []
          }
        }
      }) as { action: string, content?: unknown }
      return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)
    })
    server.registerTool('test_reconnection', { description: 'Closes its SSE stream mid-call; the answer comes on the resumed stream' }, async ctx => {
      await sleep(50)
      ctx.http?.closeSSE?.()
      await sleep(200)
      return text('Reconnection test completed')
    })
  }

  // ---- input from the client: input_required (2026-07-28) --------------------------------
  const elicit = (message: string, schema: Record<string, unknown> = NAME_SCHEMA) => inputRequired.elicit({ message, requestedSchema: schema as never })
  server.registerTool('test_input_required_result_elicitation', { description: 'Asks for a name (input_required), then greets' }, async ctx => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name')
    if (answer === undefined) return inputRequired({ inputRequests: { user_name: elicit('What is your name?') } })
    return text(`Hello, ${String(answer.name)}!`)
  })
  server.registerTool('test_input_required_result_sampling', { description: 'Asks the client to sample (input_required)' }, async ctx => {
    const response = ctx.mcpReq.inputResponses?.capital_question as { content?: { text?: string } } | undefined
    if (response === undefined) {
      return inputRequired({ inputRequests: { capital_question: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 }) } })
    }
    return text(`Sampling answer: ${response.content?.text ?? ''}`)
  })
  server.registerTool('test_input_required_result_list_roots', { description: 'Asks for the client roots (input_required)' }, async ctx => {
    const response = ctx.mcpReq.inputResponses?.client_roots as { roots?: Array<{ uri: string }> } | undefined
    if (response === undefined) return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } })
    return text(`Roots: ${(response.roots ?? []).map(r => r.uri).join(', ')}`)
  })
  server.registerTool('test_input_required_result_request_state', { description: 'Round-trips a signed requestState' }, async ctx => {
    const confirm = acceptedContent(ctx.mcpReq.inputResponses, 'confirm')
    const state = ctx.mcpReq.requestState<{ round: number, tool: string }>()
    if (confirm === undefined || state === undefined) {
      return inputRequired({
        inputRequests: { confirm: elicit('Please confirm', { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }) },
        requestState: await stateCodec.mint({ round: 1, tool: 'request_state' })
      })
    }
    return text(`state-ok: round ${state.round} confirmed`)
  })
  server.registerTool('test_input_required_result_tampered_state', { description: 'Rejects a requestState that was altered' }, async ctx => {
    const state = ctx.mcpReq.requestState<{ round: number, tool: string }>()
    if (state === undefined) {
      return inputRequired({ inputRequests: { confirm: elicit('Please confirm', { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }) }, requestState: await stateCodec.mint({ round: 1, tool: 'tampered' }) })
    }
    return text('state verified')
  })
  server.registerTool('test_input_required_result_multiple_inputs', { description: 'Asks for three inputs at once' }, async ctx => {
    const r = ctx.mcpReq.inputResponses ?? {}
    if (!('user_name' in r && 'greeting' in r && 'client_roots' in r)) {
      return inputRequired({
        inputRequests: {
          user_name: elicit('What is your name?'),
          greeting: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 }),
          client_roots: inputRequired.listRoots()
        },
        requestState: await stateCodec.mint({ round: 1, tool: 'multiple' })
      })
    }
    return text('All inputs received')
  })
  server.registerTool('test_input_required_result_multi_round', { description: 'Two rounds of input' }, async ctx => {
    const state = ctx.mcpReq.requestState<{ round: number, tool: string }>()
    if (state === undefined || acceptedContent(ctx.mcpReq.inputResponses, state.round === 1 ? 'step1' : 'step2') === undefined) {
      if (state?.round === 1) {
        return inputRequired({ inputRequests: { step2: elicit('Step 2: What is your favorite color?', { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] }) }, requestState: await stateCodec.mint({ round: 2, tool: 'multi' }) })
      }
      return inputRequired({ inputRequests: { step1: elicit('Step 1: What is your name?') }, requestState: await stateCodec.mint({ round: 1, tool: 'multi' }) })
    }
    if (state.round === 1) {
      return inputRequired({ inputRequests: { step2: elicit('Step 2: What is your favorite color?', { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] }) }, requestState: await stateCodec.mint({ round: 2, tool: 'multi' }) })
    }
    return text('Both rounds complete')
  })
  server.registerTool('test_input_required_result_capabilities', { description: 'Asks only for input the client declared it can give' }, async ctx => {
    const responses = ctx.mcpReq.inputResponses ?? {}
    if ('user_name' in responses || 'fallback_question' in responses) return text('Input received')
    const caps = clientCapabilities(ctx, server)
    if ('elicitation' in caps) return inputRequired({ inputRequests: { user_name: elicit('What is your name?') } })
    if ('sampling' in caps) return inputRequired({ inputRequests: { fallback_question: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'What is your name?' } }], maxTokens: 50 }) } })
    return text('No input capability declared: nothing to ask')
  })
  server.registerTool('test_streaming_elicitation', { description: 'Reports progress, then asks for input (input_required, never a request on the stream)' }, async ctx => {
    const token = ctx.mcpReq._meta?.progressToken
    if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } })
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name')
    if (answer === undefined) return inputRequired({ inputRequests: { user_name: elicit('What is your name?') } })
    return text(`Hello, ${String(answer.name)}!`)
  })
  server.registerTool('test_logging_tool', { description: 'Logs (only at the level the request asked for)' }, async ctx => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran')
    return text('logged')
  })
  server.registerTool('test_missing_capability', { description: 'Needs the sampling capability' }, async () => text('sampling is available'))
  // McpServer turns a tool's exceptions into isError results; -32021 is a protocol error, so
  // the check goes in front of its tools/call handler (the SDK keeps handlers in a map).
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, (request: { params: { name: string } }, ctx: ServerContext) => unknown> })._requestHandlers
  const callTool = handlers.get('tools/call')!
  handlers.set('tools/call', async (request, ctx) => {
    if (request.params.name === 'test_missing_capability' && !('sampling' in clientCapabilities(ctx, server))) {
      throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { sampling: {} } })
    }
    return await callTool(request, ctx)
  })
  server.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that needs context from the user' }, async ctx => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_context')
    if (answer === undefined) return inputRequired({ inputRequests: { user_context: elicit('What context should the prompt use?', { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] }) } })
    return { messages: [{ role: 'user', content: { type: 'text', text: `Prompt with context: ${String(answer.context)}` } }] }
  })

  // ---- resources -------------------------------------------------------------------------
  server.registerResource('static-text', 'test://static-text', { description: 'A static text resource', mimeType: 'text/plain' }, async uri => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }]
  }))
  server.registerResource('static-binary', 'test://static-binary', { description: 'A static binary resource', mimeType: 'image/png' }, async uri => ({
    contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }]
  }))
  server.registerResource('watched-resource', 'test://watched-resource', { description: 'A resource to subscribe to', mimeType: 'text/plain' }, async uri => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Watched resource content' }]
  }))
  server.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }), { description: 'A resource template', mimeType: 'application/json' }, async (uri, variables) => ({
    contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id: String(variables.id), templateTest: true, data: `Data for ID: ${String(variables.id)}` }) }]
  }))

  if (era === 'legacy') {
    // resources/subscribe is initialize-era only (2026-07-28 has subscriptions/listen, which
    // the SDK serves itself): the session remembers the URIs it was asked to watch.
    const watched = new Set<string>()
    server.server.setRequestHandler('resources/subscribe', async request => {
      watched.add(request.params.uri)
      return {}
    })
    server.server.setRequestHandler('resources/unsubscribe', async request => {
      watched.delete(request.params.uri)
      return {}
    })
  }

  // ---- prompts ---------------------------------------------------------------------------
  server.registerPrompt('test_simple_prompt', { description: 'A simple prompt' }, async () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }]
  }))
  server.registerPrompt('test_prompt_with_arguments', {
    description: 'A prompt with arguments',
    argsSchema: z.object({ arg1: completable(z.string().describe('First test argument'), value => ['paris', 'park', 'party'].filter(v => v.startsWith(value))), arg2: z.string().describe('Second test argument') })
  }, async ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }))
  server.registerPrompt('test_prompt_with_embedded_resource', {
    description: 'A prompt with an embedded resource',
    argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') })
  }, async ({ resourceUri }) => ({
    messages: [
      { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }
    ]
  }))
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }
    ]
  }))
  return server
}

/** Events of the initialize-era sessions' SSE streams, for Last-Event-ID resumption. */
function memoryEventStore (): EventStore {
  const events: Array<{ id: string, stream: string, message: JSONRPCMessage }> = []
  return {
    async storeEvent (stream, message) {
      const id = `${stream}_${events.length}`
      events.push({ id, stream, message })
      if (events.length > 10_000) events.splice(0, 1000)
      return id
    },
    async getStreamIdForEventId (eventId) {
      return events.find(e => e.id === eventId)?.stream
    },
    async replayEventsAfter (lastEventId, { send }) {
      const at = events.findIndex(e => e.id === lastEventId)
      if (at < 0) return ''
      const stream = events[at]!.stream
      for (const e of events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message)
      return stream
    }
  }
}

const LOCAL_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1'])
function isLocal (hostOrUrl: string, isUrl: boolean): boolean {
  try {
    const hostname = isUrl ? new URL(hostOrUrl).hostname : new URL(`http://${hostOrUrl}`).hostname
    return LOCAL_HOSTNAMES.has(hostname)
  } catch {
    return false
  }
}

export interface EverythingServer {
  url: string
  port: number
  close(): Promise<void>
}

export interface EverythingServerOptions {
  port?: number
  host?: string
  /**
   * `both` (default): 2026-07-28 and initialize-era clients; `legacy`: an initialize-era
   * server only (2026-07-28 requests get the initialize-era transport's refusal), to test a
   * gateway that bridges 2026-07-28 clients to it.
   */
  eras?: 'both' | 'legacy'
}

export async function startEverythingServer (options: EverythingServerOptions = {}): Promise<EverythingServer> {
  const modern = createMcpHandler(() => buildServer('modern'), { legacy: 'reject' })
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>()
  const eventStore = memoryEventStore()

  async function legacy (request: Request): Promise<Response> {
    const sid = request.headers.get('mcp-session-id')
    let transport = sid !== null ? sessions.get(sid) : undefined
    if (transport === undefined) {
      if (sid !== null) return Response.json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }, { status: 404 })
      const created: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        onsessioninitialized: id => { sessions.set(id, created) },
        onsessionclosed: id => { sessions.delete(id) }
      })
      await buildServer('legacy').connect(created)
      transport = created
    }
    return await transport.handleRequest(request)
  }

  const server = http.createServer((req, res) => {
    const host = req.headers.host ?? ''
    const origin = req.headers.origin
    if (!isLocal(host, false) || (origin !== undefined && !isLocal(origin, true))) {
      res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Forbidden: Host or Origin is not localhost' } }))
      return
    }
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const closed = new AbortController()
      res.once('close', () => { if (!res.writableFinished) closed.abort() })
      const headers = new Headers()
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v)
      const body = req.method === 'POST' ? Buffer.concat(chunks) : undefined
      const request = new Request(`http://${host}${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, signal: closed.signal, ...(body !== undefined ? { body } : {}) })
      void (async () => {
        const isLegacy = options.eras === 'legacy' || (req.method !== 'POST' ? request.headers.get('mcp-protocol-version') !== '2026-07-28' : await isLegacyRequest(request.clone()))
        const response = isLegacy ? await legacy(request) : await modern.fetch(request)
        res.writeHead(response.status, Object.fromEntries(response.headers))
        res.flushHeaders()
        if (response.body !== null) {
          for await (const chunk of response.body) {
            if (res.destroyed) break
            res.write(chunk)
          }
        }
        res.end()
      })().catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500).end(err.message)
        else res.destroy()
      })
    })
  })
  await new Promise<void>(resolve => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://localhost:${port}/mcp`,
    port,
    close: async () => {
      await modern.close()
      for (const t of sessions.values()) await t.close().catch(() => {})
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
    }
  }
}

if (import.meta.main) {
  const i = process.argv.indexOf('--port')
  const s = await startEverythingServer({ port: i > 0 ? Number(process.argv[i + 1]) : 0, eras: process.argv.includes('--legacy-only') ? 'legacy' : 'both' })
  process.stdout.write(`everything server on ${s.url}\n`)
}

