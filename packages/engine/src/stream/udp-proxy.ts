/**
 * Datagrams on UDP listeners (Gateway API UDPRoute), forwarded per flow as Envoy's udp_proxy
 * does: a flow is one client address:port on one bind, with its own upstream socket connected
 * to the backend chosen (by weight) when the flow's first datagram came, so the backend's
 * replies come back to that client and only to it.
 *
 *   - A flow with no datagram either way for the listener's idle timeout (default 60 s, as
 *     Envoy's `idle_timeout`) is closed, its socket with it.
 *   - A bind holds at most `maxFlows` flows: a new client past the cap evicts the flow quiet
 *     longest (flows are kept in order of last client datagram), so a flood of spoofed source
 *     ports costs bounded sockets and memory, and the eviction is counted.
 *   - A backend that refuses (ICMP port unreachable: ECONNREFUSED on the connected socket)
 *     ends the flow; the client's next datagram opens a new one (and picks a backend again).
 *   - Datagrams sent before the upstream socket is connected wait in a short queue (64 per
 *     flow, 16 MiB across flows; more are dropped, as a full socket buffer would).
 *   - A reload keeps flows whose backend the new config's route still has; a flow whose
 *     backend went away is closed at its next datagram, which opens a flow on the new config.
 *
 * Counts (datagrams and bytes each way) are handed on as deltas once per sweep and at the
 * end of a flow, so metrics stay current without a callback per datagram.
 */

import dgram from 'node:dgram'
import net from 'node:net'
import type { BackendIR } from '../ir/types.ts'
import type { CompiledBind, CompiledListener, CompiledStreamRoute } from '../request/compiled.ts'
import type { TraceHub } from '../trace/hub.ts'
import type { TraceRecorder } from '../trace/recorder.ts'
import { streamPlacement, type StreamRecordBase } from './stream-record.ts'
import { EndpointRotation } from './endpoint-rotation.ts'
import { hostPort, plainAddress } from '../util/host-port.ts'
import { performance } from '../util/clock.ts'
import { Sweeper } from './sweeper.ts'

/** Envoy's udp_proxy idle_timeout default. */
export const DEFAULT_UDP_IDLE_TIMEOUT_MS = 60_000
/** Flows per UDP bind before the quietest is evicted for a new one. */
export const DEFAULT_UDP_MAX_FLOWS = 10_000
/** Datagrams held for a flow while its upstream socket connects (a hostname may need a lookup). */
const MAX_PENDING_DATAGRAMS = 64
/**
 * Bytes held across all flows while their sockets connect: a flood of new clients sending
 * large datagrams to a backend whose name resolves slowly would otherwise hold
 * maxFlows × 64 datagrams × 64 KiB.
 */
const MAX_PENDING_BYTES = 16 * 1024 * 1024

/** Why a flow ended, or why a datagram found no flow (access log `reason`, metrics). */
export type UdpFlowReason = 'IdleTimeout' | 'Evicted' | 'UpstreamUnreachable' | 'UpstreamError' | 'BackendRemoved' | 'Closed' | 'NoRoute' | 'NoBackend'

/** Datagrams and bytes moved since the last report, for one flow. */
export interface UdpFlowCounts {
  gateway: string
  listener: string
  route: string
  backend: string
  datagramsFromClient: number
  bytesFromClient: number
  datagramsToClient: number
  bytesToClient: number
  /** Client datagrams dropped (queue full while connecting, or a send that failed). */
  dropped: number
}

/** One finished flow (or a datagram nothing serves: no route, no backend), for the access log and metrics. */
export interface UdpFlowRecord extends StreamRecordBase<UdpFlowReason> {
  datagramsFromClient: number
  bytesFromClient: number
  datagramsToClient: number
  bytesToClient: number
}

export interface UdpProxyOptions {
  /** A flow was opened (its first datagram had a route and a backend). */
  onFlowOpen?: (flow: { gateway: string, listener: string, route: string, backend: string }) => void
  onFlowCounts?: (counts: UdpFlowCounts) => void
  onFlowEnd?: (record: UdpFlowRecord) => void
}

/** What a UDP bind's socket hands the proxy: the socket, to answer clients through. */
export interface UdpBindSocket {
  send (msg: Buffer, port: number, address: string): void
}

interface Flow {
  key: string
  flows: BindFlows
  source: { address: string, port: number }
  /** The address to answer to, as the socket reported it (IPv4-mapped forms kept). */
  replyAddress: string
  bind: CompiledBind
  listener: CompiledListener
  route: CompiledStreamRoute
  backend: BackendIR
  target: string
  upstream: dgram.Socket
  connected: boolean
  pending: Buffer[]
  started: number
  lastActive: number
  idleTimeoutMs: number
  counts: { dIn: number, bIn: number, dOut: number, bOut: number, dropped: number }
  reported: { dIn: number, bIn: number, dOut: number, bOut: number, dropped: number }
  tracer: TraceRecorder | null
  ended: boolean
  reason: UdpFlowReason | null
  error: string | null
}

/** The flows of one bind, by client `address|port`, in order of last client datagram (oldest first). */
interface BindFlows {
  socket: UdpBindSocket
  map: Map<string, Flow>
}

export class UdpProxy {
  private readonly hub: TraceHub
  private readonly options: UdpProxyOptions
  private readonly binds = new Map<string, BindFlows>()
  private readonly endpoints = new EndpointRotation()
  /** Every flow's idle timeout and count reports, on one timer. */
  private readonly clock: Sweeper<Flow>
  /** Bytes of all flows' pending datagrams (MAX_PENDING_BYTES). */
  private pendingBytes = 0

  constructor (hub: TraceHub, options: UdpProxyOptions = {}) {
    this.hub = hub
    this.options = options
    this.clock = new Sweeper(250, (flow, now) => this.check(flow, now))
  }

  /** Flows open now on `bindKey` (for /debug and tests). */
  flowCount (bindKey?: string): number {
    if (bindKey !== undefined) return this.binds.get(bindKey)?.map.size ?? 0
    let n = 0
    for (const b of this.binds.values()) n += b.map.size
    return n
  }

  /** A datagram `msg` from `rinfo` on the bind `bind` (its current config), received on `socket`. */
  datagram (bind: CompiledBind, socket: UdpBindSocket, msg: Buffer, rinfo: { address: string, port: number }): void {
    let flows = this.binds.get(bind.ir.key)
    if (flows === undefined || flows.socket !== socket) {
      flows = { socket, map: new Map() }
      this.binds.set(bind.ir.key, flows)
    }
    const key = `${rinfo.address}|${rinfo.port}`
    let flow = flows.map.get(key)
    if (flow !== undefined && flow.bind !== bind) {
      // A reload since the flow's last datagram: it goes on if its route still sends there.
      const listener = bind.selectListener('')
      const route = listener.streamRoutes[0]
      if (route === undefined || !route.backends.all.some(b => b.backend?.key === flow!.backend.key)) {
        this.end(flow, 'BackendRemoved', null)
        flow = undefined
      } else {
        flow.bind = bind
        flow.listener = listener
        flow.route = route
        flow.idleTimeoutMs = listener.ir.udp?.idleTimeoutMs ?? DEFAULT_UDP_IDLE_TIMEOUT_MS
      }
    }
    if (flow === undefined) {
      flow = this.open(bind, flows, key, rinfo)
      if (flow === undefined) return
    } else {
      // Most recent last: the map's first entry is the flow to evict.
      flows.map.delete(key)
      flows.map.set(key, flow)
    }
    flow.lastActive = performance.now()
    flow.counts.dIn++
    flow.counts.bIn += msg.length
    if (!flow.connected) {
      if (flow.pending.length < MAX_PENDING_DATAGRAMS && this.pendingBytes + msg.length <= MAX_PENDING_BYTES) {
        flow.pending.push(msg)
        this.pendingBytes += msg.length
      } else flow.counts.dropped++
      return
    }
    this.sendUp(flow, msg)
  }

  /** Closes every flow of a bind whose socket closed (the listener went away or drains). */
  closeBind (bindKey: string): void {
    const flows = this.binds.get(bindKey)
    if (flows === undefined) return
    this.binds.delete(bindKey)
    for (const flow of [...flows.map.values()]) this.end(flow, 'Closed', null)
  }

  private open (bind: CompiledBind, flows: BindFlows, key: string, rinfo: { address: string, port: number }): Flow | undefined {
    const listener = bind.selectListener('')
    const source = { address: plainAddress(rinfo.address), port: rinfo.port }
    const tracer = this.hub.armed ? this.hub.begin() : null
    tracer?.emit({ type: 'requestStarted' })
    tracer?.emit({ type: 'connectionStarted', protocol: 'udp', listener: listener.ir.key, source })
    const route = listener.streamRoutes[0] ?? null
    if (tracer !== null) {
      tracer.emit({ type: 'routeSelection', selectedRoute: route?.ir.key ?? null, evaluatedRoutes: listener.streamRoutes.map(r => r.ir.key) }, { severity: route === null ? 'error' : 'info' })
      this.hub.claim(tracer, { method: 'UDP', host: '', path: '', route: route?.ir.key ?? null, headers: {} })
    }
    const refuse = (reason: UdpFlowReason, message: string): undefined => {
      const record: UdpFlowRecord = { ...streamPlacement(bind, listener, route, null, null), source, datagramsFromClient: 1, bytesFromClient: 0, datagramsToClient: 0, bytesToClient: 0, durationMs: 0, reason, error: message }
      tracer?.emit({ type: 'requestFinished', stream: { bytesFromClient: 0, bytesToClient: 0, reason } }, { severity: 'error' })
      this.options.onFlowEnd?.(record)
      return undefined
    }
    if (route === null) return refuse('NoRoute', 'no route for this datagram')
    const picked = route.backends.pick()
    const backend = picked?.backend
    if (backend === undefined || backend.kind === 'invalid' || backend.endpoints.length === 0) {
      return refuse('NoBackend', backend?.invalidReason ?? (picked === null ? 'the route has no backend with weight' : 'backend not found'))
    }
    const max = listener.ir.udp?.maxFlows ?? DEFAULT_UDP_MAX_FLOWS
    while (flows.map.size >= max) {
      const oldest = flows.map.values().next().value!
      this.end(oldest, 'Evicted', `more than ${max} flows on this listener`)
    }
    const endpoint = this.endpoints.pick(backend)
    const target = hostPort(endpoint.host, endpoint.port)
    const upstream = dgram.createSocket({ type: net.isIPv6(endpoint.host) ? 'udp6' : 'udp4' })
    const now = performance.now()
    const flow: Flow = {
      key, flows, source, replyAddress: rinfo.address, bind, listener, route, backend, target, upstream, connected: false, pending: [], started: now, lastActive: now,
      idleTimeoutMs: listener.ir.udp?.idleTimeoutMs ?? DEFAULT_UDP_IDLE_TIMEOUT_MS,
      counts: { dIn: 0, bIn: 0, dOut: 0, bOut: 0, dropped: 0 },
      reported: { dIn: 0, bIn: 0, dOut: 0, bOut: 0, dropped: 0 },
      tracer, ended: false, reason: null, error: null
    }
    flows.map.set(key, flow)
    this.clock.add(flow)
    tracer?.emit({ type: 'backendCallStart', target })
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      // ICMP port unreachable comes back on a connected socket as ECONNREFUSED.
      this.end(flow, err.code === 'ECONNREFUSED' ? 'UpstreamUnreachable' : 'UpstreamError', err.message)
    })
    upstream.on('message', (reply: Buffer) => {
      if (flow.ended) return
      flow.lastActive = performance.now()
      flow.counts.dOut++
      flow.counts.bOut += reply.length
      flows.socket.send(reply, flow.source.port, flow.replyAddress)
    })
    upstream.connect(endpoint.port, endpoint.host, (err?: Error | null) => {
      if (flow.ended) return
      // A hostname that does not resolve fails here (the callback gets it, no 'error' event).
      if (err !== null && err !== undefined) {
        this.end(flow, 'UpstreamError', `no address for ${target}: ${(err as NodeJS.ErrnoException).code ?? err.message}`)
        return
      }
      flow.connected = true
      tracer?.emit({ type: 'backendCallResult', status: null, error: null })
      const queued = this.takePending(flow)
      for (const msg of queued) this.sendUp(flow, msg)
    })
    this.options.onFlowOpen?.({ gateway: listener.ir.gateway, listener: listener.ir.name, route: route.ir.key, backend: backend.name })
    return flow
  }

  /** The flow's pending datagrams, no longer counted against MAX_PENDING_BYTES. */
  private takePending (flow: Flow): Buffer[] {
    const queued = flow.pending
    flow.pending = []
    for (const msg of queued) this.pendingBytes -= msg.length
    return queued
  }

  private sendUp (flow: Flow, msg: Buffer): void {
    try {
      flow.upstream.send(msg, err => {
        if (err === null || err === undefined) return
        const code = (err as NodeJS.ErrnoException).code
        if (code === 'ECONNREFUSED') this.end(flow, 'UpstreamUnreachable', err.message)
        else if (!flow.ended) flow.counts.dropped++
      })
    } catch (err) {
      // A socket closed meanwhile (the flow ended between the datagram and this send) throws.
      if (!flow.ended) this.end(flow, 'UpstreamError', (err as Error).message)
    }
  }

  private check (flow: Flow, now: number): void {
    this.report(flow)
    if (now - flow.lastActive >= flow.idleTimeoutMs) this.end(flow, 'IdleTimeout', `no datagram either way for ${flow.idleTimeoutMs} ms`)
  }

  /** Hands on what the flow moved since the last report. */
  private report (flow: Flow): void {
    const c = flow.counts
    const r = flow.reported
    if (c.dIn === r.dIn && c.dOut === r.dOut && c.dropped === r.dropped) return
    this.options.onFlowCounts?.({
      gateway: flow.listener.ir.gateway,
      listener: flow.listener.ir.name,
      route: flow.route.ir.key,
      backend: flow.backend.name,
      datagramsFromClient: c.dIn - r.dIn,
      bytesFromClient: c.bIn - r.bIn,
      datagramsToClient: c.dOut - r.dOut,
      bytesToClient: c.bOut - r.bOut,
      dropped: c.dropped - r.dropped
    })
    flow.reported = { ...c }
  }

  private end (flow: Flow, reason: UdpFlowReason, error: string | null): void {
    if (flow.ended) return
    flow.ended = true
    flow.reason = reason
    flow.error = error
    this.clock.delete(flow)
    if (flow.flows.map.get(flow.key) === flow) flow.flows.map.delete(flow.key)
    flow.counts.dropped += this.takePending(flow).length
    try {
      flow.upstream.close()
    } catch {
      // Already closed.
    }
    this.report(flow)
    const c = flow.counts
    const record: UdpFlowRecord = {
      ...streamPlacement(flow.bind, flow.listener, flow.route, flow.backend, flow.target),
      source: flow.source,
      datagramsFromClient: c.dIn,
      bytesFromClient: c.bIn,
      datagramsToClient: c.dOut,
      bytesToClient: c.bOut,
      durationMs: performance.now() - flow.started,
      reason,
      error
    }
    if (flow.tracer !== null) {
      if (error !== null && reason !== 'IdleTimeout') flow.tracer.emit({ type: 'backendCallResult', status: null, error }, { severity: 'error' })
      flow.tracer.emit({ type: 'requestFinished', stream: { bytesFromClient: c.bIn, bytesToClient: c.bOut, reason } }, { severity: reason === 'IdleTimeout' || reason === 'Closed' ? 'info' : 'error' })
    }
    this.options.onFlowEnd?.(record)
  }
}
