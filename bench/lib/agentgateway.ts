/**
 * agentgateway (github.com/agentgateway/agentgateway, Rust) as a contender beside Portico and
 * nginx: one process on a fresh loopback port, its config (its own YAML: `config`, `binds`,
 * listeners, routes, backends) generated into a scratch folder. Set up to match Portico with
 * WORKERS=1 and LOG_LEVEL=warn: one data-plane worker thread (`config.workerThreads: 1`), log
 * level warn (no access log), and its admin, stats and readiness servers off.
 *
 * The binary is not part of this repository: build it from a checkout of agentgateway
 * (bench/README.md, "agentgateway side by side") and pass it with `--agentgateway BIN`
 * (BENCH_AGENTGATEWAY); by default the bench uses AGENTGATEWAY_DEFAULT_BIN when it exists.
 */

import { existsSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { freePort, scratchDir, startNode } from './children.ts'
import { EVERYTHING } from './mcp-calls.ts'
import { takeStringOption } from './options.ts'
import type { Server } from './servers.ts'

/** The agentgateway revision the benches' figures were taken with (bench/README.md). */
export const AGENTGATEWAY_REV = '75b4e6ce6'
export const AGENTGATEWAY_DEFAULT_BIN = join(homedir(), '.cache/portico', `agentgateway-${AGENTGATEWAY_REV}`, 'agentgateway')

/**
 * The `--agentgateway BIN` option (`off` skips it) taken out of the arguments: the binary to
 * measure, or the reason it is skipped, and the arguments left for readOptions.
 */
export function agentgatewayOption (argv = process.argv.slice(2)): { bin: string | undefined, skipped: string, rest: string[] } {
  const { value, rest } = takeStringOption('agentgateway', `agentgateway binary to measure beside Portico ('off': none; default ${AGENTGATEWAY_DEFAULT_BIN} when it exists)`, argv)
  if (value === 'off') return { bin: undefined, skipped: 'agentgateway: skipped (--agentgateway off)', rest }
  const bin = value ?? AGENTGATEWAY_DEFAULT_BIN
  if (!existsSync(bin)) {
    return { bin: undefined, skipped: `agentgateway: skipped (${bin} does not exist; build it as bench/README.md says, or pass --agentgateway BIN)`, rest }
  }
  return { bin, skipped: '', rest }
}

/** The process-wide settings: one worker thread, warn (no access log), no side servers. */
const GLOBAL = `config:
  workerThreads: 1
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  logging:
    level: warn
`

/** Every request to the loopback backend on `backendPort` (HTTP/1.1, upstream keep-alive by default). */
export function agentgatewayProxyConfig (port: number, backendPort: number): string {
  return `${GLOBAL}binds:
- port: ${port}
  listeners:
  - protocol: HTTP
    routes:
    - name: backend
      backends:
      - host: 127.0.0.1:${backendPort}
`
}

/**
 * mcp.ts's two targets as Portico's mcpTargetsConfig has them: `/http/...` to the SDK-built
 * streamable HTTP server on `mcpPort`, `/stdio/...` to server-everything launched by
 * agentgateway (one target each, so tool names are not prefixed).
 */
export function agentgatewayMcpConfig (port: number, mcpPort: number): string {
  return `${GLOBAL}binds:
- port: ${port}
  listeners:
  - protocol: HTTP
    routes:
    - name: http-target
      matches: [{ path: { pathPrefix: /http } }]
      backends: [{ mcp: { targets: [{ name: bench, mcp: { host: "http://127.0.0.1:${mcpPort}/mcp" } }] } }]
    - name: stdio-target
      matches: [{ path: { pathPrefix: /stdio } }]
      backends: [{ mcp: { targets: [{ name: everything, stdio: { cmd: "${process.execPath}", args: ["${EVERYTHING}", stdio] } }] } }]
`
}

/** agentgateway `bin` on a free port with the config `config(port)` gives; ready once it listens there itself. */
export async function startAgentgateway (bin: string, config: (port: number) => string): Promise<Server> {
  const port = await freePort()
  const file = join(scratchDir('agentgateway'), 'config.yaml')
  writeFileSync(file, config(port))
  // The environment overrides the config file's thread count and log level: set both to the same.
  const env = { WORKER_THREADS: '1', RUST_LOG: 'warn' }
  const child = await startNode({ name: 'agentgateway', command: bin, args: ['-f', file], env, readyPort: port, ownPort: true, timeoutMs: 30_000 })
  return { child, port, url: `http://127.0.0.1:${port}/` }
}
