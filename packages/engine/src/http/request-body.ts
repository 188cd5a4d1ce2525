/**
 * The one reader of a request body whole, up to a limit, for every part that needs it
 * whole: retries and mirrors (to send it again), extAuthz and extProc (to hand it to a
 * service), `ai` backends (to read the model), the MCP layer (one JSON-RPC message). The
 * body ends up in `ctx.requestBody`, which the backend call and the MCP layer then send or
 * parse instead of the request stream — so a body a policy already read is never read twice
 * (the stream is consumed by then), and every later reader sees the same bytes.
 */

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'

/** What the reader needs of a request's state (request/context.ts RequestContext has it). */
export interface BodyContext {
  readonly req: IncomingMessage
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
   * request the caller refuses (413) — its connection can then carry the answer.
   */
  whenTooLarge: 'keep' | 'drain'
}

/**
 * `buffered`: `ctx.requestBody` holds the whole body (read now, or already by a policy).
 * `none`: the request has no body (or is an upgrade, whose bytes are the tunnel's).
 * `too-large`: more than `maxBytes`. An Error: the stream failed or the client left.
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
    const done = (value: BodyRead): void => {
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
    const onClose = (): void => { if (!req.complete) done(new Error('the client closed the connection')) }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}
