/**
 * The process kubelet (e2e/cluster/process-kubelet.ts) reports a pod whose first port is UDP
 * Ready once a socket is bound to it in the pod's network namespace — before this it tried a
 * TCP connect, never succeeded, and held such pods (the Gateway API suite's UDP echo servers)
 * unready for its whole 60 s readiness wait.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createSocket } from 'node:dgram'
import { udpBound } from '../cluster/process-kubelet.ts'
import { freePort } from '@portico/testkit/portico'

test('udpBound: a UDP socket bound to the port in the process\'s network namespace, IPv4 or IPv6', async () => {
  if (process.platform !== 'linux') return
  for (const type of ['udp4', 'udp6'] as const) {
    const port = await freePort()
    assert.equal(udpBound(process.pid, port), false)
    const socket = createSocket(type)
    await new Promise<void>(resolve => socket.bind(port, resolve))
    assert.equal(udpBound(process.pid, port), true, type)
    await new Promise<void>(resolve => socket.close(() => resolve()))
    assert.equal(udpBound(process.pid, port), false)
  }
  assert.equal(udpBound(2 ** 22 + 1, 53), false, 'no such process')
})
