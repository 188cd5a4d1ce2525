/** One backend call through a pool's dispatch interface, collected whole (for tests). */

import type { Dispatcher } from 'undici'
import type { UpstreamCaller } from '../../src/http/dispatcher.ts'

export interface Answer {
  status: number
  headers: Record<string, string | string[]>
  body: string
  trailers: Record<string, string | string[]>
}

export function collect (pool: UpstreamCaller, options: Partial<Dispatcher.DispatchOptions> = {}, onStart?: (c: Dispatcher.DispatchController) => void): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let status = 0
    let headers = {}
    const chunks: Buffer[] = []
    pool.dispatch({ method: 'GET', path: '/', headers: {}, ...options } as Dispatcher.DispatchOptions, {
      onRequestStart: c => onStart?.(c),
      onResponseStart: (_c, s, h) => { status = s; headers = h },
      onResponseData: (_c, chunk) => { chunks.push(chunk) },
      onResponseEnd: (_c, trailers) => resolve({ status, headers: headers as Answer['headers'], body: Buffer.concat(chunks).toString(), trailers: trailers as Answer['trailers'] }),
      onResponseError: (_c, err) => reject(err)
    })
  })
}
