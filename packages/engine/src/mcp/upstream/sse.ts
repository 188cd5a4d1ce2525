/**
 * The legacy HTTP+SSE transport to a target (revision 2024-11-05): the SDK's client
 * transport, with the target's message cap put into the fetch it reads through. Past the
 * cap the connection is dropped, as a crash (a new one is a new upstream session), and
 * `fault` says why.
 */

import type { SSEClientTransport, SSEClientTransportOptions } from '@modelcontextprotocol/sdk/client/sse.js'
import { lazyRequire } from '../../util/lazy-require.ts'
import { limitedFetch } from '../protocol/message-limits.ts'
import type { UpstreamTransport } from './transport.ts'

/** A legacy SSE client transport that says why it closed itself (an oversized event). */
export type SseTargetTransport = SSEClientTransport & UpstreamTransport & { kind: 'sse', fault: string | null }

const sdkSse = lazyRequire<typeof import('@modelcontextprotocol/sdk/client/sse.js')>('@modelcontextprotocol/sdk/client/sse.js')
/** The class, made when the first SSE target connects (the SDK's SSE client loads zod). */
let LimitedSse: (new (url: URL, options: SSEClientTransportOptions) => SseTargetTransport) | undefined

/** A transport to the SSE target at `url`, no event or answer past `maxMessageBytes`. */
export function openSseTransport (url: URL, maxMessageBytes: number): SseTargetTransport {
  LimitedSse ??= class extends sdkSse().SSEClientTransport {
    readonly kind = 'sse' as const
    fault: string | null = null
  }
  const fetch = limitedFetch(maxMessageBytes, err => {
    if (transport.fault !== null) return
    transport.fault = err.message
    transport.onerror?.(err)
    void transport.close().catch(() => {})
  })
  const transport: SseTargetTransport = new LimitedSse(url, { eventSourceInit: { fetch }, fetch })
  return transport
}
