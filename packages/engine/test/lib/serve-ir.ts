/**
 * An Engine serving an IR's first bind on a loopback port, for in-process pipeline tests:
 * its base URL, and a close that ends the server's connections and the engine.
 */

import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Engine } from '../../src/index.ts'
import type { ProxyIR } from '../../src/ir/types.ts'

export interface ServedIr {
  engine: Engine
  base: string
  close: () => Promise<void>
}

/** Binds 127.0.0.1 on an ephemeral port (the engine's own test servers never outlive the test). */
export async function listenLoopback (server: http.Server): Promise<number> {
  await new Promise<void>(resolve => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  return (server.address() as AddressInfo).port
}

export async function serveIr (ir: ProxyIR): Promise<ServedIr> {
  const engine = new Engine({ tracing: false })
  engine.apply(ir)
  const gateway = http.createServer(engine.handler(ir.binds[0]!.key))
  const base = `http://127.0.0.1:${await listenLoopback(gateway)}`
  return {
    engine,
    base,
    close: async () => {
      gateway.closeAllConnections()
      await new Promise(resolve => gateway.close(resolve))
      await engine.close()
    }
  }
}
