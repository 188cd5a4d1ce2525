/**
 * The bundled quick-start config: it validates, answers /hello itself, and serves MCP from
 * the stdio reference server — what a new user tries first.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { request } from 'undici'
import { REPO_ROOT, runPortico, startPortico, type PorticoProcess } from '../lib/portico.ts'
import { connectClient, textOf } from '../lib/mcp.ts'

const EXAMPLE = join(REPO_ROOT, 'examples/quickstart.yaml')
let portico: PorticoProcess

before(async () => {
  // The example's own text, on a free port and with its relative stdio path made absolute
  // (the copy lives in a temp directory).
  const config = parse(readFileSync(EXAMPLE, 'utf8')) as any
  for (const route of config.routes) {
    for (const backend of route.backends ?? []) {
      for (const target of backend.mcp?.targets ?? []) target.stdio.cmd = join(REPO_ROOT, 'examples', target.stdio.cmd)
    }
  }
  portico = await startPortico({ config: port => stringify({ ...config, gateways: { default: { ...config.gateways.default, port, address: '127.0.0.1' } } }) })
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
