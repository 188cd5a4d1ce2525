/**
 * The processes a benchmark measures: the loopback backend, Portico, and the Node peer
 * (@fastify/http-proxy), each in a child process of its own on a fresh loopback port.
 */

import { existsSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort, scratchDir, startNode, type Child } from './children.ts'

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const BACKEND = here('../servers/backend.ts')
const FASTIFY_PROXY = here('../servers/fastify-proxy.ts')
const LLM_SERVER = here('../servers/llm-server.ts')
const OTLP_SINK = here('../servers/otlp-sink.ts')
const ENDPOINT_PICKER = here('../servers/endpoint-picker.ts')
const EXT_PROCESSOR = here('../servers/ext-processor.ts')
const FASTIFY_CLUSTER = here('../servers/fastify-cluster.ts')
/** This checkout's portico entry point (the package's `portico`), the process the benches start. */
export const PORTICO_BIN = here('../../packages/proxy/bin/portico.mjs')
const PORTICO = PORTICO_BIN

/**
 * The portico entry point of another checkout (a bench's `--before DIR` / `--after DIR`):
 * bin/portico.mjs, or bin/portico.ts in a checkout from before it (issue 54); a directory
 * without one ends the bench with exit code 2, before anything is started.
 */
export function checkoutBin (dir: string): string {
  const mjs = join(resolve(dir), 'packages/proxy/bin/portico.mjs')
  const bin = existsSync(mjs) ? mjs : join(resolve(dir), 'packages/proxy/bin/portico.ts')
  if (!existsSync(bin)) {
    process.stderr.write(`bench: ${bin} does not exist\n`)
    process.exit(2)
  }
  return bin
}

export interface Server {
  child: Child
  port: number
  url: string
}

function server (child: Child, port: number): Server {
  return { child, port, url: `http://127.0.0.1:${port}/` }
}

/** node:http answering `200 hello world` to everything; `nodeFlags` go to its Node. */
export async function startBackend (cpus?: string, nodeFlags: string[] = []): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'backend', args: [...nodeFlags, BACKEND, String(port)], readyLine: 'ready', ...(cpus !== undefined ? { cpus } : {}) })
  return server(child, port)
}

/**
 * An inference endpoint picker (ext_proc gRPC, plaintext) that always picks `endpoint`
 * (bench/servers/endpoint-picker.ts); `url` is not HTTP, `port` is what counts.
 */
export async function startEndpointPicker (endpoint: string): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'endpoint-picker', args: [ENDPOINT_PICKER, String(port), endpoint], readyLine: 'ready' })
  return server(child, port)
}

/** An ext_proc processor that answers every message at once, changing nothing (bench/servers/ext-processor.ts). */
export async function startExtProcessor (): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'ext-processor', args: [EXT_PROCESSOR, String(port)], readyLine: 'ready' })
  return server(child, port)
}

/** An OTLP/HTTP endpoint that takes every export (bench/servers/otlp-sink.ts). */
export async function startOtlpSink (): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'otlp-sink', args: [OTLP_SINK, String(port)], readyLine: 'ready' })
  return server(child, port)
}

/** An OpenAI-compatible chat completions endpoint with a fixed 1 KiB answer (and its usage). */
export async function startLlmServer (args: string[] = []): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'llm-server', args: [LLM_SERVER, String(port), ...args], readyLine: 'ready' })
  return server(child, port)
}

/** Fastify + @fastify/http-proxy in front of `upstreamUrl`. */
export async function startFastifyProxy (upstreamUrl: string): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: 'fastify-proxy', args: [FASTIFY_PROXY, String(port), upstreamUrl], readyLine: 'ready' })
  return server(child, port)
}

/** Fastify + @fastify/http-proxy in `workers` processes under Node's cluster module. */
export async function startFastifyCluster (upstreamUrl: string, workers: number, cpus?: string): Promise<Server> {
  const port = await freePort()
  const child = await startNode({ name: `fastify-cluster x${workers}`, args: [FASTIFY_CLUSTER, String(port), upstreamUrl, String(workers)], readyLine: 'ready', ...(cpus !== undefined ? { cpus } : {}) })
  return server(child, port)
}

export interface PorticoOptions {
  /** A YAML config; `{port}` is replaced by the data-plane port chosen here. */
  config: string
  /** LOG_LEVEL; `info` (the default) writes one access-log line per request. */
  logLevel: string
  /** Entry point to run (default: this checkout's packages/proxy/bin/portico.ts), to compare builds. */
  bin?: string
  /** Extra environment (e.g. ADMIN_ADDR to reach /debug/trace, DEBUG_TRACE=off, WORKERS). */
  env?: Record<string, string>
  /** CPUs to pin it to (`taskset -c`). */
  cpus?: string
  /** Node/V8 flags before the entry point (kept when the binary starts itself again). */
  nodeFlags?: string[]
}

/**
 * Portico from its binary with the admin, stats and readiness ports off. Below `info` the
 * "portico started" line is not printed, so readiness is then the data-plane port answering.
 */
export async function startPortico (options: PorticoOptions): Promise<Server> {
  const port = await freePort()
  const configPath = join(scratchDir('portico'), 'config.yaml')
  writeFileSync(configPath, options.config.replaceAll('{port}', String(port)))
  const logsStart = ['info', 'debug', 'trace'].includes(options.logLevel)
  const child = await startNode({
    name: `portico (LOG_LEVEL=${options.logLevel})`,
    args: [...(options.nodeFlags ?? []), options.bin ?? PORTICO, '-f', configPath],
    env: { ...porticoEnv(options.logLevel), ...options.env },
    ...(options.cpus !== undefined ? { cpus: options.cpus } : {}),
    ...(logsStart ? { readyLine: 'portico started' } : { readyPort: port })
  })
  return server(child, port)
}

/**
 * The environment a benchmarked Portico runs with: admin, stats and readiness ports off, JSON
 * logs at `logLevel`, a short drain, one event loop unless a benchmark asks for data-plane
 * workers (bench/workers.ts).
 */
export function porticoEnv (logLevel: string): Record<string, string> {
  return { ADMIN_ADDR: 'off', STATS_ADDR: 'off', READINESS_ADDR: 'off', LOG_LEVEL: logLevel, LOG_FORMAT: 'json', DRAIN_TIMEOUT: '1s', WORKERS: '1' }
}

/**
 * The `config.tracing` block of the tracing benches: spans exported over OTLP/HTTP to
 * `endpoint`, `randomSampling` (true, false or a ratio, as YAML) of requests without a trace.
 */
export function tracingConfig (endpoint: string, randomSampling: string): string {
  return `config:\n  tracing:\n    otlpEndpoint: ${endpoint}\n    otlpProtocol: http\n    randomSampling: ${randomSampling}\n`
}

/** A one-route Portico config sending everything to `backendPort`. */
export function singleRouteConfig (backendPort: number): string {
  return `gateways:
  default: { port: {port}, protocol: HTTP }
routes:
  - name: bench
    backends:
      - host: 127.0.0.1:${backendPort}
`
}
