/**
 * Connections the primary accepts and hands to a worker (`WORKER_ACCEPT=primary`, the default
 * where SO_REUSEPORT does not spread connections over the sockets sharing a port: macOS,
 * Windows). Worker threads cannot take over a socket another thread accepted (Node moves no
 * handles between threads, and a file descriptor cannot be duplicated without native code),
 * so the primary carries the bytes: it connects to the chosen worker's intake socket (a
 * local-socket.ts address), sends one header line -- the process's token and, as JSON, the
 * bind and the client's addresses -- waits for the worker's one-byte acknowledgement, then
 * copies bytes both ways (distributor.ts). The worker reads the line, gives the socket the
 * client's addresses, acknowledges, and passes it to the bind's server as if that server had
 * accepted it (listeners.ts `accept`).
 *
 * The header is the first thing on every intake connection, so anything else that connects
 * (another local process found the abstract name) is cut before a byte reaches a server.
 */

import net, { type Socket } from 'node:net'
import { timingSafeEqual } from 'node:crypto'
import { rmSync } from 'node:fs'

/** The client's side of a relayed connection, as the primary's socket saw it. */
export interface RelayedClient {
  bind: string
  remoteAddress: string
  remotePort: number
  remoteFamily: string
  localAddress: string
  localPort: number
}

/**
 * The worker's one-byte answer to a good header: the primary sends the client's bytes only
 * after it, so the bind's server reads them from the socket itself (distributor.ts).
 */
export const INTAKE_ACK = 0x06

/** Longest header line accepted (a token of 64 hex digits and a few addresses fit in far less). */
export const INTAKE_HEADER_LIMIT = 1024
/** How long the header may take to arrive (the primary writes it at once). */
const HEADER_TIMEOUT_MS = 5_000

export function intakeHeader (token: string, client: RelayedClient): Buffer {
  return Buffer.from(`${token}${JSON.stringify(client)}\n`)
}

/**
 * Reads and checks the header; the client, or why the connection is refused. `line` is the
 * header without its newline.
 */
export function parseIntakeHeader (line: Buffer, token: Buffer): RelayedClient | string {
  if (line.length < token.length || !timingSafeEqual(line.subarray(0, token.length), token)) return 'bad token'
  let v: unknown
  try {
    v = JSON.parse(line.subarray(token.length).toString('utf8'))
  } catch {
    return 'header is not JSON'
  }
  const c = v as Partial<RelayedClient> | null
  if (c === null || typeof c !== 'object' || typeof c.bind !== 'string' || typeof c.remoteAddress !== 'string' || typeof c.localAddress !== 'string' ||
    typeof c.remoteFamily !== 'string' || !isPort(c.remotePort) || !isPort(c.localPort)) return 'header lacks the client addresses'
  return { bind: c.bind, remoteAddress: c.remoteAddress, remotePort: c.remotePort, remoteFamily: c.remoteFamily, localAddress: c.localAddress, localPort: c.localPort }
}

function isPort (n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 65535
}

/**
 * Gives a relayed socket the client's addresses: everything that asks a socket who the client
 * is (the pipeline's source address, access log, TCP proxying, TLS sockets built over it)
 * reads these instead of the intake socket's, which has none. Own properties over net.Socket's
 * getters.
 */
export function assumeAddresses (socket: Socket, c: Pick<Socket, 'remoteAddress' | 'remotePort' | 'remoteFamily' | 'localAddress' | 'localPort'>): void {
  for (const [name, value] of Object.entries({ remoteAddress: c.remoteAddress, remotePort: c.remotePort, remoteFamily: c.remoteFamily, localAddress: c.localAddress, localPort: c.localPort })) {
    Object.defineProperty(socket, name, { value, configurable: true, enumerable: false })
  }
}

const ACK = Buffer.from([INTAKE_ACK])

const socketBytesRead = Object.getOwnPropertyDescriptor(net.Socket.prototype, 'bytesRead')!.get!
const socketBytesWritten = Object.getOwnPropertyDescriptor(net.Socket.prototype, 'bytesWritten')!.get!

/** The socket's byte counts from now on exclude what the intake itself read and wrote. */
function discountBytes (socket: Socket, read: number, written: number): void {
  Object.defineProperty(socket, 'bytesRead', { get () { return socketBytesRead.call(this) - read }, configurable: true })
  Object.defineProperty(socket, 'bytesWritten', { get () { return socketBytesWritten.call(this) - written }, configurable: true })
}

export interface Intake {
  close(): Promise<void>
}

/**
 * A worker's intake: `accept(bind, socket)` gets each relayed connection, paused, with the
 * client's addresses, and any bytes after the header put back.
 */
export async function startIntake (path: string, token: string, accept: (bind: string, socket: Socket) => void, onRefused: (why: string) => void): Promise<Intake> {
  const expected = Buffer.from(token)
  const open = new Set<Socket>()
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, socket => {
    open.add(socket)
    socket.once('close', () => open.delete(socket))
    readHeader(socket, expected, (client, rest, header) => {
      open.delete(socket)
      socket.pause()
      // Nothing may follow the header before the acknowledgement.
      if (rest.length > 0) {
        onRefused('bytes before the acknowledgement')
        socket.destroy()
        return
      }
      assumeAddresses(socket, client)
      socket.write(ACK)
      // Byte counts (TCP metrics, access log) are the client's: without the header and the acknowledgement.
      discountBytes(socket, header, ACK.length)
      accept(client.bind, socket)
    }, why => {
      onRefused(why)
      socket.destroy()
    })
  })
  // A file socket left by an earlier run of this worker (a restart) would refuse the listen.
  if (!path.startsWith('\0')) rmSync(path, { force: true })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ path }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return {
    close: () => new Promise(resolve => {
      server.close(() => resolve())
      for (const s of open) s.destroy()
    })
  }
}

function readHeader (socket: Socket, token: Buffer, done: (client: RelayedClient, rest: Buffer, headerBytes: number) => void, refuse: (why: string) => void): void {
  let seen: Buffer = Buffer.alloc(0)
  const timer = setTimeout(() => finish(), HEADER_TIMEOUT_MS)
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk])
    const end = seen.indexOf(10)
    if (end === -1) {
      if (seen.length > INTAKE_HEADER_LIMIT) finish('header too long')
      return
    }
    if (end > INTAKE_HEADER_LIMIT) return finish('header too long')
    const client = parseIntakeHeader(seen.subarray(0, end), token)
    if (typeof client === 'string') return finish(client)
    cleanup()
    done(client, seen.subarray(end + 1), end + 1)
  }
  const onEnd = (): void => finish('closed before its header')
  const cleanup = (): void => {
    clearTimeout(timer)
    socket.off('data', onData)
    socket.off('end', onEnd)
    socket.off('error', onEnd)
  }
  function finish (why = 'no header in time'): void {
    cleanup()
    refuse(why)
  }
  socket.on('data', onData)
  socket.on('end', onEnd)
  socket.on('error', onEnd)
}
