/**
 * The one reader of a request body whole, up to a limit, for every part that needs it
 * whole: retries and mirrors (to send it again), extAuthz and extProc (to hand it to a
 * service), `ai` backends (to read the model), the MCP layer (one JSON-RPC message). The
 * body ends up in `ctx.requestBody`, which the backend call and the MCP layer then send or
 * parse instead of the request stream -- so a body a policy already read is never read twice
 * (the stream is consumed by then), and every later reader sees the same bytes.
 */

import type { IncomingHttpHeaders } from 'node:http'
import type { InboundRequest } from './inbound.ts'
import { watchBodyClock, type BodyClockContext } from './body-clock.ts'
import { PorticoError, isPorticoError } from '../util/errors.ts'

/**
 * What the reader needs of a request's state (request/context.ts RequestContext has it): the
 * body's clocks read the listener's and route's limits (http/body-clock.ts).
 */
export interface BodyContext extends BodyClockContext {
  readonly req: InboundRequest
  /** Set for an upgrade request: its bytes belong to the tunnel. */
  readonly upgrade: object | null
  /** The body once read whole. */
  requestBody: Buffer | null
}

/** Does the client's request carry a body? (RFC 9112 §6.3) */
export function requestHasBody (headers: IncomingHttpHeaders): boolean {
  const cl = headers['content-length']
  if (cl !== undefined) return cl !== '0'
  return headers['transfer-encoding'] !== undefined
}

export interface ReadBodyOptions {
  /** Largest body read whole. */
  maxBytes: number
  /**
   * What happens past `maxBytes`. `keep`: the bytes read so far are put back (`unshift`) and
   * the stream is left as it was, so the backend call can still stream the whole body (a
   * retry or mirror is skipped instead). `drain`: the rest is read and discarded, for a
   * request the caller refuses (413) -- its connection can then carry the answer.
   */
  whenTooLarge: 'keep' | 'drain'
}

/**
 * `buffered`: `ctx.requestBody` holds the whole body (read now, or already by a policy).
 * `none`: the request has no body (or is an upgrade, whose bytes are the tunnel's).
 * `too-large`: more than `maxBytes`. An Error: the stream failed, the client left, or it was
 * too slow (PORTICO_REQUEST_BODY_TIMEOUT: quiet for the idle timeout, or under the minimum
 * rate; `bodyReadFailure` gives the answer).
 */
export type BodyRead = 'buffered' | 'none' | 'too-large' | Error

export async function readRequestBody (ctx: BodyContext, options: ReadBodyOptions): Promise<BodyRead> {
  const { maxBytes: limit, whenTooLarge } = options
  if (ctx.requestBody !== null) return ctx.requestBody.length > limit ? 'too-large' : 'buffered'
  const { req } = ctx
  if (ctx.upgrade !== null || !requestHasBody(req.headers)) return 'none'
  const declared = Number(req.headers['content-length'] ?? NaN)
  if (declared > limit) {
    if (whenTooLarge === 'drain') req.resume()
    return 'too-large'
  }
  return await new Promise<BodyRead>(resolve => {
    const chunks: Buffer[] = []
    let size = 0
    let stopClock: () => void = () => {}
    const done = (value: BodyRead): void => {
      stopClock()
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
      resolve(value)
    }
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      chunks.push(chunk)
      if (size <= limit) return
      if (whenTooLarge === 'drain') {
        done('too-large')
        req.resume()
        return
      }
      req.pause()
      done('too-large')
      req.unshift(Buffer.concat(chunks))
    }
    const onEnd = (): void => {
      ctx.requestBody = Buffer.concat(chunks)
      done('buffered')
    }
    const onError = (err: Error): void => done(err)
    const onClose = (): void => { if (!req.complete) done(new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'the client closed the connection')) }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
    // The same clocks as a body streamed to a backend: a quiet or trickling client does not
    // keep its connection and this read for as long as it likes.
    stopClock = watchBodyClock(req, ctx, done)
  })
}

/** Chunks of a body already held (ctx.requestBody), as requestBodyChunks yields them. */
export const HELD_BODY_CHUNK_BYTES = 64 * 1024

/**
 * The body chunk by chunk as the client sends it, for a part that hands it on as it comes
 * (extProc's streamed body modes): each chunk is yielded, and the stream stays paused until
 * the consumer asks for the next, so the reader holds one chunk at a time. The same clocks as
 * readRequestBody. Returns `end`, `too-large` (more than `maxBytes` in all, or declared so;
 * nothing more is read -- the caller drains or answers), or an Error (the stream failed, the
 * client left or was too slow: bodyReadFailure gives the answer). A body read whole already
 * (`ctx.requestBody`) is yielded in chunks of HELD_BODY_CHUNK_BYTES. A consumer that stops early leaves the stream
 * paused with the rest unread.
 */
export async function * requestBodyChunks (ctx: BodyContext, maxBytes: number): AsyncGenerator<Buffer, 'end' | 'too-large' | Error> {
  if (ctx.requestBody !== null) {
    if (ctx.requestBody.length > maxBytes) return 'too-large'
    // A body read already goes in chunks as a client's would: one gRPC message per chunk, well
    // under the 4 MiB a gRPC server takes by default (the endpoint picker reads bodies of 10 MiB).
    const body = ctx.requestBody
    for (let at = 0; at < body.length; at += HELD_BODY_CHUNK_BYTES) yield body.subarray(at, Math.min(body.length, at + HELD_BODY_CHUNK_BYTES))
    return 'end'
  }
  const { req } = ctx
  if (ctx.upgrade !== null || !requestHasBody(req.headers)) return 'end'
  if (Number(req.headers['content-length'] ?? NaN) > maxBytes) return 'too-large'
  const queue: Buffer[] = []
  let ended: 'end' | Error | null = null
  let wake: (() => void) | null = null
  const poke = (): void => {
    const w = wake
    wake = null
    w?.()
  }
  const onData = (chunk: Buffer): void => {
    queue.push(chunk)
    // One chunk at a time: the next waits in the socket until the consumer is ready.
    req.pause()
    poke()
  }
  const onEnd = (): void => { ended ??= 'end'; poke() }
  const onError = (err: Error): void => { ended ??= err; poke() }
  const onClose = (): void => { if (!req.complete) { ended ??= new PorticoError('PORTICO_DOWNSTREAM_CLOSED', 'the client closed the connection'); poke() } }
  req.on('data', onData)
  req.on('end', onEnd)
  req.on('error', onError)
  req.on('close', onClose)
  const stopClock = watchBodyClock(req, ctx, cut => {
    ended ??= cut
    poke()
  })
  let size = 0
  try {
    while (true) {
      const chunk = queue.shift()
      if (chunk !== undefined) {
        size += chunk.length
        if (size > maxBytes) return 'too-large'
        yield chunk
        continue
      }
      if (ended !== null) return ended
      await new Promise<void>(resolve => {
        wake = resolve
        req.resume()
      })
    }
  } finally {
    stopClock()
    req.pause()
    req.off('data', onData)
    req.off('end', onEnd)
    req.off('error', onError)
    req.off('close', onClose)
  }
}

/**
 * The answer to a body that could not be read whole: 408 `request body timeout` (and the
 * connection closed: the rest of the body is never read) when the client was too slow, as a
 * body streamed to a backend gets; 400 `request body incomplete` otherwise.
 */
export function bodyReadFailure (err: Error): { status: number, body: string, reason: 'Timeout' | 'InvalidRequest', headers?: Record<string, string> } {
  if (isPorticoError(err, 'PORTICO_REQUEST_BODY_TIMEOUT')) return { status: 408, body: 'request body timeout', reason: 'Timeout', headers: { connection: 'close' } }
  return { status: 400, body: 'request body incomplete', reason: 'InvalidRequest' }
}
