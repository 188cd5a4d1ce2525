/**
 * The trace's copies of a proxied request's bodies ("final request" and "response" body
 * snapshots). Only traced requests pay for them: the backend call adds these pass-throughs
 * when `ctx.tracer` is set, and each keeps only the first `limit` bytes.
 */

import { Transform, type Readable } from 'node:stream'
import type { Dispatcher } from 'undici'
import type { InboundRequest } from './inbound.ts'
import type { TraceRecorder } from '../trace/recorder.ts'
import { BodyTap } from '../trace/snapshot.ts'
import { WrappingHandler } from './wrapping-handler.ts'

/** The request body as sent upstream, through a pass-through that keeps its first bytes. */
export function tracedRequestBody (ctx: { readonly tracer: TraceRecorder | null }, req: InboundRequest, limit: number): Readable {
  const tap = new BodyTap(limit)
  const tee = new Transform({
    transform (chunk: Buffer, _enc, done) {
      tap.push(chunk)
      done(null, chunk)
    },
    flush (done) {
      if (!tap.empty) ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'final request', body: tap.toBase64(), truncated: tap.truncated })
      done()
    }
  })
  req.on('error', err => tee.destroy(err))
  return req.pipe(tee)
}

interface TracedContext {
  readonly tracer: TraceRecorder | null
  readonly res: { readonly destroyed: boolean }
  readonly responseBody: Buffer | null
}

/** Wraps a call's handler: the response body the client gets, first bytes, as a snapshot at its end. */
export class TraceResponseBody extends WrappingHandler {
  private readonly ctx: TracedContext
  private readonly limit: number
  private tap: BodyTap | null = null

  constructor (inner: Dispatcher.DispatchHandler, ctx: TracedContext, limit: number) {
    super(inner)
    this.ctx = ctx
    this.limit = limit
  }

  override onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    super.onResponseStart(c, statusCode, headers, statusMessage)
    // Only an answer the client gets has a body to show (the client may have left; the head
    // itself is written with the first body byte, http/client-response.ts).
    if (this.ctx.res.destroyed) return
    this.tap = new BodyTap(this.limit)
    // A response policy replaced the body (transformation): that is what the client gets.
    if (this.ctx.responseBody !== null) this.tap.push(this.ctx.responseBody)
  }

  override onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.tap !== null && this.ctx.responseBody === null) this.tap.push(chunk)
    super.onResponseData(c, chunk)
  }

  override onResponseEnd (c: Dispatcher.DispatchController, trailers: Record<string, string | string[] | undefined>): void {
    const tap = this.tap
    if (tap !== null && !tap.empty) this.ctx.tracer?.emit({ type: 'bodySnapshot', stage: 'response', body: tap.toBase64(), truncated: tap.truncated })
    super.onResponseEnd(c, trailers)
  }
}
