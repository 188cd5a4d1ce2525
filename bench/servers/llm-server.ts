/**
 * An OpenAI-compatible chat completions endpoint for benchmarks, as cheap as it can be: the
 * answer is built once (about 1 KiB of content, like agentgateway's published LLM
 * benchmark) and sent for every request; a request whose body says `"stream":true` gets the
 * same content as server-sent events, ending with the usage chunk and `data: [DONE]`.
 * Usage: node bench/servers/llm-server.ts PORT [GAP_MS CHUNKS] — prints "ready" once listening.
 * With GAP_MS, a streamed answer is paced like a model generating: the headers at once, then
 * CHUNKS one-word chunks (default 20), each GAP_MS after the previous one (the first too),
 * then the usage chunk and `data: [DONE]` (bench/llm-translation.ts's time to first token).
 */

import http from 'node:http'

const port = Number(process.argv[2] ?? 0)
const gapMs = Number(process.argv[3] ?? 0)
const pacedChunks = Number(process.argv[4] ?? 20)
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

const paced = Array.from({ length: pacedChunks }, (_, i) => chunk({ choices: [{ index: 0, delta: { content: `${words[i % words.length]!} ` }, finish_reason: null }], usage: null }))
const pacedEnd = chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null }) +
  chunk({ choices: [], usage: { prompt_tokens: 24, completion_tokens: pacedChunks, total_tokens: 24 + pacedChunks } }) +
  'data: [DONE]\n\n'

function sendPaced (res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  res.flushHeaders()
  let i = 0
  const next = (): void => {
    if (res.destroyed) return
    if (i < paced.length) {
      res.write(paced[i++])
      setTimeout(next, gapMs)
      return
    }
    res.end(pacedEnd)
  }
  setTimeout(next, gapMs)
}

const server = http.createServer({ keepAliveTimeout: 65_000, noDelay: true }, (req, res) => {
  let streaming = false
  req.on('data', (c: Buffer) => { if (!streaming && c.includes('"stream":true')) streaming = true })
  req.on('end', () => {
    if (streaming && gapMs > 0) {
      sendPaced(res)
      return
    }
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
