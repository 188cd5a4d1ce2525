/**
 * Envoy's real rate limit service (github.com/envoyproxy/ratelimit, built by
 * scripts/test-tools) with its Redis, both started on random loopback ports for one test
 * file: the service reads its domain and descriptors from a YAML file in a temp directory
 * (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config). Stop them with close().
 */

import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, makeTempDir } from '@portico/testkit/portico'
import { sleep } from '@portico/testkit/wait'
import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'

export interface RateLimitService {
  /** The gRPC address, `127.0.0.1:PORT`. */
  host: string
  /** Everything both processes printed (for failure messages). */
  output(): string
  /**
   * The hits the service has counted so far in the Redis keys matching `pattern` (a Redis
   * glob over the service's keys, `<domain>_<key>_<value>[_<key>_<value>…]_<window start>`),
   * summed. Hits a gateway sends fire and forget (the LLM tokens after an answer) show here
   * once the service has taken them: a test waits on this rather than for a fixed time.
   */
  counted(pattern: string): Promise<number>
  close(): Promise<void>
}

const run = promisify(execFile)

// One round trip: the sum of the counters under `pattern` (0 when there is none yet).
const SUM_SCRIPT = "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + tonumber(redis.call('GET', k) or '0') end return n"

async function countedIn (redisCli: string, port: number, pattern: string): Promise<number> {
  const { stdout } = await run(redisCli, ['-h', '127.0.0.1', '-p', String(port), '--no-raw', 'EVAL', SUM_SCRIPT, '0', pattern])
  const n = /^\(integer\) (\d+)/.exec(stdout.trim())
  if (n === null) throw new Error(`redis-cli answered ${JSON.stringify(stdout)} to the sum of ${pattern}`)
  return Number(n[1])
}

function started (cmd: string, args: string[], env: Record<string, string>, log: string[]): ChildProcess {
  const child = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout!.setEncoding('utf8').on('data', (s: string) => log.push(s))
  child.stderr!.setEncoding('utf8').on('data', (s: string) => log.push(s))
  process.once('exit', () => child.kill('SIGKILL'))
  return child
}

async function stop (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise(resolve => child.once('close', resolve))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
  await exited
  clearTimeout(timer)
}

/**
 * Starts Redis and the rate limit service with `configYaml` as its one config file. A port
 * picked as free can be taken before the service binds it (tests run in parallel): retried.
 */
export async function startRateLimitService (tools: { ratelimit: string, redis: string }, configYaml: string): Promise<RateLimitService> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(tools, configYaml)
    } catch (err) {
      if (attempt >= 3) throw err
    }
  }
}

async function startOnce (tools: { ratelimit: string, redis: string }, configYaml: string): Promise<RateLimitService> {
  const dir = makeTempDir('portico-ratelimit-')
  mkdirSync(join(dir, 'runtime', 'ratelimit', 'config'), { recursive: true })
  writeFileSync(join(dir, 'runtime', 'ratelimit', 'config', 'portico.yaml'), configYaml)
  const log: string[] = []
  const redisPort = await freePort()
  const redis = started(tools.redis, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {}, log)
  const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()]
  const service = started(tools.ratelimit, [], {
    USE_STATSD: 'false',
    LOG_LEVEL: 'warn',
    REDIS_SOCKET_TYPE: 'tcp',
    REDIS_URL: `127.0.0.1:${redisPort}`,
    RUNTIME_ROOT: join(dir, 'runtime'),
    RUNTIME_SUBDIRECTORY: 'ratelimit',
    RUNTIME_WATCH_ROOT: 'false',
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(grpcPort),
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: String(debugPort),
    // RateLimit-Limit / -Remaining / -Reset in response_headers_to_add.
    LIMIT_RESPONSE_HEADERS_ENABLED: 'true'
  }, log)
  const close = async (): Promise<void> => {
    await stop(service)
    await stop(redis)
    rmSync(dir, { recursive: true, force: true })
  }
  // Ready when its HTTP health check answers OK (it checks Redis too).
  const deadline = Date.now() + 20_000
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)
      if (res.ok && (await res.text()).trim() === 'OK') break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || service.exitCode !== null || redis.exitCode !== null) {
      await close()
      throw new Error(`the rate limit service did not become healthy:\n${log.join('')}`)
    }
    await sleep(100)
  }
  // redis-cli comes with redis-server (Debian's redis-tools, a dependency of redis-server),
  // beside it when redis-server was named by path, else on PATH as it was.
  const redisCli = tools.redis.includes('/') ? join(dirname(tools.redis), 'redis-cli') : 'redis-cli'
  return { host: `127.0.0.1:${grpcPort}`, output: () => log.join(''), counted: async pattern => await countedIn(redisCli, redisPort, pattern), close }
}

/**
 * A rate limit service of our own (grpc-js, the proxy's protos) that answers OK to every
 * ShouldRateLimit (or fails the calls `fail` picks) and records each call's descriptors and
 * metadata: for what the real service does not show, such as the trace context the call
 * carried, or a service that fails on one call and not another.
 */
export interface RecordingRateLimitService {
  host: string
  calls: Array<{ request: unknown, metadata: Record<string, unknown> }>
  close(): Promise<void>
}

export async function startRecordingRateLimitService (options: { fail?: (request: unknown) => boolean } = {}): Promise<RecordingRateLimitService> {
  const pkg = grpc.loadPackageDefinition(envoyProtos('envoy/service/ratelimit/v3/rls.proto')) as unknown as { envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } } }
  const server = new grpc.Server()
  const calls: RecordingRateLimitService['calls'] = []
  server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      calls.push({ request: call.request, metadata: call.metadata.getMap() })
      // `fail`: this call fails as a service that is down would (UNAVAILABLE).
      if (options.fail?.(call.request) === true) callback({ code: grpc.status.UNAVAILABLE, details: 'recording service told to fail' }, null)
      else callback(null, { overall_code: 1 })
    }
  })
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => err !== null ? reject(err) : resolve(p))
  })
  return { host: `127.0.0.1:${port}`, calls, close: async () => { server.forceShutdown() } }
}
