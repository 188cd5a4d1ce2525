/**
 * One live trace: connect to the target, arm `/debug/trace`, and either wait for the next
 * request (watch mode) or send the request ourselves, tagged with a unique header so the
 * trace catches exactly that one (inject mode). Events go to a sink as they arrive.
 */

import { randomUUID } from 'node:crypto'
import { cliError } from '../errors.ts'
import type { Target } from '../targets/types.ts'
import type { CurlRequest } from './curl-args.ts'
import type { TraceEvent } from './events.ts'
import { sendRequest } from './send.ts'
import { openTraceStream, type TraceFilter } from './stream.ts'

export const TRACE_TAG_HEADER = 'x-porticoctl-trace'

/** Where inject mode's listener port came from. */
export type PortSource = '--port' | 'the URL' | 'the default'

/** How long after the response inject mode waits for the trace's first event. */
export const UNTRACED_GRACE_MS = 2000

export interface TraceSink {
  event(event: TraceEvent): void
  /** A one-line status for people (the TUI's status line; ignored by --raw). */
  status(text: string): void
}

export interface TraceSessionOptions {
  target: Target
  /** Inject mode's request; null for watch mode. */
  inject: CurlRequest | null
  /** Listener port inject mode sends to, and who chose it (for the error when nothing listens there). */
  port: number
  portFrom: PortSource
  /** Extra filters for watch mode (`--path`, `--route`). */
  filter: TraceFilter
  /** Give up after this long without the request finishing; null waits forever. */
  timeoutMs: number | null
  sink: TraceSink
  /** Where `-v` writes. */
  verboseOut?: NodeJS.WritableStream
  /** Aborting ends the session quietly (the TUI quit). */
  signal?: AbortSignal
}

function formatMs (ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

export async function runTraceSession (options: TraceSessionOptions): Promise<void> {
  const { sink } = options
  const connection = await options.target.connect({ all: false })
  let timer: NodeJS.Timeout | undefined
  let stream: Awaited<ReturnType<typeof openTraceStream>> | null = null
  try {
    const instance = connection.instances[0]!
    const tag = randomUUID()
    const filter: TraceFilter = { ...options.filter }
    if (options.inject !== null) filter.header = `${TRACE_TAG_HEADER}:${tag}`
    stream = await openTraceStream({ instance, filter, onEvent: e => sink.event(e) })
    const s = stream
    const aborted = new Promise<void>(resolve => {
      if (options.signal?.aborted === true) resolve()
      options.signal?.addEventListener('abort', () => resolve(), { once: true })
    })
    const timedOut = new Promise<never>((_resolve, reject) => {
      if (options.timeoutMs === null) return
      const ms = options.timeoutMs
      timer = setTimeout(() => {
        const why = s.count === 0 ? 'no matching request reached the proxy' : `the request did not finish (${s.count} events so far)`
        reject(cliError('PORTICOCTL_TRACE_TIMEOUT', `trace timed out after ${formatMs(ms)}: ${why}`))
      }, ms)
    })
    timedOut.catch(() => {})
    await Promise.race([s.ready, s.finished, timedOut, aborted])
    if (options.signal?.aborted === true) return
    if (options.inject === null) {
      const what = [filter.path !== undefined ? `path ${filter.path}` : '', filter.route !== undefined ? `route ${filter.route}` : ''].filter(x => x !== '').join(', ')
      sink.status(`watching ${instance.label}: waiting for the next request${what === '' ? ' from any client' : ` (${what})`}…`)
    } else {
      const req = options.inject
      const to = await instance.reach(options.port)
      sink.status(`sending ${req.method} ${req.url.href} to port ${options.port}…`)
      const sent = sendRequest({ request: req, to, tag: [TRACE_TAG_HEADER, tag], verboseOut: options.verboseOut, portHint: portHint(options) })
      sent.then(r => sink.status(`sent ${req.method} ${req.url.href} → ${r.status}`), () => {})
      // The response is complete but the proxy traced nothing: the request went elsewhere
      // (--port is another process's port). Say so instead of waiting for the timeout.
      const untraced = sent.then(async r => {
        await new Promise(resolve => setTimeout(resolve, UNTRACED_GRACE_MS).unref())
        if (s.count === 0) {
          throw cliError('PORTICOCTL_TRACE_TIMEOUT', `port ${options.port} answered ${r.status}, but the proxy at ${instance.label} traced no request: ${portHint(options)}`)
        }
        return await new Promise<never>(() => {})
      })
      untraced.catch(() => {})
      // A failed send fails the session at once; otherwise both the response and the trace end it.
      await Promise.race([Promise.all([sent, s.finished]), untraced, timedOut, aborted])
      return
    }
    await Promise.race([s.finished, timedOut, aborted])
  } finally {
    clearTimeout(timer)
    stream?.close()
    await connection.close()
  }
}

/** What to say when the chosen port is not one of the proxy's listeners. */
function portHint (options: { port: number, portFrom: PortSource }): string {
  if (options.portFrom === '--port') return `is --port ${options.port} a listener port of this proxy?`
  return `is ${options.port} (${options.portFrom === 'the URL' ? 'the URL\'s port' : 'the default, the quick start\'s'}) a listener port of this proxy? --port names another`
}
