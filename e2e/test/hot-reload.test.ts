/**
 * Hot reload of the config file under load: while several keep-alive clients send a bounded
 * stream of requests, the file is edited in place, then broken, then replaced by rename (which
 * also moves the loaded route to another backend). Each valid edit takes effect within a
 * second; the broken one is logged as `file:line:col:` errors and the last good config keeps
 * serving; no request fails, no client connection is dropped, and every response comes
 * wholly from one config version.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from 'undici'
import { type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'
import { sleep, waitUntil } from '@portico/testkit/wait'

const CLIENTS = 8
const REQUESTS = 2_000
/** Pause between one client's requests, so the load spans all the edits (~3 s). */
const PAUSE_MS = 10
const RELOAD_DEADLINE_MS = 1_000

function configV1 (port: number, backend: string): string {
  return `gateways:
  default:
    port: ${port}
    address: 127.0.0.1
routes:
  - name: stable
    matches:
      - path: { pathPrefix: /stable }
    policies:
      responseHeaderModifier:
        set: { x-config: v1 }
    backends:
      - host: ${backend}
`
}

function configV2 (port: number, backend: string): string {
  return `gateways:
  default:
    port: ${port}
    address: 127.0.0.1
routes:
  - name: stable
    matches:
      - path: { pathPrefix: /stable }
    policies:
      responseHeaderModifier:
        set: { x-config: v2 }
    backends:
      - host: ${backend}
  - name: fresh
    matches:
      - path: { exact: /fresh }
    policies:
      directResponse: { status: 200, body: "fresh route" }
`
}

/** V2 plus a route whose backend has a typo'd key. */
function configBroken (port: number, backend: string): string {
  return configV2(port, backend) + `  - name: broken
    backends:
      - hots: ${backend}
`
}

/** V2 with the stable route moved to another backend, plus one more route. */
function configV3 (port: number, backend: string): string {
  return configV2(port, backend).replace('x-config: v2', 'x-config: v3') + `  - name: fresher
    matches:
      - path: { exact: /fresher }
    policies:
      directResponse: { status: 200, body: "fresher route" }
`
}

interface LoadResult {
  ok: number
  failures: string[]
  /** Responses whose config version and backend do not belong together. */
  mismatches: string[]
  /** Config versions (x-config) each client saw, in order. */
  seen: string[][]
  disconnects: number
}

describe('hot reload', () => {
  let portico: PorticoProcess
  let backend: Backend
  let backendB: Backend
  const agent = newAgent()

  before(async () => {
    backend = await startBackend((req, res) => {
      req.resume()
      res.setHeader('x-served-by', 'A')
      res.end('stable')
    })
    backendB = await startBackend((req, res) => {
      req.resume()
      res.setHeader('x-served-by', 'B')
      res.end('stable')
    })
    portico = await startPortico({ config: port => configV1(port, backend.host) })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    await backend?.close()
    await backendB?.close()
  })

  /** Polls `path` until it answers 200; returns how long that took from `since`. */
  async function waitForRoute (path: string, since: number): Promise<number> {
    for (;;) {
      const res = await send(agent, `${portico.url}${path}`)
      const elapsed = performance.now() - since
      if (res.status === 200) return elapsed
      if (elapsed > 5_000) throw new Error(`${path} still answers ${res.status} ${elapsed} ms after the edit\n${portico.output}`)
      await sleep(10)
    }
  }

  /** Runs the load into `result` (which the test reads while it runs, to edit under load). */
  async function runLoad (result: LoadResult): Promise<LoadResult> {
    let issued = 0
    let closing = false
    const clients = Array.from({ length: CLIENTS }, () => new Client(portico.url, { pipelining: 1, keepAliveTimeout: 30_000 }))
    try {
      await Promise.all(clients.map(async (client, i) => {
        const seen: string[] = []
        result.seen[i] = seen
        let connected = false
        client.on('connect', () => { connected = true })
        client.on('disconnect', () => { if (connected && !closing) result.disconnects++ })
        while (issued < REQUESTS) {
          issued++
          try {
            const res = await client.request({ path: '/stable/item', method: 'GET' })
            const body = await res.body.text()
            if (res.statusCode !== 200 || body !== 'stable') {
              result.failures.push(`${res.statusCode} ${body}`)
            } else {
              result.ok++
              const version = String(res.headers['x-config'])
              const servedBy = String(res.headers['x-served-by'])
              if (servedBy !== (version === 'v3' ? 'B' : 'A')) result.mismatches.push(`${version} served by ${servedBy}`)
              if (seen.at(-1) !== version) seen.push(version)
            }
          } catch (err) {
            result.failures.push(String(err))
          }
          await sleep(PAUSE_MS)
        }
      }))
    } finally {
      closing = true
      await Promise.all(clients.map(c => c.close()))
    }
    return result
  }

  test('edits apply within a second under load, a broken edit is rejected, and no request fails', { timeout: 60_000 }, async ctx => {
    const port = portico.port
    const host = backend.host
    let loadDone = false
    const progress: LoadResult = { ok: 0, failures: [], mismatches: [], seen: [], disconnects: 0 }
    const load = runLoad(progress).finally(() => { loadDone = true })
    // Each edit is made under load: once the load has answered some more requests since the last step.
    const underLoad = async (): Promise<void> => {
      const from = progress.ok + progress.failures.length
      await waitUntil(() => progress.ok + progress.failures.length >= from + 2 * CLIENTS || loadDone, 10_000, () => `the load to go on (${progress.ok} ok, ${progress.failures.length} failed)`)
    }

    // 1. An in-place edit adds a route and changes a response header.
    await underLoad()
    assert.equal(loadDone, false, 'the load finished before the first edit')
    let t = performance.now()
    portico.writeConfig(configV2(port, host))
    const v2Latency = await waitForRoute('/fresh', t)
    assert.ok(v2Latency < RELOAD_DEADLINE_MS, `the new route took ${Math.round(v2Latency)} ms to appear`)
    assert.equal((await send(agent, `${portico.url}/fresh`)).text, 'fresh route')

    // 2. A broken edit is reported with file:line:col and changes nothing.
    await underLoad()
    assert.equal(loadDone, false, 'the load finished before the broken edit')
    const stdoutBefore = portico.stdout.length
    const broken = configBroken(port, host)
    portico.writeConfig(broken)
    const lines = broken.split('\n')
    const line = lines.findIndex(l => l.includes('hots:')) + 1
    const col = lines[line - 1]!.indexOf('hots') + 1
    const expected = `${portico.configPath}:${line}:${col}: routes[2].backends[0].hots: unknown field "hots"; did you mean "host"?`
    await portico.waitForOutput('config reload rejected', { fromStdout: stdoutBefore, timeoutMs: 5_000 })
    const rejection = portico.logs().find(l => typeof l.msg === 'string' && l.msg.startsWith('config reload rejected'))
    assert.ok(rejection !== undefined, portico.output)
    assert.deepEqual(rejection.errors, [expected])
    assert.ok(String(rejection.msg).includes(expected), 'the log message itself lists the error')
    const fresh = await send(agent, `${portico.url}/fresh`)
    assert.equal(fresh.status, 200, 'the last good config stopped serving after a broken edit')
    assert.equal(fresh.text, 'fresh route')

    // 3. A valid edit saved by renaming a new file over the old one applies again; it also
    //    moves the loaded route to another backend (the old backend's pool is retired).
    await underLoad()
    assert.equal(loadDone, false, 'the load finished before the third edit')
    t = performance.now()
    portico.replaceConfig(configV3(port, backendB.host))
    const v3Latency = await waitForRoute('/fresher', t)
    assert.ok(v3Latency < RELOAD_DEADLINE_MS, `the route added by a rename-over save took ${Math.round(v3Latency)} ms to appear`)
    assert.equal(loadDone, false, 'the load finished before the last edit was checked; the test did not overlap load and reloads')

    const result = await load
    ctx.diagnostic(`reload latency: in-place edit ${Math.round(v2Latency)} ms, rename-over ${Math.round(v3Latency)} ms; ${result.ok} requests ok`)
    assert.deepEqual(result.failures, [], `${result.failures.length} requests failed during reloads`)
    assert.equal(result.ok, REQUESTS)
    assert.deepEqual(result.mismatches, [], 'a response mixed one config version with another\'s backend')
    assert.equal(result.disconnects, 0, 'reloads dropped client keep-alive connections')
    for (const seen of result.seen) {
      // Each client saw the versions in order, never an older one after a newer one.
      assert.deepEqual(seen, ['v1', 'v2', 'v3'].filter(v => seen.includes(v)), `one client saw ${seen.join(' → ')}`)
    }
    assert.ok(result.seen.some(s => s.includes('v1')) && result.seen.some(s => s.includes('v3')), 'the load did not span the reloads')
    assert.equal(portico.exit, null)
  })
})
