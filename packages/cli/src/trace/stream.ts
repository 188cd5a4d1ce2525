/**
 * The `/debug/trace` client: arms a trace (POST with filters), waits for the `: ready`
 * comment, then hands over each event until `requestFinished` ends the stream.
 */

import { request } from 'undici'
import { createParser } from 'eventsource-parser'
import { adminUrl, isUnreachable } from '../admin/client.ts'
import { cliError } from '../errors.ts'
import type { Instance } from '../targets/types.ts'
import { checkEvent, type TraceEvent } from './events.ts'

export interface TraceFilter {
  path?: string
  route?: string
  method?: string
  host?: string
  /** `name:value`. */
  header?: string
}

export interface TraceStreamOptions {
  instance: Instance
  filter: TraceFilter
  onEvent: (event: TraceEvent) => void
  /** The stream fails when no byte (not even a keep-alive) came for this long. */
  stallMs?: number
}

export interface TraceStream {
  /** Resolves when the tap is armed. */
  ready: Promise<void>
  /** Resolves after `requestFinished`; rejects when the stream breaks or ends early. */
  finished: Promise<void>
  /** Events so far. */
  readonly count: number
  /** Stops listening (disarms the tap on the proxy). */
  close(): void
}

export async function openTraceStream (options: TraceStreamOptions): Promise<TraceStream> {
  const { instance } = options
  const controller = new AbortController()
  let res
  try {
    res = await request(adminUrl(instance, { path: '/debug/trace', query: { ...options.filter } }), {
      method: 'POST',
      signal: controller.signal,
      headersTimeout: 30_000,
      bodyTimeout: options.stallMs ?? 30_000
    })
  } catch (err) {
    if (isUnreachable(err)) throw cliError('PORTICOCTL_ADMIN_UNREACHABLE', instance.unreachable, err)
    throw err
  }
  if (res.statusCode !== 200) {
    const text = (await res.body.text()).trim()
    if (res.statusCode === 400) throw cliError('PORTICOCTL_USAGE', `the proxy refused the trace filter: ${text}`)
    throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: POST /debug/trace answered ${res.statusCode}: ${text}`)
  }

  let count = 0
  let done = false
  let closedByUs = false
  let onReady!: () => void
  const ready = new Promise<void>(resolve => { onReady = resolve })
  let parseError: Error | null = null
  const parser = createParser({
    onComment: comment => {
      if (comment.trim() === 'ready') onReady()
    },
    onEvent: message => {
      if (done || parseError !== null) return
      let value: unknown
      try {
        value = JSON.parse(message.data)
      } catch {
        parseError = cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: a trace frame is not JSON: ${message.data.slice(0, 200)}`)
        return
      }
      const event = checkEvent(value)
      if (typeof event === 'string') {
        parseError = cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: a trace frame is not an event (${event})`)
        return
      }
      count++
      options.onEvent(event)
      if (event.message.type === 'requestFinished') done = true
    }
  })
  const body = res.body
  const finished = (async () => {
    try {
      for await (const chunk of body) {
        parser.feed(Buffer.from(chunk as Uint8Array).toString('utf8'))
        if (parseError !== null) throw parseError
        if (done) break
      }
    } catch (err) {
      if (closedByUs) return
      if (parseError !== null) throw parseError
      const code = (err as { code?: string }).code
      if (code === 'UND_ERR_BODY_TIMEOUT') throw cliError('PORTICOCTL_TRACE_ENDED', `the trace stream from ${instance.label} stalled (no keep-alive for ${Math.round((options.stallMs ?? 30_000) / 1000)}s)`, err)
      throw cliError('PORTICOCTL_TRACE_ENDED', `the trace stream from ${instance.label} broke: ${(err as Error).message}`, err)
    } finally {
      onReady()
      if (done) controller.abort()
    }
    if (!done && !closedByUs) throw cliError('PORTICOCTL_TRACE_ENDED', `the trace stream from ${instance.label} ended before the request finished (did the proxy restart?)`)
  })()
  finished.catch(() => {})
  return {
    ready,
    finished,
    get count () { return count },
    close: () => {
      if (done) return
      closedByUs = true
      controller.abort()
    }
  }
}
