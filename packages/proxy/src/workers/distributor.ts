/**
 * The primary's side of `WORKER_ACCEPT=primary` (intake.ts says why it exists): the primary
 * listens on every data-plane port itself, without SO_REUSEPORT, and hands each connection it
 * accepts to the next serving loop in turn -- itself (it serves its share on its own listeners)
 * or a worker, for which it copies the bytes between the two sockets.
 *
 * The ports follow the workers' all-or-nothing reloads: `prepare` binds the ports a config
 * adds (a port that cannot be bound refuses the reload, as a worker's bind failure does);
 * connections they accept wait, paused, until `commit` (handed on) or `abort` (closed).
 * `commit` stops accepting on the ports the config dropped; their connections run to their end.
 *
 * What it costs: every byte crosses the primary's event loop once more each way, so the
 * primary's core caps throughput well before N workers would; the workers still do all the
 * HTTP, TLS and policy work. Where SO_REUSEPORT balances (Linux), it is not used by default.
 */

import net, { type Server, type Socket } from 'node:net'
import type { Logger } from 'pino'
import type { ProxyIR } from '@portico/engine'
import { closeWhenFlushed, PorticoError } from '@portico/engine'
import { INTAKE_ACK, intakeHeader } from './intake.ts'
import type { ListenerAddress } from './protocol.ts'

/** How long a worker has to acknowledge a hand-over before the next one is tried. */
const ACK_TIMEOUT_MS = 2_000
/**
 * How long a client may take to read what the worker sent before it closed (at most a
 * socket's high-water mark): the primary has no idle timeout of its own.
 */
const LINGER_MS = 30_000

interface Port {
  key: string
  protocol: string
  address: string
  server: Server
  /** False until the config that added it is in force: its connections wait. */
  live: boolean
  waiting: Socket[]
}

export interface PreparedPorts {
  opened: Port[]
}

export interface DistributorOptions {
  /** The intake addresses of the workers serving now, in a stable order. */
  workers: () => string[]
  /**
   * The primary's own share (it is one of the serving loops, config.workers): a connection
   * given to it is served on its own listeners (listeners.ts `accept`), no bytes copied.
   * It takes its turn in the round robin before the workers.
   */
  self?: (bind: string, socket: Socket) => void
  token: string
  log: Logger
}

export class ConnectionDistributor {
  private readonly ports = new Map<string, Port>()
  private readonly options: DistributorOptions
  private next = 0

  constructor (options: DistributorOptions) {
    this.options = options
  }

  /** Binds the ports `ir` adds; throws (having closed what it opened) if one cannot be bound. */
  async prepare (ir: ProxyIR): Promise<PreparedPorts> {
    const opened: Port[] = []
    try {
      for (const bind of ir.binds) {
        // Datagrams are not handed over: each worker binds a UDP port itself (listeners.ts openUdp).
        if (this.ports.has(bind.key) || bind.protocol === 'UDP') continue
        opened.push(await this.open(bind.key, bind.protocol, bind.address, bind.port))
      }
    } catch (err) {
      for (const p of opened) this.close(p)
      throw err
    }
    return { opened }
  }

  abort (prepared: PreparedPorts): void {
    for (const p of prepared.opened) this.close(p)
  }

  /** The config is in force: new ports hand on what they accepted; dropped ones stop accepting. */
  commit (prepared: PreparedPorts, ir: ProxyIR): void {
    for (const p of prepared.opened) {
      this.ports.set(p.key, p)
      p.live = true
      for (const socket of p.waiting.splice(0)) this.handOn(p, socket)
    }
    const wanted = new Set(ir.binds.filter(b => b.protocol !== 'UDP').map(b => b.key))
    for (const [key, p] of this.ports) {
      if (wanted.has(key)) continue
      this.ports.delete(key)
      this.close(p)
    }
  }

  addresses (): ListenerAddress[] {
    return [...this.ports.values()].map(p => {
      const a = p.server.address()
      return { key: p.key, protocol: p.protocol, address: p.address, port: typeof a === 'object' && a !== null ? a.port : 0 }
    })
  }

  /** Stops accepting everywhere (a drain: the workers finish what they hold). */
  close (port?: Port): void {
    const all = port !== undefined ? [port] : [...this.ports.values()]
    if (port === undefined) this.ports.clear()
    for (const p of all) {
      p.server.close()
      for (const s of p.waiting.splice(0)) s.destroy()
    }
  }

  private async open (key: string, protocol: string, address: string, port: number): Promise<Port> {
    const server = net.createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true })
    const entry: Port = { key, protocol, address, server, live: false, waiting: [] }
    server.on('connection', (socket: Socket) => {
      if (entry.live) this.handOn(entry, socket)
      else entry.waiting.push(socket)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => reject(new PorticoError('PORTICO_BIND_FAILED', `cannot listen on ${key}: ${err.code ?? err.message}`, { cause: err })))
      server.listen({ host: address, port }, () => {
        server.removeAllListeners('error')
        server.on('error', err => this.options.log.error({ err, bind: key }, 'listener error'))
        resolve()
      })
    })
    return entry
  }

  /**
   * To the next serving loop, round robin over the primary (`self`) and the workers; with none
   * serving, the connection is closed. A
   * worker that cannot be reached (it just ended) or does not take the header in time (its
   * loop is stuck) is passed over for the next one, once around at most, before anything of
   * the client's was sent.
   */
  private handOn (port: Port, client: Socket, tried = 0): void {
    const self = this.options.self
    const workers = this.options.workers()
    const loops = workers.length + (self !== undefined ? 1 : 0)
    if (loops === 0 || tried >= loops || client.remoteAddress === undefined || client.destroyed) {
      client.destroy()
      return
    }
    let turn = this.next++ % loops
    if (this.next >= 0x7fffffff) this.next = 0
    if (self !== undefined) {
      // The primary's turn: served here, on the socket it accepted (still paused).
      if (turn === 0) return self(port.key, client)
      turn--
    }
    const path = workers[turn]!
    const header = intakeHeader(this.options.token, {
      bind: port.key,
      remoteAddress: client.remoteAddress,
      remotePort: client.remotePort ?? 0,
      remoteFamily: client.remoteFamily ?? 'IPv4',
      localAddress: client.localAddress ?? '',
      localPort: client.localPort ?? 0
    })
    const worker = net.connect({ path, allowHalfOpen: true })
    worker.write(header)
    // A client error (a reset) ends it whatever the state; its 'close' ends the pair.
    if (tried === 0) client.on('error', () => client.destroy())
    let state: 'waiting' | 'joined' | 'passed' = 'waiting'
    // A reset (or a worker that went away) ends both at once; a clean close lets the other
    // side write out what it holds first (closeWhenFlushed), the client within LINGER_MS.
    const cut = (): void => {
      client.destroy()
      worker.destroy()
    }
    const clientClosed = (): void => {
      if (state === 'joined') closeWhenFlushed(worker)
      else cut()
    }
    // Before the acknowledgement nothing of the client's has moved: another worker may take it.
    const passOver = (): void => {
      if (state !== 'waiting') return
      state = 'passed'
      clearTimeout(timer)
      client.off('close', clientClosed)
      worker.destroy()
      this.handOn(port, client, tried + 1)
    }
    const timer = setTimeout(passOver, ACK_TIMEOUT_MS)
    client.once('close', clientClosed)
    const workerFailed = (): void => {
      if (state === 'waiting') passOver()
      else if (state === 'joined') cut()
    }
    const workerClosed = (): void => {
      if (state === 'waiting') passOver()
      else if (state === 'joined') closeWhenFlushed(client, LINGER_MS)
    }
    worker.once('error', workerFailed)
    worker.once('close', workerClosed)
    // The client's bytes follow only once the worker has taken the header (INTAKE_ACK): the
    // worker's server must be the first to read them (a TLS server reads the socket's handle
    // directly, so bytes that arrived with the header could not be handed to it).
    worker.once('data', (first: Buffer) => {
      if (state !== 'waiting') return
      clearTimeout(timer)
      if (first[0] !== INTAKE_ACK) {
        state = 'joined'
        return cut()
      }
      state = 'joined'
      if (first.length > 1) client.write(first.subarray(1))
      // Both ways with backpressure; a half close passes on (allowHalfOpen); a close on either
      // side ends the other (above).
      client.pipe(worker)
      worker.pipe(client)
      client.resume()
    })
  }
}
