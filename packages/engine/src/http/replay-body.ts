/**
 * Reading a request body whole, up to a limit, so it can be sent more than once (retries,
 * mirrors) or handed to a service (external processing). The body ends up in
 * `ctx.requestBody`, which the backend call sends instead of reading the request stream.
 *
 * Past the limit the bytes read so far are put back (`unshift`) and the stream is left as it
 * was, so the backend call can still stream the whole body — or, with `drain`, the rest is
 * discarded (the request is being refused).
 */

import type { RequestContext } from '../pipeline/context.ts'
import { requestHasBody } from './upstream-call.ts'

/** Largest body buffered so a request can be retried or mirrored. */
export const REPLAY_BODY_LIMIT = 1024 * 1024

export type BodyRead = 'buffered' | 'none' | 'too-large' | Error

/**
 * Makes sure `ctx.requestBody` holds the whole body: 'buffered' (now or already), 'none'
 * (the request has no body), 'too-large' (more than `limit`; the stream is intact unless
 * `drain`), or the stream's error.
 */
export async function bufferRequestBody (ctx: RequestContext, limit: number, options: { drain?: boolean } = {}): Promise<BodyRead> {
  if (ctx.requestBody !== null) return ctx.requestBody.length > limit ? 'too-large' : 'buffered'
  const { req } = ctx
  if (ctx.upgrade !== null || !requestHasBody(req.headers)) return 'none'
  const declared = Number(req.headers['content-length'] ?? NaN)
  if (declared > limit) {
    if (options.drain === true) req.resume()
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
      if (options.drain === true) {
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
