/**
 * Hostile or broken config files (issue 14, items 4 and 9), against the real binary:
 *
 * - an empty, whitespace-only or comment-only file (what a truncating editor leaves for a
 *   moment) is not a config: refused by --validate, at start and on reload, and a file
 *   rewritten non-atomically in slow halves never takes the listeners away;
 * - header names and values that HTTP cannot carry are config errors with file:line:col;
 * - a YAML alias bomb is a clean config error (no stack, no unhandled rejection on reload);
 * - a file over the size limit is refused with a message naming the knob, and a large
 *   allowed reload is parsed off the event loop: the data plane keeps answering meanwhile;
 * - (issue 49) every file the config names (JWKS, htpasswd, certificates, keys, CA bundles) is
 *   a regular file within the same limit: a device, a FIFO or a directory is refused unread and
 *   an over-limit file by its size, by a --validate whose memory is capped; on reload such a
 *   file is refused off the event loop while traffic keeps flowing.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { appendFileSync, closeSync, constants, mkdirSync, openSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { execFileSync, spawn } from 'node:child_process'
import { join } from 'node:path'
import { makeTempDir, PORTICO_BIN, type PorticoProcess, QUIET_ENV, runPortico, startPortico } from '@portico/testkit/portico'
import { newAgent, send } from '@portico/testkit/client'
import { sleep, waitUntil } from '@portico/testkit/wait'
import { validateConfig } from '../lib/validate.ts'

/** `file:line:col: path: message` */
const DIAGNOSTIC = /^(.+):(\d+):(\d+): (.+)$/

function gatewayYaml (port: number): string {
  return `gateways:\n  default:\n    port: ${port}\n    address: 127.0.0.1\n`
}

/** A config whose /version route answers `version`, and /tail-<version> exists at the end. */
function versionConfig (port: number, version: string, filler = 0): string {
  let text = gatewayYaml(port) + `routes:
  - name: version
    matches: [{ path: { exact: /version } }]
    policies:
      directResponse: { status: 200, body: "${version}" }
`
  for (let i = 0; i < filler; i++) {
    text += `  - name: filler-${i}
    matches: [{ path: { pathPrefix: /filler/${i} } }]
    policies:
      directResponse: { status: 200, body: "filler ${i}" }
`
  }
  text += `  - name: tail
    matches: [{ path: { exact: /tail-${version} } }]
    policies:
      directResponse: { status: 200, body: "tail" }
`
  return text
}

/** A realistic route table: `n` routes with matches, header modifiers and two backends each. */
function manyRoutesConfig (port: number, n: number, version: string): string {
  const parts = [gatewayYaml(port), `routes:
  - name: version
    matches: [{ path: { exact: /version } }]
    policies:
      directResponse: { status: 200, body: "${version}" }
`]
  for (let i = 0; i < n; i++) {
    parts.push(`  - name: route-${i}
    hostnames: [app${i % 50}.example.com]
    matches:
      - path: { pathPrefix: /svc/${i}/api }
        headers:
          - name: x-tenant
            value: { exact: tenant-${i} }
      - path: { exact: /svc/${i}/health }
        method: GET
    policies:
      requestHeaderModifier:
        set: { x-route: route-${i}, x-team: team-${i % 17} }
        remove: [x-internal]
      responseHeaderModifier:
        add: { x-served-by: portico }
      timeout: { requestTimeout: 10s }
    backends:
      - host: 127.0.0.1:${10000 + (i % 500)}
        weight: 2
      - host: 127.0.0.1:${20000 + (i % 500)}
`)
  }
  return parts.join('')
}

/** An exponential YAML alias expansion (9 levels of 9 aliases: 9^9 leaves). */
function aliasBomb (port: number): string {
  const lines = ['x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
  let prev = 'a'
  for (const name of 'bcdefghi') {
    lines.push(`x-${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]`)
    prev = name
  }
  return lines.join('\n') + '\n' + versionConfig(port, 'bomb')
}

/**
 * Preloaded into a gateway (NODE_OPTIONS=--import, WORKERS=1, so the main thread serves and
 * loads): the responses the serving thread finished while a config-load thread worked — from
 * its creation to its first message (the result) or its end — on stderr when that ends. A
 * count, not a time: a reload loaded on the serving thread starts no such thread (no line),
 * and one whose serving thread waited on it answers nothing meanwhile (0), however fast or
 * loaded the machine.
 */
const LOADER_PROBE = `import { isMainThread } from 'node:worker_threads'
import { subscribe } from 'node:diagnostics_channel'
if (isMainThread) {
  let answered = 0
  subscribe('http.server.response.finish', () => { answered++ })
  subscribe('worker_threads', ({ worker }) => {
    const from = answered
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      process.stderr.write('PROBE loader thread: ' + (answered - from) + ' answered\\n')
    }
    worker.once('message', end)
    worker.once('exit', end)
  })
}
`

/**
 * How many responses the serving thread finished while the reload's config-load thread worked
 * (LOADER_PROBE), read once the reload is logged: the last loader's, whose result that was
 * (a watcher that saw the file twice starts two).
 */
async function answeredWhileLoading (portico: PorticoProcess, fromStderr: number): Promise<number> {
  await portico.waitForOutput(/PROBE loader thread: \d+ answered/, { fromStderr, timeoutMs: 10_000 })
    .catch(() => assert.fail(`the reload started no config-load thread (loaded on the serving thread)\n${portico.output}`))
  const counts = [...portico.stderr.slice(fromStderr).matchAll(/PROBE loader thread: (\d+) answered/g)].map(m => Number(m[1]))
  return counts.at(-1)!
}

/**
 * Requests to `url` from two loops, each sending the next as soon as the last is answered
 * (so one is always waiting at the gateway), until `until` settles; `check` sees each
 * answer. How many were answered.
 */
async function askUntil (agent: ReturnType<typeof newAgent>, url: string, until: Promise<unknown>, check: (res: { status: number, text: string }) => void): Promise<number> {
  let done = false
  void until.finally(() => { done = true }).catch(() => {})
  let n = 0
  await Promise.all([0, 1].map(async () => {
    while (!done) {
      const res = await send(agent, url, { timeoutMs: 120_000 })
      check(res)
      n++
    }
  }))
  return n
}

function assertNoStack (text: string): void {
  assert.doesNotMatch(text, /^\s+at /m, `a stack trace was printed:\n${text}`)
  assert.doesNotMatch(text, /ReferenceError|TypeError|RangeError|unhandled rejection|uncaught exception/i, text)
}

describe('security: config input', () => {
  let dir: string
  const agent = newAgent()
  const file = (name: string, text: string): string => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }

  /** A gateway with LOADER_PROBE preloaded, one event loop (the main thread serves and loads). */
  const startProbed = async (config: (port: number) => string, env: Record<string, string> = {}): Promise<PorticoProcess> => {
    const probe = file('loader-probe.mjs', LOADER_PROBE)
    return await startPortico({ config, env: { ...env, WORKERS: '1', NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${probe}`.trim() } })
  }

  before(() => { dir = makeTempDir('portico-sec-config-') })
  after(async () => {
    await agent.destroy()
    rmSync(dir, { recursive: true, force: true })
  })

  describe('an empty or truncated file never replaces a config', () => {
    for (const [label, text] of [
      ['an empty file', ''],
      ['a whitespace-only file', '  \n\n\t\n'],
      ['a comment-only file', '# nothing here yet\n\n# still nothing\n'],
      ['a file with only routes', 'routes:\n  - name: a\n    policies:\n      directResponse: { status: 200 }\n'],
      ['an empty gateways map', 'gateways: {}\n']
    ] as const) {
      test(`${label} is refused by --validate and at start, with file:line:col`, { timeout: 30_000 }, async () => {
        const path = file(`empty-${label.replace(/\W+/g, '-')}.yaml`, text)
        const validate = await runPortico(['--validate', '-f', path])
        assert.equal(validate.code, 1, `--validate accepted ${label}\n${validate.stdout}${validate.stderr}`)
        const line = validate.stderr.split('\n').find(l => l.startsWith(path))
        assert.ok(line !== undefined, validate.stderr)
        const m = DIAGNOSTIC.exec(line)
        assert.ok(m !== null, `not file:line:col: ${line}`)
        assert.match(m[4] ?? '', /gateway/)
        const start = await runPortico(['-f', path])
        assert.equal(start.code, 1, `portico started on ${label}\n${start.stdout}${start.stderr}`)
        assert.doesNotMatch(start.stdout, /portico started/)
        assert.match(start.stderr, /gateway/)
      })
    }

    let portico: PorticoProcess
    before(async () => {
      portico = await startPortico({ config: port => versionConfig(port, 'v1', 20) })
    })
    after(async () => { await portico?.stop() })

    /** Requests /version in a loop until `stop()`; every answer must be 200 from some version. */
    function requestLoop (): { stop: () => Promise<{ ok: number, failures: string[], versions: Set<string> }>, answered: () => number, versions: Set<string> } {
      let running = true
      const failures: string[] = []
      const versions = new Set<string>()
      let ok = 0
      const loop = (async () => {
        while (running) {
          try {
            const res = await send(agent, `${portico.url}/version`, { timeoutMs: 5_000 })
            if (res.status === 200) {
              ok++
              versions.add(res.text)
            } else {
              failures.push(`${res.status} ${res.text}`)
            }
          } catch (err) {
            failures.push(String((err as Error).cause ?? err))
          }
          await sleep(5)
        }
      })()
      return {
        stop: async () => {
          running = false
          await loop
          return { ok, failures, versions }
        },
        answered: () => ok,
        versions
      }
    }

    async function waitForVersion (version: string, timeoutMs = 10_000): Promise<void> {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const res = await send(agent, `${portico.url}/tail-${version}`).catch(() => undefined)
        if (res?.status === 200) return
        if (Date.now() > deadline) throw new Error(`version ${version} never applied\n${portico.output}`)
        await sleep(20)
      }
    }

    test('a file truncated, then rewritten slowly in two halves, keeps serving and ends on the new config', { timeout: 60_000 }, async () => {
      const next = versionConfig(portico.port, 'v2', 20)
      const half = Math.floor(next.length / 2)
      const loop = requestLoop()
      const stdoutBefore = portico.stdout.length
      // Each state of the file was read: a reload outcome logged for it (rejected, or reloaded).
      const outcomes = (): number => portico.stdout.slice(stdoutBefore).match(/config reload(ed| rejected| failed)/g)?.length ?? 0
      const seen = async (n: number, state: string): Promise<void> => await waitUntil(() => outcomes() >= n, 10_000, () => `the watcher to read ${state}\n${portico.output}`)
      try {
        await waitUntil(() => loop.answered() >= 10, 10_000, 'the request loop to be under way')
        // What `>` in a shell, or a non-atomic save, does: truncate, then write in pieces, each
        // state seen by the watcher before the next.
        writeFileSync(portico.configPath, '')
        await seen(1, 'the empty file')
        appendFileSync(portico.configPath, next.slice(0, half))
        await seen(2, 'the first half')
        appendFileSync(portico.configPath, next.slice(half))
        await waitForVersion('v2')
        // The loop itself got an answer from the new config.
        await waitUntil(() => loop.versions.has('v2'), 10_000, 'the request loop to see v2')
      } finally {
        await loop.stop()
      }
      const result = await loop.stop()
      assert.deepEqual(result.failures, [], `requests failed while the file was being rewritten\n${portico.output}`)
      assert.ok(result.ok > 20, `too few requests ran during the rewrite (${result.ok})`)
      assert.ok(result.versions.has('v2'), 'the new config never answered')
      assert.equal((await send(agent, `${portico.url}/version`)).text, 'v2')
      // The empty state was seen and refused, not installed.
      const logs = portico.stdout.slice(stdoutBefore)
      assert.match(logs, /config reload rejected/, 'the empty file was never looked at')
      assert.doesNotMatch(logs, /closing listener/, 'a listener was closed during the rewrite')
    })

    test('a reload to a file with no gateways is refused and logged; the old listeners keep serving', { timeout: 30_000 }, async () => {
      const before = (await send(agent, `${portico.url}/version`)).text
      const stdoutBefore = portico.stdout.length
      portico.replaceConfig('routes:\n  - name: version\n    policies:\n      directResponse: { status: 200, body: "gone" }\n')
      const text = await portico.waitForOutput('config reload rejected', { fromStdout: stdoutBefore, timeoutMs: 10_000 })
      assert.match(text, /gateway/, 'the rejection does not say why')
      assert.match(text, new RegExp(`${portico.configPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: `), 'the rejection has no file:line:col')
      assert.doesNotMatch(portico.stdout.slice(stdoutBefore), /closing listener/)
      const res = await send(agent, `${portico.url}/version`)
      assert.equal(res.status, 200)
      assert.equal(res.text, before)
    })
  })

  describe('header names and values HTTP cannot carry are config errors', () => {
    const cases: Array<{ what: string, policies: string, path: string, message: RegExp }> = [
      {
        what: 'a requestHeaderModifier name with a space',
        policies: '      requestHeaderModifier:\n        set: { "x bad": "v" }',
        path: 'routes[0].policies.requestHeaderModifier.set["x bad"]',
        message: /header name/
      },
      {
        what: 'a requestHeaderModifier value with CR LF',
        policies: '      requestHeaderModifier:\n        add: { x-ok: "a\\r\\nx-injected: 1" }',
        path: 'routes[0].policies.requestHeaderModifier.add.x-ok',
        message: /header value/
      },
      {
        what: 'a responseHeaderModifier name with a colon',
        policies: '      responseHeaderModifier:\n        set: { "x-a:b": "v" }',
        path: 'routes[0].policies.responseHeaderModifier.set["x-a:b"]',
        message: /header name/
      },
      {
        what: 'a responseHeaderModifier value with a NUL',
        policies: '      responseHeaderModifier:\n        set: { x-ok: "a\\0b" }',
        path: 'routes[0].policies.responseHeaderModifier.set.x-ok',
        message: /header value/
      },
      {
        what: 'a header value with leading whitespace',
        policies: '      requestHeaderModifier:\n        set: { x-ok: " padded" }',
        path: 'routes[0].policies.requestHeaderModifier.set.x-ok',
        message: /header value/
      },
      {
        what: 'a directResponse header name with a space',
        policies: '      directResponse:\n        status: 200\n        headers: { "content type": "text/plain" }',
        path: 'routes[0].policies.directResponse.headers["content type"]',
        message: /header name/
      },
      {
        what: 'a directResponse header value with LF',
        policies: '      directResponse:\n        status: 200\n        headers: { x-ok: "a\\nb" }',
        path: 'routes[0].policies.directResponse.headers.x-ok',
        message: /header value/
      },
      {
        what: 'a transformation header name with a space',
        policies: '      transformation:\n        request:\n          set: { "x bad": "\'v\'" }',
        path: 'routes[0].policies.transformation.request.set["x bad"]',
        message: /header name/
      },
      {
        what: 'a jwtAuth token header name with a space',
        policies: '      jwtAuth:\n        issuer: https://idp.example\n        audiences: [a]\n        jwks: { url: "https://idp.example/jwks" }\n        location: { header: "x token" }',
        path: 'routes[0].policies.jwtAuth.location.header',
        message: /header name/
      },
      {
        what: 'a basicAuth realm with CR LF',
        policies: '      basicAuth:\n        htpasswd: "u:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M="\n        realm: "a\\r\\nb"',
        path: 'routes[0].policies.basicAuth.realm',
        message: /./
      },
      {
        what: 'a requestRedirect path with CR LF',
        policies: '      requestRedirect:\n        path: { full: "/a\\r\\nx: y" }',
        path: 'routes[0].policies.requestRedirect.path.full',
        message: /./
      }
    ]
    // One file with every case as its own route (one process instead of one per case).
    const text = `${gatewayYaml(18080)}routes:\n` + cases.map((c, i) => `  - name: r${i}\n    policies:\n${c.policies}\n    backends:\n      - host: 127.0.0.1:8080\n`).join('')
    const at = (c: (typeof cases)[number], i: number) => c.path.replace('routes[0]', `routes[${i}]`)

    test('each is refused by --validate with file:line:col naming the field', { timeout: 30_000 }, async () => {
      const v = await validateConfig(text)
      assert.equal(v.code, 1, v.stderr)
      assertNoStack(v.stderr)
      const missing: string[] = []
      cases.forEach((c, i) => {
        const path = at(c, i)
        const line = v.stderr.split('\n').find(l => l.includes(`: ${path}: `))
        if (line === undefined || !/^.+:\d+:\d+: /.test(line) || !c.message.test(line)) missing.push(`${c.what} (${path})`)
      })
      assert.deepEqual(missing, [], `not refused as expected:\n${v.stderr}`)
    })

    test('and at start: exit 1, nothing listens', { timeout: 30_000 }, async () => {
      const path = file('headers.yaml', text)
      const run = await runPortico(['-f', path])
      assert.equal(run.code, 1, run.stderr)
      assert.doesNotMatch(run.stdout, /portico started/)
      assert.ok(run.stderr.includes(`: ${at(cases[0]!, 0)}: invalid name "x bad"`), run.stderr)
      assertNoStack(run.stderr)
    })
  })

  describe('a YAML alias bomb', () => {
    test('is a clean config error at --validate and at start: exit 1, no stack', { timeout: 60_000 }, async () => {
      const path = file('bomb.yaml', aliasBomb(18080))
      for (const args of [['--validate', '-f', path], ['-f', path]]) {
        const run = await runPortico(args, { timeoutMs: 30_000 })
        assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`)
        assertNoStack(run.stderr + run.stdout)
        const line = run.stderr.split('\n').find(l => l.startsWith(path))
        assert.ok(line !== undefined && DIAGNOSTIC.test(line), run.stderr)
        assert.match(line, /alias/i)
      }
    })

    test('on reload is rejected without an unhandled rejection; the old config keeps serving', { timeout: 60_000 }, async () => {
      const portico = await startPortico({ config: port => versionConfig(port, 'v1') })
      try {
        const stdoutBefore = portico.stdout.length
        portico.writeConfig(aliasBomb(portico.port))
        await portico.waitForOutput('config reload rejected', { fromStdout: stdoutBefore, timeoutMs: 20_000 })
        // What is checked is that nothing more comes (no unhandled rejection after the log
        // line): a fixed time for it to show, as there is no event for its absence.
        await sleep(200)
        const logs = portico.stdout.slice(stdoutBefore) + portico.stderr
        assert.doesNotMatch(logs, /unhandled rejection|uncaught exception/, logs)
        assert.match(logs, /alias/i)
        const res = await send(agent, `${portico.url}/version`)
        assert.equal(res.text, 'v1')
        assert.equal(portico.exit, null)
      } finally {
        await portico.stop()
      }
    })
  })

  describe('config size', () => {
    test('a file over the default limit (8 MiB) is refused quickly with a message naming the knob', { timeout: 60_000 }, async () => {
      const path = file('huge.yaml', versionConfig(18080, 'v1') + `# ${'x'.repeat(9 * 1024 * 1024)}\n`)
      for (const args of [['--validate', '-f', path], ['-f', path]]) {
        const run = await runPortico(args, { timeoutMs: 30_000 })
        assert.equal(run.code, 1, run.stderr)
        assert.match(run.stderr, /8 MiB/)
        assert.match(run.stderr, /--max-config-size|MAX_CONFIG_SIZE/)
        assertNoStack(run.stderr)
      }
      // The knobs, on a smaller file (parsing 9 MiB would cost seconds per run, not coverage).
      const mid = file('mid.yaml', versionConfig(18080, 'v1') + `# ${'x'.repeat(1536 * 1024)}\n`)
      const over = await runPortico(['--validate', '--max-config-size', '1MiB', '-f', mid], { timeoutMs: 30_000 })
      assert.equal(over.code, 1, over.stderr)
      assert.match(over.stderr, /1 MiB/)
      const raised = await runPortico(['--validate', '--max-config-size', '2MiB', '-f', mid], { timeoutMs: 30_000 })
      assert.equal(raised.code, 0, raised.stderr)
      const fromEnv = await runPortico(['--validate', '-f', mid], { env: { MAX_CONFIG_SIZE: '1MiB' }, timeoutMs: 30_000 })
      assert.equal(fromEnv.code, 1, fromEnv.stderr)
      const bad = await runPortico(['--validate', '--max-config-size', 'lots', '-f', path])
      assert.equal(bad.code, 2, bad.stderr)
    })

    test('a reload over the limit is refused; the old config keeps serving', { timeout: 30_000 }, async () => {
      const portico = await startPortico({ config: port => versionConfig(port, 'v1'), env: { MAX_CONFIG_SIZE: '64KiB' } })
      try {
        const stdoutBefore = portico.stdout.length
        portico.writeConfig(versionConfig(portico.port, 'v2', 1000))
        const text = await portico.waitForOutput('config reload rejected', { fromStdout: stdoutBefore, timeoutMs: 10_000 })
        assert.match(text, /64 KiB/)
        assert.equal((await send(agent, `${portico.url}/version`)).text, 'v1')
      } finally {
        await portico.stop()
      }
    })

    test('a large allowed reload does not stall the data plane', { timeout: 240_000 }, async ctx => {
      const portico = await startProbed(port => versionConfig(port, 'v1'))
      try {
        // 4,000 routes (2.2 MiB): long enough a load that a stall shows, short enough for CI.
        const big = manyRoutesConfig(portico.port, 4_000, 'v2')
        const stdoutBefore = portico.stdout.length
        const stderrBefore = portico.stderr.length
        // Renamed into place (an atomic save): one reload of the whole file, not first of a part of it.
        portico.replaceConfig(big)
        const reloaded = portico.waitForOutput(/config reloaded|config reload rejected/, { fromStdout: stdoutBefore, timeoutMs: 200_000 })
        const n = await askUntil(agent, `${portico.url}/version`, reloaded, res => assert.equal(res.status, 200))
        const log = await reloaded
        assert.match(log, /config reloaded/, `the large config was not applied\n${portico.output.slice(-3000)}`)
        assert.equal((await send(agent, `${portico.url}/version`)).text, 'v2')
        // Parsing and validating blocked the event loop for the whole reload before; now they
        // run on the config-load thread, and the serving thread answers meanwhile.
        const whileLoading = await answeredWhileLoading(portico, stderrBefore)
        ctx.diagnostic(`4k routes, ${(big.length / 1048576).toFixed(1)} MiB: ${n} requests answered during the reload, ${whileLoading} of them while the config-load thread worked`)
        assert.ok(whileLoading >= 10, `only ${whileLoading} requests were answered while the config-load thread worked`)
      } finally {
        await portico.stop()
      }
    })
  })

  describe('files a config names', () => {
    /** Address-space cap of the --validate child: Node needs ~1.5 GiB of it to start; reading /dev/zero whole would need far more. */
    const CAP_KIB = 2 * 1024 * 1024

    /** `portico --validate -f path` under `ulimit -v`: a runaway read fails in the child, never in the machine. */
    async function validateCapped (path: string): Promise<{ code: number | null, stderr: string, ms: number }> {
      const started = performance.now()
      const child = spawn('/bin/sh', ['-c', `ulimit -v ${CAP_KIB} && exec "$@"`, 'sh', process.execPath, PORTICO_BIN, '--validate', '-f', path], {
        env: { ...process.env, ...QUIET_ENV },
        stdio: ['ignore', 'pipe', 'pipe']
      })
      let stderr = ''
      child.stderr!.setEncoding('utf8').on('data', (s: string) => { stderr += s })
      child.stdout!.resume()
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
      const code = await new Promise<number | null>(resolve => child.once('close', c => resolve(c)))
      clearTimeout(timer)
      return { code, stderr, ms: performance.now() - started }
    }

    const PEM = '-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n'

    /** Each hostile file, in the field that names it: the field's path and the message expected. */
    function hostileCases (): Array<{ what: string, yaml: string, field: string, message: RegExp }> {
      const fifo = join(dir, 'hostile.fifo')
      rmSync(fifo, { force: true })
      execFileSync('mkfifo', [fifo])
      const directory = join(dir, 'hostile.dir')
      mkdirSync(directory, { recursive: true })
      // Sparse: 300 MiB of size, no data written.
      const sparse = join(dir, 'hostile.sparse')
      writeFileSync(sparse, '')
      truncateSync(sparse, 300 * 1024 * 1024)
      writeFileSync(join(dir, 'key.pem'), PEM)
      const route = (policies: string): string => `${gatewayYaml(18080)}routes:\n  - name: r\n    policies: ${policies}\n    backends: [{ host: "127.0.0.1:1" }]\n`
      const https = (tls: string): string => `gateways:\n  default:\n    port: 18443\n    protocol: HTTPS\n    tls: ${tls}\n`
      return [
        { what: 'a JWKS path of /dev/zero', yaml: route('{ jwtAuth: { issuer: i, audiences: [a], jwks: { file: /dev/zero } } }'), field: 'routes[0].policies.jwtAuth.jwks.file', message: /cannot read \/dev\/zero: a character device, not a regular file/ },
        { what: 'an htpasswd of /dev/urandom', yaml: route('{ basicAuth: { htpasswd: { file: /dev/urandom } } }'), field: 'routes[0].policies.basicAuth.htpasswd.file', message: /cannot read \/dev\/urandom: a character device, not a regular file/ },
        { what: 'a certificate that is a FIFO', yaml: https(`{ cert: ${fifo}, key: key.pem }`), field: 'gateways.default.tls.cert', message: /a FIFO \(named pipe\), not a regular file/ },
        { what: 'a CA bundle that is a directory', yaml: route(`{}`).replace('backends: [{ host: "127.0.0.1:1" }]', `backends: [{ host: "127.0.0.1:1", policies: { backendTLS: { root: ${directory} } } }]`), field: 'routes[0].backends[0].policies.backendTLS.root', message: /a directory, not a regular file/ },
        { what: 'a 300 MiB sparse key', yaml: https(`{ cert: key.pem, key: ${sparse} }`), field: 'gateways.default.tls.key', message: /file is 314572800 bytes, limit 8388608/ }
      ]
    }

    test('a device, a FIFO, a directory or an over-limit file is refused promptly by a memory-capped --validate', { timeout: 180_000 }, async () => {
      for (const c of hostileCases()) {
        const path = file('hostile.yaml', c.yaml)
        const run = await validateCapped(path)
        assert.equal(run.code, 1, `${c.what}: exit ${run.code}\n${run.stderr}`)
        const line = run.stderr.split('\n').find(l => l.startsWith(`${path}:`) && l.includes(`: ${c.field}: `))
        assert.ok(line !== undefined && DIAGNOSTIC.test(line) && c.message.test(line), `${c.what}: expected ${c.field} matching ${String(c.message)}, got:\n${run.stderr}`)
        assertNoStack(run.stderr)
        assert.ok(run.ms < 20_000, `${c.what}: took ${Math.round(run.ms)} ms`)
      }
    })

    test('a config file replaced by a FIFO is refused unread on reload; traffic keeps flowing', { timeout: 60_000 }, async () => {
      const portico = await startPortico({ config: port => versionConfig(port, 'v1') })
      const fifo = join(portico.dir, 'next.fifo')
      try {
        execFileSync('mkfifo', [fifo])
        const stdoutBefore = portico.stdout.length
        // Renamed over the config, as an editor saves: the watcher reads it on the serving loop.
        renameSync(fifo, portico.configPath)
        const logged = await portico.waitForOutput(/cannot read config file/, { fromStdout: stdoutBefore, timeoutMs: 10_000 })
        assert.match(logged, /FIFO \(named pipe\), not a regular file/)
        for (let i = 0; i < 5; i++) {
          const res = await send(agent, `${portico.url}/version`, { timeoutMs: 3_000 })
          assert.equal(res.text, 'v1')
        }
      } finally {
        // Were the open blocked, a writer releases it (O_NONBLOCK: fails at once if no reader).
        try { closeSync(openSync(portico.configPath, constants.O_WRONLY | constants.O_NONBLOCK)) } catch {}
        await portico.stop()
      }
    })

    test('a reload naming a large htpasswd under the limit applies while traffic keeps flowing', { timeout: 120_000 }, async ctx => {
      const portico = await startProbed(port => versionConfig(port, 'v1'))
      try {
        // ~7.5 MiB: about 110,000 bcrypt users, under the 8 MiB limit.
        const line = (i: number): string => `user${String(i).padStart(7, '0')}:$2y$10$abcdefghijklmnopqrstuuS0123456789abcdefghijklmnopqrstu\n`
        const lines: string[] = []
        for (let i = 0, size = 0; size < 7.5 * 1024 * 1024; i++) { lines.push(line(i)); size += lines[i]!.length }
        writeFileSync(join(portico.dir, 'users.htpasswd'), lines.join(''))
        const stdoutBefore = portico.stdout.length
        const stderrBefore = portico.stderr.length
        const reloaded = portico.waitForOutput(/config reloaded|config reload rejected/, { fromStdout: stdoutBefore, timeoutMs: 90_000 })
        // Only /guarded needs a password: /version keeps answering without one.
        portico.replaceConfig(versionConfig(portico.port, 'v2') + `  - name: guarded
    matches: [{ path: { exact: /guarded } }]
    policies:
      basicAuth: { htpasswd: { file: users.htpasswd } }
      directResponse: { status: 200, body: "in" }
`)
        const n = await askUntil(agent, `${portico.url}/version`, reloaded, res => assert.equal(res.status, 200))
        const log = await reloaded
        assert.match(log, /config reloaded/, portico.output)
        assert.equal((await send(agent, `${portico.url}/version`)).text, 'v2')
        assert.equal((await send(agent, `${portico.url}/guarded`)).status, 401)
        // Read and parsed on the config-load thread; the serving thread only installs the
        // result, and answers while the file is read and parsed (reading it inline stalled
        // every request for most of the reload).
        const whileLoading = await answeredWhileLoading(portico, stderrBefore)
        ctx.diagnostic(`${lines.length} htpasswd users (${(lines.join('').length / 1048576).toFixed(1)} MiB): ${n} requests answered during the reload, ${whileLoading} of them while the config-load thread worked`)
        assert.ok(whileLoading >= 10, `only ${whileLoading} requests were answered while the config-load thread read and parsed the htpasswd`)
      } finally {
        await portico.stop()
      }
    })

    test('a reload naming an over-limit htpasswd is refused off the event loop; traffic keeps flowing', { timeout: 120_000 }, async ctx => {
      const portico = await startProbed(port => versionConfig(port, 'v1'))
      try {
        const sparse = join(portico.dir, 'users.htpasswd')
        writeFileSync(sparse, '')
        truncateSync(sparse, 300 * 1024 * 1024)
        const stdoutBefore = portico.stdout.length
        const stderrBefore = portico.stderr.length
        const reloaded = portico.waitForOutput(/config reloaded|config reload rejected/, { fromStdout: stdoutBefore, timeoutMs: 60_000 })
        portico.writeConfig(versionConfig(portico.port, 'v2').replace('directResponse:', 'basicAuth: { htpasswd: { file: users.htpasswd } }\n      directResponse:'))
        const n = await askUntil(agent, `${portico.url}/version`, reloaded, res => {
          assert.equal(res.status, 200)
          assert.equal(res.text, 'v1')
        })
        const log = await reloaded
        assert.match(log, /config reload rejected/)
        assert.match(portico.output, /basicAuth\.htpasswd\.file: cannot read \S+users\.htpasswd: file is 314572800 bytes, limit 8388608/)
        const whileLoading = await answeredWhileLoading(portico, stderrBefore)
        ctx.diagnostic(`300 MiB sparse htpasswd: refused; ${n} requests answered meanwhile, ${whileLoading} of them while the config-load thread worked`)
        assert.ok(whileLoading >= 10, `only ${whileLoading} requests were answered while the config-load thread looked at the file`)
        assert.equal((await send(agent, `${portico.url}/version`)).text, 'v1')
      } finally {
        await portico.stop()
      }
    })
  })
})
