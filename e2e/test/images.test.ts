/**
 * The images' Dockerfiles (deploy/*.Dockerfile), without a Docker engine: hadolint, static
 * checks (pinned base, non-root numeric user, entrypoints and copied paths that exist in the
 * build context their .dockerignore leaves), and the build's own steps replayed on that
 * context in a temporary directory — the filtered production install, scripts/runtime-tree.ts,
 * then the entrypoints run from the runtime tree alone.
 */

import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { REPO_ROOT, run } from '../lib/chart.ts'
import { freePort } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { requireTool } from '@portico/testkit/tools'
import { START_FLAGS } from '@portico/proxy/v8-flags'
import { MALLOC_TUNABLES } from '@portico/proxy/malloc-tunables'

/** Where config/validate.ts looks for the precompiled config validator, in a tree (PRECOMPILED_VALIDATOR_PATH). */
const VALIDATOR_IN_TREE = 'packages/engine/node_modules/.cache/portico/config-validator.cjs'
const MALLOC_TRIM_IN_TREE = 'packages/proxy/node_modules/.cache/portico/malloc-trim.node'

const IMAGES = [
  { dockerfile: 'deploy/controller.Dockerfile', pkg: '@portico/controller', entry: 'packages/controller/bin/portico-controller.ts', ports: ['9978', '9093', '9092'] },
  { dockerfile: 'deploy/portico.Dockerfile', pkg: '@portico/proxy', entry: 'packages/proxy/bin/portico.ts', ports: ['15020', '15021'] }
]

interface Instruction { op: string, args: string, line: number, stage: number }

function instructions (text: string): Instruction[] {
  const out: Instruction[] = []
  const lines = text.split('\n')
  let stage = -1
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!
    if (line.trim() === '' || line.trim().startsWith('#')) continue
    const start = i
    while (line.endsWith('\\') && i + 1 < lines.length) line = line.slice(0, -1) + ' ' + lines[++i]!.trim()
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line)
    if (m === null) continue
    if (m[1] === 'FROM') stage++
    out.push({ op: m[1]!, args: m[2]!.trim(), line: start + 1, stage })
  }
  return out
}

/** .dockerignore rules (last match wins, `!` re-includes) as a predicate on context paths. */
function dockerignore (text: string): (path: string) => boolean {
  const rules = text.split('\n').map(l => l.trim()).filter(l => l !== '' && !l.startsWith('#')).map(l => {
    const negate = l.startsWith('!')
    const pattern = (negate ? l.slice(1) : l).replace(/^\/+|\/+$/g, '')
    const source = pattern.split('/').map(seg => seg === '**' ? '.*' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')).join('/')
    return { negate, re: new RegExp(`^${source.replace(/\.\*\//g, '(?:.*/)?')}(?:/.*)?$`) }
  })
  return (path: string) => {
    let ignored = false
    for (const r of rules) if (r.re.test(path)) ignored = !r.negate
    return ignored
  }
}

/** The files of the build context: the repository's (tracked and new, not git-ignored) less the .dockerignore's. */
function contextFiles (dockerfile: string): string[] {
  const ignored = dockerignore(readFileSync(join(REPO_ROOT, `${dockerfile}.dockerignore`), 'utf8'))
  const listed = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 }).toString().split('\0').filter(f => f !== '')
  return listed.filter(f => !ignored(f) && existsSync(join(REPO_ROOT, f)))
}

function pnpmCommand (): [string, string[]] | null {
  const execpath = process.env.npm_execpath
  if (execpath !== undefined && /pnpm/.test(execpath)) return execpath.endsWith('.js') || execpath.endsWith('.cjs') ? [process.execPath, [execpath]] : [execpath, []]
  try {
    execFileSync('pnpm', ['--version'], { stdio: 'ignore' })
    return ['pnpm', []]
  } catch {
    return null
  }
}

test('hadolint finds nothing in the Dockerfiles', async (t) => {
  const hadolint = requireTool(t, 'HADOLINT', 'hadolint')
  if (hadolint === null) return
  const r = await run(hadolint, ['--failure-threshold', 'style', ...IMAGES.map(i => join(REPO_ROOT, i.dockerfile))])
  assert.equal(r.code, 0, `hadolint:\n${r.stdout}${r.stderr}`)
  assert.equal(r.stdout.trim(), '')
})

for (const image of IMAGES) {
  test(`${image.dockerfile}: multi-stage, pinned, non-root, and every path it copies is in its build context`, () => {
    const text = readFileSync(join(REPO_ROOT, image.dockerfile), 'utf8')
    const ins = instructions(text)
    const base = /^ARG NODE_IMAGE=(node:(\d+)\.\d+\.\d+-[a-z]+-slim)$/m.exec(text)
    assert.ok(base, 'the Node base image is pinned to a full version, slim')
    assert.equal(base[2], '24', 'Node 24')
    const stages = ins.filter(i => i.op === 'FROM')
    if (image.pkg === '@portico/proxy') {
      // Its build stage compiles the malloc_trim module: the same Node and Debian release, not slim (gcc).
      const build = /^ARG NODE_BUILD_IMAGE=(node:[\d.]+-[a-z]+)$/m.exec(text)
      assert.equal(build?.[1] + '-slim', base[1], 'the build image is the runtime\'s Node and Debian release, with a compiler')
      assert.deepEqual(stages.map(s => s.args), ['${NODE_BUILD_IMAGE} AS build', '${NODE_IMAGE} AS runtime'])
    } else {
      assert.deepEqual(stages.map(s => s.args), ['${NODE_IMAGE} AS build', '${NODE_IMAGE} AS runtime'])
    }
    const last = ins.filter(i => i.stage === stages.length - 1)
    const user = last.filter(i => i.op === 'USER').at(-1)
    assert.ok(user !== undefined && /^[1-9]\d*:[1-9]\d*$/.test(user.args), 'the runtime runs as a numeric non-root user (runAsNonRoot can check it)')
    assert.equal(user.args, '10101:10101', 'the uid the chart\'s podSecurityContext and the deployer use')
    assert.ok(last.some(i => i.op === 'COPY' && i.args.startsWith('--from=build /out/')), 'the runtime copies only the runtime tree')
    assert.ok(!last.some(i => i.op === 'RUN' && /npm install|pnpm/.test(i.args)), 'nothing is installed in the runtime stage')
    const entry = last.find(i => i.op === 'ENTRYPOINT')
    // The proxy's image gives Node the data plane's young-generation size (packages/proxy/src/v8-flags.ts).
    assert.deepEqual(JSON.parse(entry!.args), ['node', ...(image.pkg === '@portico/proxy' ? START_FLAGS : []), `/app/${image.entry}`])
    if (image.pkg === '@portico/proxy') {
      // Node's compile cache is filled at build time with the entrypoint's own command line,
      // as the pods' user (Node keys the cache by both), where NODE_COMPILE_CACHE points.
      const warm = last.findIndex(i => i.op === 'RUN' && i.args === [...JSON.parse(entry!.args) as string[], '--warm-cache'].join(' '))
      assert.ok(warm >= 0, 'the runtime stage runs the entrypoint with --warm-cache')
      assert.equal(last.slice(0, warm).filter(i => i.op === 'USER').at(-1)?.args, '10101:10101', 'the cache is filled as the pods\' user')
      assert.match(text, /NODE_COMPILE_CACHE=\/app\/packages\/proxy\/node_modules\/\.cache\/node-compile-cache\b/)
      // glibc's malloc settings (packages/proxy/src/malloc-tunables.ts), in the runtime's environment.
      assert.ok(last.some(i => i.op === 'ENV' && i.args === `GLIBC_TUNABLES=${MALLOC_TUNABLES}`), `ENV GLIBC_TUNABLES=${MALLOC_TUNABLES} in the runtime stage`)
      // The config validator is precompiled into the runtime tree (scripts/setup's step), before the cache is filled.
      const build = ins.filter(i => i.stage === 0)
      const tree = build.findIndex(i => i.op === 'RUN' && i.args.includes('scripts/runtime-tree.ts @portico/proxy /out'))
      const gen = build.findIndex(i => i.op === 'RUN' && i.args.startsWith(`node scripts/gen-validator.ts /out/${VALIDATOR_IN_TREE} `))
      assert.ok(tree >= 0 && gen > tree, 'the build stage precompiles the config validator into /out after the runtime tree')
      assert.ok(build[gen]!.args.includes(`node scripts/build-native.ts /out/${MALLOC_TRIM_IN_TREE} `), 'the build stage builds the malloc_trim module into the runtime tree')
    }
    assert.ok(existsSync(join(REPO_ROOT, image.entry)))
    assert.deepEqual(last.find(i => i.op === 'EXPOSE')!.args.split(/\s+/), image.ports)
    // Every build-context path a COPY names (not --from) is in the context.
    const files = contextFiles(image.dockerfile)
    const inContext = (p: string) => p === '.' || files.some(f => f === p || f.startsWith(p.replace(/\/$/, '') + '/'))
    for (const i of ins.filter(i => i.op === 'COPY' && !i.args.startsWith('--from'))) {
      const parts = i.args.split(/\s+/).filter(p => !p.startsWith('--'))
      for (const src of parts.slice(0, -1)) assert.ok(inContext(src), `line ${i.line}: COPY ${src} is not in the build context`)
    }
    // What the build needs is not ignored; what must not go in is.
    for (const needed of ['pnpm-lock.yaml', 'pnpm-workspace.yaml', 'package.json', '.npmrc', 'scripts/runtime-tree.ts', 'protos', 'packages/engine/src', 'packages/controller/package.json', 'e2e/package.json']) {
      assert.ok(inContext(needed), `${needed} is in the build context`)
    }
    for (const f of files) assert.ok(!f.includes('node_modules/') && !f.startsWith('.git/') && !f.startsWith('charts/') && !/^e2e\/(test|lib|cluster)\//.test(f), `${f} should not be in the build context`)
  })
}

async function waitFor (what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  // A check that throws (the container not answering yet) counts as not yet.
  await waitUntil(async () => await check().catch(() => false), timeoutMs, what, 200)
}

test('the images\' build steps, replayed on their build context, give runnable runtime trees', { timeout: 180_000 }, async (t: TestContext) => {
  const pnpm = pnpmCommand()
  if (pnpm === null) {
    if (process.env.CI === 'true') throw new Error('pnpm not found')
    t.skip('pnpm not found')
    return
  }
  const dir = mkdtempSync(join(tmpdir(), 'portico-image-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // The store the workspace was installed from (the Dockerfiles' `pnpm fetch` layer): pnpm
  // would pick another one for a project on another filesystem.
  // `store path` names the layout version's directory (…/store/v10); --store-dir takes its parent.
  const storePath = execFileSync(pnpm[0], [...pnpm[1], 'store', 'path'], { cwd: REPO_ROOT }).toString().trim()
  const storeDir = /\/v\d+$/.test(storePath) ? dirname(storePath) : storePath
  for (const image of IMAGES) {
    await t.test(image.pkg, async () => {
      // COPY . . — the build context.
      const context = join(dir, image.pkg.replace(/\W/g, '_'), 'app')
      for (const f of contextFiles(image.dockerfile)) {
        if (statSync(join(REPO_ROOT, f)).isDirectory()) continue
        mkdirSync(dirname(join(context, f)), { recursive: true })
        cpSync(join(REPO_ROOT, f), join(context, f))
      }
      // RUN pnpm install --offline --frozen-lockfile --prod --filter "<pkg>..." && node scripts/runtime-tree.ts <pkg> /out
      const install = await new Promise<{ code: number | null, output: string }>(resolve => {
        const child = spawn(pnpm[0], [...pnpm[1], 'install', '--offline', '--frozen-lockfile', '--prod', '--store-dir', storeDir, '--filter', `${image.pkg}...`], { cwd: context, env: { ...process.env, CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] })
        let output = ''
        child.stdout.on('data', (d: Buffer) => { output += d.toString() })
        child.stderr.on('data', (d: Buffer) => { output += d.toString() })
        child.on('exit', code => resolve({ code, output }))
      })
      assert.equal(install.code, 0, `pnpm install:\n${install.output}`)
      const out = join(dirname(context), 'out')
      const tree = await run(process.execPath, [join(context, 'scripts/runtime-tree.ts'), image.pkg, out])
      assert.equal(tree.code, 0, tree.stderr)
      assert.ok(!existsSync(join(out, 'packages/cli')), 'porticoctl is not in the image')
      assert.ok(!existsSync(join(out, 'e2e')) && !existsSync(join(out, 'bench')))
      assert.ok(existsSync(join(out, 'protos')), 'protos/ is in the image')
      if (image.pkg === '@portico/proxy') {
        // RUN node scripts/gen-validator.ts /out/<the validator's place>
        const gen = await run(process.execPath, [join(context, 'scripts/gen-validator.ts'), join(out, VALIDATOR_IN_TREE)])
        assert.equal(gen.code, 0, gen.stderr)
        // && node scripts/build-native.ts /out/<the malloc_trim module's place>
        const native = await run(process.execPath, [join(context, 'scripts/build-native.ts'), join(out, MALLOC_TRIM_IN_TREE)])
        assert.equal(native.code, 0, native.stderr)
        assert.ok(existsSync(join(out, MALLOC_TRIM_IN_TREE)), `the module was built: ${native.stderr}`)
      }
      // The runtime: nothing but the tree, from another directory.
      rmSync(context, { recursive: true, force: true })
      const env = { PATH: '/usr/bin:/bin', HOME: dir, NODE_ENV: 'production' }
      if (image.pkg === '@portico/controller') {
        const r = await run(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(join(out, 'packages/controller/src/main.ts'))}); console.log('loaded')`], { env })
        assert.equal(r.code, 0, r.stderr)
        assert.equal(r.stdout.trim(), 'loaded')
        // The entrypoint itself: it gets as far as wanting a cluster.
        const bin = await run(process.execPath, [join(out, image.entry)], { env: { ...env, KUBECONFIG: join(dir, 'missing-kubeconfig') }, timeoutMs: 20_000 })
        assert.notEqual(bin.code, 0)
        assert.match(bin.stdout + bin.stderr, /missing-kubeconfig|ENOENT|kubeconfig/i)
        assert.doesNotMatch(bin.stdout + bin.stderr, /ERR_MODULE_NOT_FOUND|ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING/)
      } else {
        const version = await run(process.execPath, [join(out, image.entry), '--version'], { env })
        assert.equal(version.code, 0, version.stderr)
        assert.match(version.stdout, /^portico \d+\.\d+\.\d+/)
        // The tree's engine finds its precompiled validator, made from its own Ajv and schema (its key matches).
        const validate = pathToFileURL(join(out, 'packages/engine/src/config/validate.ts')).href
        const found = await run(process.execPath, ['--input-type=module', '-e', `const v = await import(${JSON.stringify(validate)}); console.log(v.PRECOMPILED_VALIDATOR_PATH, typeof v.loadPrecompiledValidator(v.PRECOMPILED_VALIDATOR_PATH, v.validatorKey()))`], { env })
        assert.equal(found.code, 0, found.stderr)
        assert.equal(found.stdout.trim(), `${join(out, VALIDATOR_IN_TREE)} function`, 'the runtime tree\'s proxy uses the precompiled validator')
        // And its malloc_trim module.
        const trim = pathToFileURL(join(out, 'packages/proxy/src/malloc-trim.ts')).href
        const trimmed = await run(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(trim)}); console.log(m.MALLOC_TRIM_ADDON_PATH, m.trimMalloc() !== 'unavailable')`], { env })
        assert.equal(trimmed.code, 0, trimmed.stderr)
        assert.equal(trimmed.stdout.trim(), `${join(out, MALLOC_TRIM_IN_TREE)} true`, 'the runtime tree\'s proxy loads its malloc_trim module')
        // It serves: the quickstart config, on free ports.
        const [port, admin, stats, ready] = [await freePort(), await freePort(), await freePort(), await freePort()]
        const config = readFileSync(join(REPO_ROOT, 'examples/quickstart.yaml'), 'utf8').replace(/port: 3000/, `port: ${port}`)
        const configFile = join(dir, 'quickstart.yaml')
        writeFileSync(configFile, config)
        // RUN node --max-semi-space-size=4 …/portico.ts --warm-cache, with the image's
        // NODE_COMPILE_CACHE (under the tree, read-only afterwards as in the image).
        const cache = join(out, 'packages/proxy/node_modules/.cache/node-compile-cache')
        const warm = await run(process.execPath, [...START_FLAGS, join(out, image.entry), '--warm-cache'], { env: { ...env, NODE_COMPILE_CACHE: cache }, timeoutMs: 60_000 })
        assert.equal(warm.code, 0, warm.stdout + warm.stderr)
        execFileSync('chmod', ['-R', 'a-w', cache])
        // Writable again only once the gateway has exited: a Node process writes its compile
        // cache as it exits (a temporary file, then a rename), and `chmod -R` racing that
        // rename fails on the vanished temporary file.
        const writable = (): void => { if (existsSync(cache)) execFileSync('chmod', ['-R', 'u+w', cache]) }
        let child: ChildProcess | undefined
        t.after(async () => {
          if (child !== undefined && child.exitCode === null && child.signalCode === null) {
            child.kill('SIGKILL')
            await once(child, 'exit')
          }
          writable()
        })
        // The entrypoint, as a pod runs it (two data-plane workers): every thread takes its
        // modules from the cache, so none loads Node's TypeScript compiler (amaro).
        const seen = join(dir, 'threads')
        mkdirSync(seen)
        const probe = 'data:text/javascript,' + encodeURIComponent(`
import { writeFileSync } from 'node:fs'
import { threadId } from 'node:worker_threads'
setTimeout(() => writeFileSync(${JSON.stringify(seen)} + '/' + threadId, String(process.moduleLoadList.some(m => m.includes('amaro')))), 1500).unref()
`)
        child = spawn(process.execPath, [...START_FLAGS, '--import', probe, join(out, image.entry), '-f', configFile], { env: { ...env, NODE_COMPILE_CACHE: cache, WORKERS: '2', ADMIN_ADDR: `127.0.0.1:${admin}`, STATS_ADDR: `127.0.0.1:${stats}`, READINESS_ADDR: `127.0.0.1:${ready}` }, stdio: 'ignore' })
        await waitFor('the gateway to listen', 20_000, async () => (await fetch(`http://127.0.0.1:${port}/hello`)).status === 200)
        assert.equal(await (await fetch(`http://127.0.0.1:${stats}/metrics`)).status, 200)
        // WORKERS=2: the main thread and one data-plane worker thread.
        await waitFor('every thread\'s probe', 20_000, async () => readdirSync(seen).length >= 2)
        assert.deepEqual(readdirSync(seen).map(f => readFileSync(join(seen, f), 'utf8')), ['false', 'false'], 'no thread loaded Node\'s TypeScript compiler')
        const exited = once(child, 'exit')
        child.kill('SIGTERM')
        assert.deepEqual(await exited, [0, null], 'a SIGTERM drains and exits 0, its compile cache read-only')
      }
    })
  }
})
