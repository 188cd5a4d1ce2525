/**
 * Weighted backends: requests split in proportion to the weights (within a statistical
 * tolerance), and a backend with weight 0 never gets a request.
 */

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { gateway, type PorticoProcess, startPortico } from '@portico/testkit/portico'
import { type Backend, startBackend } from '@portico/testkit/backends'
import { newAgent, send } from '@portico/testkit/client'

const REQUESTS = 1_000
const CONCURRENCY = 8

describe('weighted backends', () => {
  let portico: PorticoProcess
  const backends: Backend[] = []
  const agent = newAgent()

  before(async () => {
    for (const name of ['light', 'heavy', 'zero', 'solo']) {
      backends.push(await startBackend((req, res) => {
        req.resume()
        res.end(name)
      }))
    }
    const [light, heavy, zero, solo] = backends as [Backend, Backend, Backend, Backend]
    portico = await startPortico({
      config: port => ({
        gateways: { default: gateway(port) },
        routes: [
          {
            name: 'split',
            matches: [{ path: { pathPrefix: '/split' } }],
            backends: [{ host: light.host, weight: 1 }, { host: heavy.host, weight: 3 }, { host: zero.host, weight: 0 }]
          },
          {
            name: 'only-zero-besides',
            matches: [{ path: { pathPrefix: '/solo' } }],
            backends: [{ host: zero.host, weight: 0 }, { host: solo.host }]
          }
        ]
      })
    })
  })

  after(async () => {
    await agent.destroy()
    await portico?.stop()
    for (const b of backends) await b.close()
  })

  async function tally (path: string): Promise<Map<string, number>> {
    const counts = new Map<string, number>()
    let next = 0
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        next++
        const res = await send(agent, `${portico.url}${path}`)
        assert.equal(res.status, 200, res.text)
        counts.set(res.text, (counts.get(res.text) ?? 0) + 1)
      }
    }))
    return counts
  }

  test('weights 1:3 split requests about 25%/75%, and weight 0 gets none', { timeout: 30_000 }, async () => {
    const counts = await tally('/split')
    const light = counts.get('light') ?? 0
    const heavy = counts.get('heavy') ?? 0
    assert.equal(counts.get('zero') ?? 0, 0, 'the weight-0 backend was chosen')
    assert.equal(light + heavy, REQUESTS)
    // Expected 250 ± 13.7 (one standard deviation); allow more than 4.
    const share = light / REQUESTS
    assert.ok(share > 0.19 && share < 0.31, `light got ${light} of ${REQUESTS} (${(share * 100).toFixed(1)}%), want about 25%`)
  })

  test('a weight-0 backend next to another is never chosen', { timeout: 30_000 }, async () => {
    const counts = await tally('/solo')
    assert.deepEqual([...counts], [['solo', REQUESTS]])
    assert.equal(backends[2]!.requests.length, 0, 'the weight-0 backend received requests')
  })
})
