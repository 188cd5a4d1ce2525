/**
 * A real model server for the LLM tests, serving a GGUF file (SmolLM2-135M-Instruct,
 * scripts/test-tools' SMOLLM2_GGUF) on a free loopback port. Two servers, both llama.cpp
 * built from source by scripts/test-tools:
 *
 * - `python`: llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`,
 *   LLAMA_SERVER). Its limits (0.3.36): one request at a time; a streamed answer carries no
 *   `usage` (it ignores `stream_options.include_usage`); tools work when `tool_choice` names a
 *   function (arguments generated under a grammar made from its JSON schema), while
 *   `tool_choice: "auto"` only yields text.
 * - `cpp`: llama.cpp's own `llama-server` (LLAMA_CPP_SERVER), built from the sources vendored
 *   in the same llama-cpp-python release: OpenAI chat completions with the usage chunk a
 *   stream asks for, and Anthropic's `/v1/messages`.
 *
 * Both use the chat template the GGUF file carries (ChatML for SmolLM2). `startLlamaServer`
 * waits until the model is loaded and `GET /v1/models` answers; `close()` stops the server
 * (SIGTERM, then SIGKILL).
 */

import { spawn, type ChildProcess } from 'node:child_process'
import { freePort } from './portico.ts'

export interface LlamaServer {
  /** `ADDRESS:PORT` (default address 127.0.0.1), as an `ai` backend's `hostOverride` wants it. */
  host: string
  url: string
  port: number
  /** The model name the server answers with (its `--model_alias`). */
  model: string
  /** The server's output so far (the last 64 KiB), for assertion messages. */
  output(): string
  close(): Promise<void>
}

export interface LlamaServerOptions {
  /** `python` (llama-cpp-python's server, default) or `cpp` (llama.cpp's `llama-server`). */
  kind?: 'python' | 'cpp'
  /** The executable: scripts/test-tools' LLAMA_SERVER (python) or LLAMA_CPP_SERVER (cpp). */
  server: string
  /** Path of the GGUF model file. */
  model: string
  /** `--model_alias`: the model name in answers (default `smollm2-135m-instruct`). */
  alias?: string
  /** Context size in tokens (default 2048). */
  contextTokens?: number
  /** CPU threads (default 2: the machines the suite runs on have 2 cores). */
  threads?: number
  /** How long loading may take (default 60 s: the model is ~100 MB, the machine busy). */
  startTimeoutMs?: number
  /**
   * The loopback address to listen on (default 127.0.0.1; an InferencePool's pods share a port
   * and differ by address: 127.0.0.2, ...).
   */
  address?: string
  /** The port (default a free one of 127.0.0.1; given: no retry on another port). */
  port?: number
}

const OUTPUT_LIMIT = 64 * 1024

// Servers still running when the test process exits are killed, whatever happened.
const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

export async function startLlamaServer (options: LlamaServerOptions): Promise<LlamaServer> {
  const alias = options.alias ?? 'smollm2-135m-instruct'
  // A port picked as free can be taken before the server binds it: retry, as startPortico does.
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? await freePort()
    const server = spawnServer(options, alias, port)
    try {
      await server.ready(options.startTimeoutMs ?? 60_000)
      return server.api
    } catch (err) {
      await server.api.close()
      if (attempt < 3 && options.port === undefined && /address already in use|couldn't bind|failed to bind/i.test(server.api.output())) continue
      throw err
    }
  }
}

function spawnServer (options: LlamaServerOptions, alias: string, port: number): { api: LlamaServer, ready: (timeoutMs: number) => Promise<void> } {
  const address = options.address ?? '127.0.0.1'
  const threads = String(options.threads ?? 2)
  const contextTokens = String(options.contextTokens ?? 2048)
  const args = options.kind === 'cpp'
    ? [
        '--model', options.model,
        '--alias', alias,
        '--host', address,
        '--port', String(port),
        '--ctx-size', contextTokens,
        '--threads', threads,
        '--threads-batch', threads,
        // One slot: the context is not split, and answers do not depend on which slot served.
        '--parallel', '1',
        '--seed', '42',
        '--no-webui'
      ]
    : [
        '--model', options.model,
        '--model_alias', alias,
        '--host', address,
        '--port', String(port),
        '--n_ctx', contextTokens,
        '--n_threads', threads,
        '--n_threads_batch', threads,
        // Fixed default seed; each request passes its own too.
        '--seed', '42',
        // llama.cpp's per-token timing lines would fill the output; errors still print.
        '--verbose', 'false'
      ]
  const child = spawn(options.server, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  live.add(child)
  let output = ''
  const keep = (chunk: Buffer): void => {
    output += chunk.toString('utf8')
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  let exited = false
  const closed = new Promise<void>(resolve => child.once('close', () => {
    exited = true
    live.delete(child)
    resolve()
  }))
  child.once('error', err => { output += `\n${err.message}` })
  const url = `http://${address}:${port}`

  const api: LlamaServer = {
    host: `${address}:${port}`,
    url,
    port,
    model: alias,
    output: () => output,
    close: async () => {
      if (!exited) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
        await closed
        clearTimeout(timer)
      }
    }
  }

  // Ready once /v1/models answers: llama-cpp-python loads the model before uvicorn listens;
  // llama-server answers 503 while it loads.
  const ready = async (timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (exited) throw new Error(`llama.cpp's server exited before it was ready (${options.server} ${args.join(' ')}):\n${output}`)
      const ok = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(2_000) }).then(r => r.ok, () => false)
      if (ok) return
      if (Date.now() > deadline) throw new Error(`llama.cpp's server was not ready after ${timeoutMs} ms:\n${output}`)
      await new Promise(resolve => setTimeout(resolve, 200))
    }
  }
  return { api, ready }
}
