/**
 * UDP listeners of a real portico process (udpRoutes), driven by real node:dgram clients
 * against real UDP echo servers on loopback: datagrams forwarded per flow and the replies
 * back to the client that sent them, weights per flow, the idle timeout, the flow cap under a
 * flood of source ports, a backend that refuses (ICMP port unreachable), a reload, and the
 * metrics and access-log lines of it all.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import dgram from 'node:dgram'
import { spawnSync } from 'node:child_process'
import { freePort, type PorticoProcess, startPortico, TEST_WORKERS } from '@portico/testkit/portico'
import { waitUntil } from '@portico/testkit/wait'
import { requireTool } from '@portico/testkit/tools'

/** A UDP echo server: answers `<name> <the datagram> from <port it came from>`; remembers the source ports seen. */
interface Echo {
  name: string
  port: number
  sources: Set<number>
  received: number
  close: () => void
}

async function startEcho (name: string): Promise<Echo> {
  const socket = dgram.createSocket('udp4')
  const echo: Echo = { name, port: 0, sources: new Set(), received: 0, close: () => socket.close() }
  socket.on('message', (msg, rinfo) => {
    echo.received++
    echo.sources.add(rinfo.port)
    socket.send(`${name} ${msg.toString()} from ${rinfo.port}`, rinfo.port, rinfo.address)
  })
  await new Promise<void>(resolve => socket.bind(0, '127.0.0.1', resolve))
  echo.port = socket.address().port
  return echo
}

/** A client socket of its own (one source port: one flow). */
async function client (): Promise<{ socket: dgram.Socket, ask: (port: number, text: string, timeoutMs?: number) => Promise<string | null>, close: () => void }> {
  const socket = dgram.createSocket('udp4')
  await new Promise<void>(resolve => socket.bind(0, '127.0.0.1', resolve))
  const replies: string[] = []
  let wake: (() => void) | null = null
  socket.on('message', msg => { replies.push(msg.toString()); wake?.() })
  return {
    socket,
    close: () => socket.close(),
    ask: async (port, text, timeoutMs = 2_000) => {
      socket.send(text, port, '127.0.0.1')
      if (replies.length === 0) {
        await new Promise<void>(resolve => {
          const timer = setTimeout(resolve, timeoutMs)
          wake = () => { clearTimeout(timer); resolve() }
        })
        wake = null
      }
      return replies.shift() ?? null
    }
  }
}

/** The access-log lines of flows (message "flow") in `output`. */
function flowLines (output: string): Array<Record<string, unknown>> {
  return output.split('\n').filter(l => l.includes('"msg":"flow"')).map(l => JSON.parse(l) as Record<string, unknown>)
}

describe('UDP listeners', () => {
  let a: Echo
  let b: Echo
  let portico: PorticoProcess
  let stats: string
  const ports = { main: 0, weighted: 0, idle: 0, capped: 0, refused: 0, unresolvable: 0 }
  let deadPort = 0

  before(async () => {
    a = await startEcho('a')
    b = await startEcho('b')
    // A UDP port nobody listens on: the kernel answers ICMP port unreachable.
    const dead = dgram.createSocket('udp4')
    await new Promise<void>(resolve => dead.bind(0, '127.0.0.1', resolve))
    deadPort = dead.address().port
    dead.close()
    for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort()
    const statsPort = await freePort()
    stats = `http://127.0.0.1:${statsPort}`
    portico = await startPortico({
      env: { STATS_ADDR: `127.0.0.1:${statsPort}` },
      config: port => ({
        gateways: {
          web: { port, address: '127.0.0.1' },
          main: { port: ports.main, address: '127.0.0.1', protocol: 'UDP' },
          weighted: { port: ports.weighted, address: '127.0.0.1', protocol: 'UDP' },
          idle: { port: ports.idle, address: '127.0.0.1', protocol: 'UDP', udp: { idleTimeout: '400ms' } },
          capped: { port: ports.capped, address: '127.0.0.1', protocol: 'UDP', udp: { maxFlows: 5 } },
          refused: { port: ports.refused, address: '127.0.0.1', protocol: 'UDP' },
          unresolvable: { port: ports.unresolvable, address: '127.0.0.1', protocol: 'UDP' }
        },
        udpRoutes: [
          { name: 'to-a', gateways: ['main', 'idle', 'capped'], backends: [{ host: `127.0.0.1:${a.port}` }] },
          { name: 'split', gateways: 'weighted', backends: [{ host: `127.0.0.1:${a.port}`, weight: 3 }, { host: `127.0.0.1:${b.port}`, weight: 1 }] },
          { name: 'nowhere', gateways: 'refused', backends: [{ host: `127.0.0.1:${deadPort}` }] },
          { name: 'no-name', gateways: 'unresolvable', backends: [{ host: 'backend.invalid:53' }] }
        ]
      })
    })
  })

  after(async () => {
    await portico?.stop()
    a?.close()
    b?.close()
  })

  test('datagrams go to the backend and its replies back to the client, per flow', async () => {
    const one = await client()
    const two = await client()
    try {
      const r1 = await one.ask(ports.main, 'hello')
      const r2 = await two.ask(ports.main, 'there')
      assert.match(r1 ?? '', /^a hello from \d+$/)
      assert.match(r2 ?? '', /^a there from \d+$/)
      // Each client has its own upstream socket: the backend saw two source ports, and a
      // client's second datagram comes from the same one as its first.
      const port1 = Number(/from (\d+)/.exec(r1!)![1])
      const port2 = Number(/from (\d+)/.exec(r2!)![1])
      assert.notEqual(port1, port2)
      assert.equal(await one.ask(ports.main, 'again'), `a again from ${port1}`)
      // Several datagrams in a row, each answered to its own client only.
      const replies = await Promise.all([one.ask(ports.main, 'x'), two.ask(ports.main, 'y')])
      assert.deepEqual(replies, [`a x from ${port1}`, `a y from ${port2}`])
    } finally {
      one.close()
      two.close()
    }
  })

  test('a flow picks its backend by weight, and keeps it', async () => {
    const counts: Record<string, number> = { a: 0, b: 0 }
    for (let i = 0; i < 60; i++) {
      const c = await client()
      try {
        const first = await c.ask(ports.weighted, 'w')
        assert.ok(first !== null, 'answered')
        const name = first.split(' ')[0]!
        counts[name]!++
        // The same flow stays on the backend it was given.
        assert.equal((await c.ask(ports.weighted, 'w2'))?.split(' ')[0], name)
      } finally {
        c.close()
      }
    }
    assert.ok(counts.a! > counts.b!, `3:1 weights: ${JSON.stringify(counts)}`)
    assert.ok(counts.b! > 0, `b has weight too: ${JSON.stringify(counts)}`)
  })

  test('a flow quiet for the idle timeout is closed; the next datagram opens a new one', async () => {
    const c = await client()
    try {
      const from = portico.stdout.length
      const first = await c.ask(ports.idle, 'one')
      const upstreamPort = Number(/from (\d+)/.exec(first ?? '')?.[1])
      assert.ok(upstreamPort > 0, String(first))
      // Within the timeout: the same flow.
      await new Promise(resolve => setTimeout(resolve, 150))
      assert.equal(await c.ask(ports.idle, 'two'), `a two from ${upstreamPort}`)
      await waitUntil(() => flowLines(portico.stdout.slice(from)).some(l => l.gateway === 'idle' && l.reason === 'IdleTimeout'), 5_000, 'the flow closed by the idle timeout')
      const line = flowLines(portico.stdout.slice(from)).find(l => l.gateway === 'idle')!
      assert.equal(line['datagrams.received'], 2)
      assert.equal(line['datagrams.sent'], 2)
      assert.equal(line.route, 'udp:to-a')
      const third = await c.ask(ports.idle, 'three')
      assert.match(third ?? '', /^a three from \d+$/)
      assert.notEqual(Number(/from (\d+)/.exec(third!)![1]), upstreamPort, 'a new upstream socket')
    } finally {
      c.close()
    }
  })

  test('a flood of source ports is capped: the oldest flows are evicted and counted', async () => {
    // The cap is per worker (each keeps its own flows; the kernel spreads clients over them).
    const workers = Number(TEST_WORKERS)
    const clients = await Promise.all(Array.from({ length: 20 }, async () => await client()))
    try {
      for (const c of clients) assert.match(await c.ask(ports.capped, 'flood') ?? '', /^a flood/)
      const value = (body: string, re: RegExp): number => Number(re.exec(body)?.[1] ?? 0)
      const evictedRe = /portico_udp_flows_closed_total\{gateway="capped",listener="capped",route="udp:to-a",backend="127\.0\.0\.1:\d+",reason="Evicted"\} (\d+)/
      const activeRe = /portico_udp_flows_active\{gateway="capped",listener="capped"\} (\d+)/
      const receivedRe = /portico_udp_datagrams_total\{gateway="capped",listener="capped",route="udp:to-a",direction="received"\} (\d+)/
      let body = ''
      // Live flows' counts are handed on each quarter second, evicted ones' at once.
      await waitUntil(async () => {
        body = await (await fetch(`${stats}/metrics`)).text()
        return value(body, evictedRe) + value(body, activeRe) === 20 && value(body, receivedRe) === 20
      }, 5_000, 'every flow either evicted or active, 20 datagrams counted')
      assert.ok(value(body, activeRe) <= 5 * workers, `at most maxFlows per worker: ${value(body, activeRe)}`)
      assert.ok(value(body, evictedRe) >= 20 - 5 * workers, `evicted: ${value(body, evictedRe)}`)
      assert.match(body, /portico_udp_flows_opened_total\{gateway="capped",listener="capped",route="udp:to-a",backend="127\.0\.0\.1:\d+"\} 20\b/)
      assert.match(body, /portico_udp_bytes_total\{gateway="capped",listener="capped",route="udp:to-a",direction="received"\} 100\b/)
      // The newest flows are the ones kept: the last client's goes on.
      assert.match(await clients.at(-1)!.ask(ports.capped, 'still') ?? '', /^a still/)
    } finally {
      for (const c of clients) c.close()
    }
  })

  test('a backend that refuses (ICMP port unreachable) ends the flow; the gateway goes on', async () => {
    const c = await client()
    try {
      const from = portico.stdout.length
      assert.equal(await c.ask(ports.refused, 'anyone?', 500), null)
      // The refusal arrives with the next send on the connected socket, or at once.
      c.socket.send('hello?', ports.refused, '127.0.0.1')
      await waitUntil(() => flowLines(portico.stdout.slice(from)).some(l => l.gateway === 'refused' && l.reason === 'UpstreamUnreachable'), 5_000, 'the refusal logged')
      assert.match(await c.ask(ports.main, 'still here') ?? '', /^a still here/)
    } finally {
      c.close()
    }
  })

  test('a backend hostname that does not resolve ends the flow; the gateway goes on', async () => {
    const c = await client()
    try {
      const from = portico.stdout.length
      assert.equal(await c.ask(ports.unresolvable, 'anyone?', 300), null)
      await waitUntil(() => flowLines(portico.stdout.slice(from)).some(l => l.gateway === 'unresolvable' && l.reason === 'UpstreamError' && /no address for backend\.invalid:53/.test(String(l.error))), 10_000, 'the lookup failure logged')
      assert.match(await c.ask(ports.main, 'alive') ?? '', /^a alive/)
    } finally {
      c.close()
    }
  })

  test('the UDP series pass promtool check metrics', async t => {
    const promtool = requireTool(t, 'PROMTOOL', 'promtool')
    if (promtool === null) return
    const text = await (await fetch(`${stats}/metrics`)).text()
    for (const name of ['portico_udp_datagrams_total', 'portico_udp_bytes_total', 'portico_udp_flows_opened_total', 'portico_udp_flows_closed_total', 'portico_udp_flows_active']) assert.match(text, new RegExp(`^${name}\\{`, 'm'))
    const out = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    assert.equal(out.status, 0, `${out.stdout}\n${out.stderr}`)
  })

  test('a reload sends new flows to the new backend and keeps the port', async () => {
    const before = await client()
    try {
      assert.match(await before.ask(ports.main, 'pre') ?? '', /^a pre/)
      const from = portico.stdout.length
      portico.replaceConfig({
        gateways: {
          web: { port: portico.port, address: '127.0.0.1' },
          main: { port: ports.main, address: '127.0.0.1', protocol: 'UDP' }
        },
        udpRoutes: [{ name: 'to-b', gateways: 'main', backends: [{ host: `127.0.0.1:${b.port}` }] }]
      })
      await portico.waitForOutput('config reloaded', { fromStdout: from, timeoutMs: 10_000 })
      const after = await client()
      try {
        assert.match(await after.ask(ports.main, 'post') ?? '', /^b post/)
        // The flow opened before goes to a backend its route no longer has: it is closed and
        // its next datagram opens a flow on the new route.
        assert.match(await before.ask(ports.main, 'moved') ?? '', /^b moved/)
      } finally {
        after.close()
      }
      await waitUntil(() => flowLines(portico.stdout.slice(from)).some(l => l.reason === 'BackendRemoved'), 5_000, 'the old flow closed')
    } finally {
      before.close()
    }
  })
})
