/**
 * WORKER_ACCEPT=primary (workers/distributor.ts, intake.ts) with real sockets: the primary's
 * port hands each connection over with the client's addresses, keeping its own turn (served on
 * the socket it accepted); a worker that cannot be
 * reached, or takes the header and never acknowledges, is passed over for the next before any
 * client byte moved; with none left the client is cut.
 */

import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import net, { type Socket } from 'node:net'
import pino from 'pino'
import type { ProxyIR } from '@portico/engine'
import { ConnectionDistributor } from '../src/workers/distributor.ts'
import { startIntake, type Intake } from '../src/workers/intake.ts'
import { localSocketPath } from '../src/workers/local-socket.ts'

const TOKEN = 'ab'.repeat(32)
const log = pino({ level: 'silent' })
const cleanups: Array<() => unknown> = []
after(async () => { for (const c of cleanups.reverse()) await c() })

/** An intake that answers each connection's first line with `echo <client address> <bind>: <line>`. */
async function echoIntake (): Promise<{ path: string, seen: string[], intake: Intake }> {
  const { path } = localSocketPath('test-intake')
  const seen: string[] = []
  const intake = await startIntake(path, TOKEN, (bind, socket: Socket) => {
    socket.resume()
    socket.once('data', (d: Buffer) => {
      seen.push(d.toString())
      socket.end(`echo ${socket.remoteAddress} ${bind}: ${d.toString()}`)
    })
  }, () => {})
  cleanups.push(() => intake.close())
  return { path, seen, intake }
}

/** A local socket that takes connections and never answers (a worker whose loop is stuck). */
async function silentIntake (): Promise<string> {
  const { path } = localSocketPath('test-silent')
  const held: Socket[] = []
  const server = net.createServer(s => { held.push(s) })
  await new Promise<void>(resolve => server.listen({ path }, resolve))
  cleanups.push(() => { for (const s of held) s.destroy(); server.close() })
  return path
}

async function distributor (workers: () => string[], self?: (bind: string, socket: Socket) => void): Promise<{ port: number, d: ConnectionDistributor }> {
  const d = new ConnectionDistributor({ workers, token: TOKEN, log, ...(self !== undefined ? { self } : {}) })
  const ir = { binds: [{ key: '127.0.0.1:0', protocol: 'TCP', address: '127.0.0.1', port: 0 }] } as unknown as ProxyIR
  const prepared = await d.prepare(ir)
  d.commit(prepared, ir)
  cleanups.push(() => d.close())
  return { port: d.addresses()[0]!.port, d }
}

function exchange (port: number, line: string): Promise<string> {
  return new Promise(resolve => {
    const chunks: Buffer[] = []
    const c = net.connect(port, '127.0.0.1', () => c.write(line))
    c.on('data', d => chunks.push(d))
    c.on('close', () => resolve(Buffer.concat(chunks).toString()))
    c.on('error', () => {})
  })
}

test('connections go round robin, with the client\'s address and the bind', async () => {
  const a = await echoIntake()
  const b = await echoIntake()
  const { port } = await distributor(() => [a.path, b.path])
  const answers = await Promise.all(['one', 'two', 'three', 'four'].map(l => exchange(port, l)))
  for (const [i, l] of ['one', 'two', 'three', 'four'].entries()) assert.equal(answers[i], `echo 127.0.0.1 127.0.0.1:0: ${l}`)
  assert.equal(a.seen.length, 2)
  assert.equal(b.seen.length, 2)
})

test('the primary keeps its turn: served on the socket it accepted (paused, its own addresses), no intake connection', async () => {
  const a = await echoIntake()
  const own: string[] = []
  const { port } = await distributor(() => [a.path], (bind, socket) => {
    assert.ok(socket.isPaused(), 'handed on paused, as an intake socket is')
    socket.resume()
    socket.once('data', (d: Buffer) => {
      own.push(d.toString())
      socket.end(`self ${socket.remoteAddress} ${bind}: ${d.toString()}`)
    })
  })
  const answers = []
  for (const l of ['one', 'two', 'three', 'four']) answers.push(await exchange(port, l))
  assert.deepEqual(answers, ['self 127.0.0.1 127.0.0.1:0: one', 'echo 127.0.0.1 127.0.0.1:0: two', 'self 127.0.0.1 127.0.0.1:0: three', 'echo 127.0.0.1 127.0.0.1:0: four'])
  assert.deepEqual(own, ['one', 'three'])
  assert.deepEqual(a.seen, ['two', 'four'])
  // With no worker serving, the primary takes every connection.
  const alone = await distributor(() => [], (_bind, socket) => { socket.resume(); socket.once('data', (d: Buffer) => socket.end(`alone: ${d.toString()}`)) })
  assert.equal(await exchange(alone.port, 'x'), 'alone: x')
})

test('a worker that cannot be reached, or never acknowledges, is passed over before any byte moved', async () => {
  const good = await echoIntake()
  const stuck = await silentIntake()
  const gone = localSocketPath('test-gone').path
  const { port } = await distributor(() => [gone, stuck, good.path])
  const answer = await exchange(port, 'hello')
  // The stuck one held the header for ACK_TIMEOUT_MS (2 s); the client's bytes reached only the good one.
  assert.equal(answer, 'echo 127.0.0.1 127.0.0.1:0: hello')
  assert.deepEqual(good.seen, ['hello'])
})

test('with no worker that takes it, the client is cut', async () => {
  const gone = localSocketPath('test-gone').path
  const { port } = await distributor(() => [gone])
  assert.equal(await exchange(port, 'hello'), '')
  const none = await distributor(() => [])
  assert.equal(await exchange(none.port, 'hello'), '')
})
