/**
 * The bundled quick-start config: it validates, answers /hello itself, serves MCP from the
 * stdio reference server, lets the web UI's MCP playground call it, and on a terminal says
 * where to point an MCP client and a browser — what a new user tries first.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { request } from 'undici'
import { freePort, makeTempDir, PORTICO_BIN, type PorticoProcess, REPO_ROOT, runPortico, startPortico } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { connectClient, textOf } from '../lib/mcp.ts'
import { loadConfigText } from '@portico/engine'
import { readySummary } from '@portico/proxy/ready-summary'

const EXAMPLE = join(REPO_ROOT, 'examples/quickstart.yaml')
let portico: PorticoProcess
let adminPort: number

/**
 * The example's own text, on a free port and with its relative stdio path made absolute
 * (the copy lives in a temp directory). Its config section (the admin server, writes on) is
 * kept; the tests move the admin port with ADMIN_ADDR.
 */
function exampleOn (port: number): string {
  const config = parse(readFileSync(EXAMPLE, 'utf8')) as any
  for (const route of config.routes) {
    for (const backend of route.backends ?? []) {
      for (const target of backend.mcp?.targets ?? []) target.stdio.cmd = join(REPO_ROOT, 'examples', target.stdio.cmd)
    }
  }
  return stringify({ ...config, gateways: { default: { ...config.gateways.default, port, address: '127.0.0.1' } } })
}

before(async () => {
  adminPort = await freePort()
  portico = await startPortico({ config: exampleOn, env: { ADMIN_ADDR: `127.0.0.1:${adminPort}` } })
})

after(async () => {
  await portico?.stop()
})

test('examples/quickstart.yaml validates', async () => {
  const result = await runPortico(['--validate', '-f', EXAMPLE])
  assert.equal(result.code, 0, result.stderr)
})

test('the standalone examples in deploy/examples validate', async () => {
  for (const name of ['mcp-standalone.yaml', 'llm-standalone.yaml']) {
    const result = await runPortico(['--validate', '-f', join(REPO_ROOT, 'deploy/examples', name)])
    assert.equal(result.code, 0, `${name}: ${result.stderr}`)
  }
})

test('the quick start answers /hello and serves the everything MCP server', async () => {
  const hello = await request(`${portico.url}/hello`)
  assert.equal(await hello.body.text(), 'hello from portico\n')
  const { client } = await connectClient(`${portico.url}/mcp`)
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'hi' } })), 'Echo: hi')
  await client.close()
})

test('the web UI\'s MCP playground works on the quick-start config as it is', async () => {
  const post = async (path: string, body: unknown) => {
    const res = await request(`http://127.0.0.1:${adminPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const json = await res.body.json() as any
    assert.equal(res.statusCode, 200, `${path}: ${JSON.stringify(json)}`)
    return json
  }
  const { session } = await post('/api/mcp/connect', { port: portico.port, path: '/mcp' })
  const listed = await post('/api/mcp/list', { session })
  assert.ok(listed.tools.items.some((t: { name: string }) => t.name === 'echo'), JSON.stringify(listed.tools))
  const called = await post('/api/mcp/call', { session, name: 'echo', arguments: { message: 'from the UI' } })
  assert.equal(textOf(called), 'Echo: from the UI')
  await post('/api/mcp/close', { session })
})

test('what it prints on a terminal: where to point an MCP client, and the UI', () => {
  const loaded = loadConfigText(readFileSync(EXAMPLE, 'utf8'), { baseDir: join(REPO_ROOT, 'examples') })
  assert.ok(loaded.ok)
  const text = readySummary({ ir: loaded.config.ir, listeners: [], admin: { host: '127.0.0.1', port: 15000 }, adminWrites: true })
  assert.deepEqual(text.split('\n').filter(l => l.trim() !== '').map(l => l.trim().split(/\s{2,}/)), [
    ['Portico is ready:'],
    ['gateway default', 'http://localhost:3000/'],
    ['MCP (route mcp)', 'http://localhost:3000/mcp', 'point an MCP client here (streamable HTTP)'],
    ['MCP (route mcp)', 'http://localhost:3000/sse', 'legacy HTTP+SSE clients'],
    ['web UI', 'http://127.0.0.1:15000/ui/', 'routes, backends, traces, MCP playground']
  ])
})

// `script` gives the process a terminal (util-linux, on every Debian): the summary is printed
// there and only there.
test('on a terminal the summary follows the start-up logs; in a pipe it does not', async t => {
  if (spawnSyncOk('script', ['--version']) === false) {
    t.skip('script (util-linux) not installed')
    return
  }
  const dir = makeTempDir('portico-qs-tty-')
  const port = await freePort()
  writeFileSync(join(dir, 'q.yaml'), exampleOn(port))
  const env = { ...process.env, ADMIN_ADDR: `127.0.0.1:${await freePort()}`, STATS_ADDR: 'off', READINESS_ADDR: 'off', LOG_FORMAT: 'text' }
  // `exec`: portico is script's own child, stopped by its pid below (script passes on a
  // SIGHUP, which portico takes as "reload", not "stop").
  const child = spawn('script', ['-qec', `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(PORTICO_BIN)} -f ${JSON.stringify(join(dir, 'q.yaml'))}`, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s })
  try {
    await waitUntil(() => out.includes('web UI'), 15_000, `no summary on the terminal:\n${out}`)
    assert.match(out, new RegExp(`MCP \\(route mcp\\)\\s+http://127\\.0\\.0\\.1:${port}/mcp\\s+point an MCP client here`))
    assert.ok(out.indexOf('portico started') < out.indexOf('Portico is ready:'), out)
  } finally {
    const closed = new Promise(resolve => child.once('close', resolve))
    const gateway = Number(execFileSync('ps', ['-o', 'pid=', '--ppid', String(child.pid)], { encoding: 'utf8' }).trim().split('\n')[0])
    if (gateway > 0) process.kill(gateway, 'SIGTERM')
    else child.kill('SIGTERM')
    await closed
    rmSync(dir, { recursive: true, force: true })
  }
  assert.doesNotMatch(portico.stdout, /Portico is ready/)
})

function spawnSyncOk (cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
