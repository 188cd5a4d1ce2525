/**
 * An OpenAI-compatible chat completions endpoint for benchmarks, as cheap as it can be: the
 * answer is built once (about 1 KiB of content, like agentgateway's published LLM
 * benchmark) and sent for every request; a request whose body says `"stream":true` gets the
 * same content as server-sent events, ending with the usage chunk and `data: [DONE]`.
 * Usage: node bench/servers/llm-server.ts PORT — prints "ready" once listening.
 */

import http from 'node:http'

const port = Number(process.argv[2] ?? 0)
const content = 'lorem ipsum dolor sit amet '.repeat(38)
const usage = { prompt_tokens: 24, completion_tokens: 190, total_tokens: 214 }
const common = { id: 'chatcmpl-bench', created: 1_700_000_000, model: 'bench-model-2024' }

const json = Buffer.from(JSON.stringify({
  ...common,
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage
}))

const chunk = (extra: Record<string, unknown>) => `data: ${JSON.stringify({ ...common, object: 'chat.completion.chunk', ...extra })}\n\n`
const words = content.trim().split(' ')
const events = Buffer.from(
  words.map(w => chunk({ choices: [{ index: 0, delta: { content: `${w} ` }, finish_reason: null }], usage: null })).join('') +
  chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null }) +
  chunk({ choices: [], usage }) +
  'data: [DONE]\n\n'
)

const server = http.createServer({ keepAliveTimeout: 65_000, noDelay: true }, (req, res) => {
  let streaming = false
  req.on('data', (c: Buffer) => { if (!streaming && c.includes('"stream":true')) streaming = true })
  req.on('end', () => {
    if (streaming) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-length': events.length })
      res.end(events)
      return
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': json.length })
    res.end(json)
  })
})

server.listen(port, '127.0.0.1', () => {
  process.stdout.write('ready\n')
})

process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
