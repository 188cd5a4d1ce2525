/**
 * A second "host" for tests that need a real, non-loopback address — EndpointSlices refuse
 * loopback addresses, so cluster-mode backends live here: a network namespace made by the
 * test itself, joined to this one by a veth pair on a private /30 (10.231.N.0/30). Node
 * processes started in it (echo servers) are reached at `address`. Needs root and iproute2;
 * everything is removed by destroy() and when the test process exits.
 */

import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { TestContext } from 'node:test'

export interface TestHost {
  /** The namespace side's address, e.g. 10.231.7.2. */
  address: string
  /** Starts `node args...` inside the namespace and waits for `readyLine` on its stdout. */
  spawnNode(args: string[], readyLine: string): Promise<ChildProcess>
  destroy(): void
}

const ECHO = fileURLToPath(new URL('./echo-server.ts', import.meta.url))
const UDP_ECHO = fileURLToPath(new URL('./udp-echo-server.ts', import.meta.url))
const created = new Set<() => void>()
process.on('exit', () => { for (const d of created) d() })

function ip (args: string[]): void {
  execFileSync('ip', args, { stdio: 'pipe' })
}

/** null (test skipped, or failed in CI) when namespaces cannot be made here. */
export function createTestHost (t: TestContext): TestHost | null {
  const n = (process.pid % 200) + 20
  const ns = `portico-e2e-${process.pid}`
  const hostIf = `pte${process.pid % 100000}h`
  const nsIf = `pte${process.pid % 100000}n`
  const hostAddr = `10.231.${n}.1`
  const address = `10.231.${n}.2`
  try {
    ip(['netns', 'add', ns])
    ip(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf])
    ip(['link', 'set', nsIf, 'netns', ns])
    ip(['addr', 'add', `${hostAddr}/30`, 'dev', hostIf])
    ip(['link', 'set', hostIf, 'up'])
    ip(['netns', 'exec', ns, 'ip', 'addr', 'add', `${address}/30`, 'dev', nsIf])
    ip(['netns', 'exec', ns, 'ip', 'link', 'set', nsIf, 'up'])
    ip(['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up'])
  } catch (err) {
    try { ip(['link', 'del', hostIf]) } catch {}
    try { ip(['netns', 'del', ns]) } catch {}
    const why = `cannot create a network namespace test host: ${(err as Error).message}`
    if (process.env.CI === 'true') throw new Error(why)
    t.skip(why)
    return null
  }
  const children = new Set<ChildProcess>()
  const destroy = () => {
    for (const c of children) c.kill('SIGKILL')
    try { ip(['link', 'del', hostIf]) } catch {}
    try { ip(['netns', 'del', ns]) } catch {}
    created.delete(destroy)
  }
  created.add(destroy)
  return {
    address,
    destroy,
    spawnNode: (args, readyLine) => new Promise((resolve, reject) => {
      const child = spawn('ip', ['netns', 'exec', ns, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
      children.add(child)
      let out = ''
      const timer = setTimeout(() => reject(new Error(`no "${readyLine}" from ${args.join(' ')}: ${out}`)), 10_000)
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString()
        if (out.includes(readyLine)) {
          clearTimeout(timer)
          resolve(child)
        }
      })
      child.stderr!.on('data', (d: Buffer) => { out += d.toString() })
      child.once('exit', () => children.delete(child))
    })
  }
}

/** A UDP echo server on the test host: answers each datagram with JSON {request, namespace, service, pod} (udp-echo-server.ts). */
export function startUdpEcho (host: TestHost, service: string, port: number, namespace = ''): Promise<ChildProcess> {
  return host.spawnNode([UDP_ECHO, host.address, String(port), service, namespace], 'listening')
}

/** An echo server on the test host: answers JSON {name, method, path, host}. */
export function startEcho (host: TestHost, name: string, port: number): Promise<ChildProcess> {
  return host.spawnNode([ECHO, host.address, String(port), name], 'listening')
}
