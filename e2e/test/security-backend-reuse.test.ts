/**
 * Bytes a backend sends that nobody asked for never answer another client's request (issue
 * 49). HTTP/1.1 answers carry no request id, so a second response a backend writes after the
 * first would, on a reused connection, be read as the answer to the next request, and each
 * later request there would get the answer meant for the one before. Portico does not reuse
 * a connection whose answer was not framed exactly, ends an idle one at its first byte, and
 * once it has seen a stray from a backend reuses none of that backend's connections for a
 * while (docs/security.md, "Connection reuse and stray bytes").
 *
 * The backend is a raw TCP server (Nagle on, as a hand-written server has it) whose answers
 * name the request they answer, so a shifted answer shows.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { Agent } from 'undici'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { newAgent, send } from '@portico/testkit/client'
import { waitUntil } from '@portico/testkit/wait'
import { startRawBackend, type RawBackend } from '../lib/raw-backend.ts'

const answer = (id: string): string => `HTTP/1.1 200 OK\r\ncontent-length: ${id.length}\r\n\r\n${id}`

describe('security: a backend\'s stray responses answer no one', () => {
  let portico: PorticoProcess
  let backend: RawBackend
  let agent: Agent
  let url = ''
  /** Stray responses the backend has written so far. */
  let strays = 0

  before(async () => {
    // /late/<id>: the answer, and 300 ms later a second one; /extra/<id>: the answer with a
    // second one in the same write; /<id>: the answer.
    backend = await startRawBackend((path, socket) => {
      const [, kind, id] = /^\/(?:(late|extra)\/)?(.*)$/.exec(path)!
      if (kind === 'extra') {
        socket.write(answer(id!) + answer(`stray-${id}`))
        return
      }
      socket.write(answer(id!))
      if (kind === 'late') {
        setTimeout(() => {
          if (socket.destroyed) return
          socket.write(answer(`stray-${id}`))
          strays++
        }, 300)
      }
    })
    const host = backend.host
    portico = await startPortico({ config: port => ({ gateways: { default: gateway(port) }, routes: [{ name: 'all', backends: [{ host }] }] }) })
    url = `http://127.0.0.1:${portico.port}`
    agent = newAgent()
  })

  after(async () => {
    await agent?.destroy()
    await portico?.stop()
    backend?.server.close()
  })

  /**
   * Requests named `${prefix}${n}` for `ms` milliseconds from `clients` clients at once, each
   * client sequential; returns how many were sent and every answer that was not its own.
   */
  async function load (prefix: string, clients: number, ms: number): Promise<{ sent: number, wrong: string[] }> {
    let sent = 0
    const wrong: string[] = []
    const until = Date.now() + ms
    await Promise.all(Array.from({ length: clients }, async (_, c) => {
      while (Date.now() < until) {
        const id = `${c}-${sent++}`
        const res = await send(agent, `${url}/${prefix}${id}`)
        if (res.status !== 200 || res.text !== id) wrong.push(`${id} got ${res.status} ${res.text}`)
      }
    }))
    return { sent, wrong }
  }

  test('a second response 300 ms after each answer: every later request, sequential or concurrent, gets its own', async () => {
    assert.equal((await send(agent, `${url}/late/first`)).text, 'first')
    // The stray for the first answer comes while the connection is idle.
    await waitUntil(() => strays >= 1, 5_000, 'the backend to write its stray answer')
    // Then steady traffic, long enough for each answer's stray to come while later requests
    // are under way (on a kept connection they would take it as their answer).
    const sequential = await load('late/', 1, 800)
    const concurrent = await load('late/', 4, 800)
    assert.ok(sequential.sent > 20 && concurrent.sent > 20, `enough requests (${sequential.sent}, ${concurrent.sent})`)
    assert.deepEqual(sequential.wrong, [])
    assert.deepEqual(concurrent.wrong, [])
    const warnings = portico.logs().filter(l => typeof l.msg === 'string' && l.msg.includes('sent bytes nobody asked for'))
    assert.equal(warnings.length, 1, 'one warning for the hold, not one per stray')
  })

  test('a second response in the same write as the answer: the answer is passed on, the next requests get their own', async () => {
    assert.equal((await send(agent, `${url}/extra/one`)).text, 'one')
    const sequential = await load('', 1, 200)
    const concurrent = await load('', 4, 200)
    assert.deepEqual(sequential.wrong, [])
    assert.deepEqual(concurrent.wrong, [])
    const both = await Promise.all([send(agent, `${url}/extra/two`), send(agent, `${url}/extra/three`), send(agent, `${url}/four`)])
    assert.deepEqual(both.map(r => r.text), ['two', 'three', 'four'])
  })
})
