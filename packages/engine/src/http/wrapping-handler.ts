/**
 * The base of the optional handlers a backend call composes (undici's DecoratorHandler
 * idea): every callback passes straight to the wrapped handler, so a wrapper overrides only
 * the callbacks it watches and calls `super` to pass them on.
 */

import type { Dispatcher } from 'undici'
import type { Duplex } from 'node:stream'

type Headers = Record<string, string | string[] | undefined>

export class WrappingHandler implements Dispatcher.DispatchHandler {
  protected readonly inner: Dispatcher.DispatchHandler

  constructor (inner: Dispatcher.DispatchHandler) {
    this.inner = inner
  }

  onRequestStart (c: Dispatcher.DispatchController, context: unknown): void {
    this.inner.onRequestStart?.(c, context)
  }

  onRequestUpgrade (c: Dispatcher.DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.inner.onRequestUpgrade?.(c, statusCode, headers, socket)
  }

  onResponseStart (c: Dispatcher.DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.inner.onResponseStart?.(c, statusCode, headers, statusMessage)
  }

  onResponseData (c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.inner.onResponseData?.(c, chunk)
  }

  onResponseEnd (c: Dispatcher.DispatchController, trailers: Headers): void {
    this.inner.onResponseEnd?.(c, trailers)
  }

  onResponseError (c: Dispatcher.DispatchController, err: Error): void {
    this.inner.onResponseError?.(c, err)
  }
}
