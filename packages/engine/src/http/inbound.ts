/**
 * What the engine uses of a client's request and of the response it writes to that client.
 * Node's HTTP/1.1 server's IncomingMessage and ServerResponse provide it, and so does its
 * HTTP/2 compatibility API (proxy/src/http2.ts adapts what differs). The engine's modules take
 * these types rather than Node's classes (test/inbound-contract.test.ts keeps it so), so the
 * members named here are the whole contract a listener's server keeps -- the ground for a
 * lighter HTTP/1.1 server than Node's (issue 54; bench/README.md, "the server side's share").
 * An upgrade (WebSocket) is answered on its handed-over socket by Node's ServerResponse
 * (http/upgrade.ts), whichever server parsed its request.
 *
 * The lists are values so a test can check real objects against them; the engine imports
 * this module for its types only.
 */

import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders } from 'node:http'
import type { Socket } from 'node:net'
import type { Readable } from 'node:stream'

/** The request's head, as Node's server parses it (names lower case, repeated fields joined as Node joins them). */
export const INBOUND_REQUEST_HEAD = ['headers', 'rawHeaders', 'method', 'url', 'httpVersion', 'httpVersionMajor', 'socket', 'complete'] as const

/**
 * The request: its head, and the request itself the body's readable stream (a backend call
 * sends it on as it comes; request-body.ts reads it whole where a policy needs it).
 */
export type InboundRequest = Readable & Pick<IncomingMessage, typeof INBOUND_REQUEST_HEAD[number]>

/**
 * The response's members: its state, writing the head, body and trailers, its events
 * (`close`, `finish`, `drain`), whether the body goes out chunked (trailers only fit there),
 * whether the connection stays open after it (a refused or pipelined upgrade turns that off),
 * and, for an upgrade the backend accepted, letting the client's socket go.
 */
export const INBOUND_RESPONSE_MEMBERS = [
  'statusCode', 'headersSent', 'destroyed', 'writableLength', 'writableFinished', 'writableEnded', 'socket',
  'writeHead', 'write', 'end', 'flushHeaders', 'setHeader', 'addTrailers', 'destroy',
  'on', 'once', 'off', 'emit',
  'chunkedEncoding', 'shouldKeepAlive', 'detachSocket'
] as const

/**
 * The response to that client: the members above, typed as Node's ServerResponse types them
 * (written out rather than picked, so each server's own class satisfies it, `this` included).
 */
export interface InboundResponse {
  statusCode: number
  readonly headersSent: boolean
  readonly destroyed: boolean
  readonly writableLength: number
  readonly writableFinished: boolean
  readonly writableEnded: boolean
  readonly socket: Socket | null
  chunkedEncoding: boolean
  shouldKeepAlive: boolean
  writeHead (statusCode: number, headers?: OutgoingHttpHeaders | OutgoingHttpHeader[]): this
  writeHead (statusCode: number, statusMessage?: string, headers?: OutgoingHttpHeaders | OutgoingHttpHeader[]): this
  write (chunk: string | Uint8Array, callback?: (err?: Error | null) => void): boolean
  write (chunk: string | Uint8Array, encoding: BufferEncoding, callback?: (err?: Error | null) => void): boolean
  end (callback?: () => void): this
  end (chunk?: string | Uint8Array, callback?: () => void): this
  end (chunk: string | Uint8Array, encoding: BufferEncoding, callback?: () => void): this
  flushHeaders (): void
  setHeader (name: string, value: number | string | readonly string[]): this
  addTrailers (headers: OutgoingHttpHeaders | ReadonlyArray<[string, string]>): void
  destroy (error?: Error): this
  detachSocket (socket: Socket): void
  on (event: string, listener: (...args: any[]) => void): this
  once (event: string, listener: (...args: any[]) => void): this
  off (event: string, listener: (...args: any[]) => void): this
  emit (event: string | symbol, ...args: any[]): boolean
}

/** The interface and the list name the same members (a compile error here says which differ). */
const sameMembers: [Exclude<keyof InboundResponse, typeof INBOUND_RESPONSE_MEMBERS[number]>, Exclude<typeof INBOUND_RESPONSE_MEMBERS[number], keyof InboundResponse>] extends [never, never] ? true : false = true
void sameMembers
