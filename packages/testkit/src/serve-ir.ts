/**
 * An Engine serving an IR's first bind on a loopback port, for in-process tests of what an IR
 * does (the engine's pipeline tests, the controller's translated IR): its base URL, and a close
 * that ends the server's connections and the engine. The engine's own tests import this file
 * by path (../../testkit/src/serve-ir.ts): the testkit depends on the engine, so the engine
 * cannot list the testkit as a dependency.
 */

import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Engine } from '@portico/engine'
import type { ProxyIR } from '@portico/engine/ir'

export interface ServedIr {
  engine: Engine
  base: string
  close: () => Promise<void>
}

/** Binds 127.0.0.1 on an ephemeral port (test servers never outlive the test). */
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
