/**
 * The event list's `Type` and `Summary` columns: a readable name per event type, and one line
 * per event (`GET /path`, `selected app (2 evaluated)`, `status=200`, ...). Shared by
 * `porticoctl proxy trace` and the web UI's trace viewer, so both say the same thing.
 */

import type { RequestState, ResponseState, TraceEvent, TraceEventType } from './events.ts'

const TYPE_LABELS: Partial<Record<TraceEventType, string>> = {
  requestStarted: 'Request Start',
  requestSnapshot: 'Snapshot',
  responseSnapshot: 'Snapshot',
  bodySnapshot: 'Snapshot',
  routeSelection: 'Route',
  policySelection: 'Policies',
  backendCallStart: 'Backend Start',
  backendCallResult: 'Backend Result',
  inferencePick: 'Inference Pick',
  modelSelection: 'Model',
  requestFinished: 'Request Done'
}

/** The label of an event type; a type this build does not know (a newer proxy's) shows as itself. */
export function typeLabel (type: string): string {
  return TYPE_LABELS[type as TraceEventType] ?? type
}

// Events come off the wire (a stream, a saved file): the `?.` below keep a malformed or
// partial snapshot from breaking the whole list.
function requestOf (event: TraceEvent | undefined): Partial<RequestState['request']> | undefined {
  return event?.message.type === 'requestSnapshot' ? event.message.requestState?.request : undefined
}

function responseOf (event: TraceEvent | undefined): Partial<ResponseState['response']> | undefined {
  return event?.message.type === 'responseSnapshot' ? event.message.requestState?.response : undefined
}

/** `1.23ms` from µs. */
export function formatMicros (us: number): string {
  return us >= 1_000_000 ? `${(us / 1_000_000).toFixed(2)}s` : `${(us / 1000).toFixed(2)}ms`
}

export function formatBytes (n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`
}

/** The body of a bodySnapshot, decoded from base64 (no Buffer: this also runs in browsers); empty for other events. */
export function bodyBytes (event: TraceEvent): Uint8Array {
  const text = event.message.type === 'bodySnapshot' && typeof event.message.body === 'string' ? event.message.body : ''
  let binary: string
  try {
    binary = atob(text)
  } catch {
    return new Uint8Array(0)
  }
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** The `Summary` cell of event `index` (some look at neighbours: a start shows the method and path). */
export function summarize (events: TraceEvent[], index: number): string {
  const event = events[index]
  if (event === undefined) return ''
  const m = event.message
  switch (m.type) {
    case 'requestStarted': {
      const initial = events.find(e => e.message.type === 'requestSnapshot' && e.message.stage === 'initial request')
      const req = requestOf(initial)
      const traceId = m.traceId !== undefined ? `  trace=${m.traceId}` : ''
      return req === undefined ? traceId.trimStart() : `${String(req.method)} ${String(req.pathAndQuery ?? req.path)}${req.host !== undefined ? `  host=${String(req.host)}` : ''}${traceId}`
    }
    case 'requestSnapshot': {
      const req = requestOf(event)
      return `request · ${String(m.stage)}${req === undefined ? '' : `  ${String(req.method)} ${String(req.pathAndQuery ?? req.path)}`}`
    }
    case 'responseSnapshot': {
      const res = responseOf(event)
      return `response · ${String(m.stage)}${res === undefined ? '' : `  status=${String(res.code)}`}`
    }
    case 'bodySnapshot':
      return `body · ${String(m.stage)}  ${formatBytes(bodyBytes(event).length)}${m.truncated === true ? ' (truncated)' : ''}`
    case 'routeSelection': {
      const evaluated = Array.isArray(m.evaluatedRoutes) ? m.evaluatedRoutes.length : 0
      return `${m.selectedRoute === null || m.selectedRoute === undefined ? 'no route matched' : `selected ${String(m.selectedRoute)}`} (${evaluated} evaluated)`
    }
    case 'policySelection': {
      const set = m.effectivePolicy ?? {}
      const active = Object.keys(set).filter(k => set[k] !== null && set[k] !== undefined)
      return `${String(m.phase)}: ${active.length === 0 ? 'none' : active.join(', ')}`
    }
    case 'backendCallStart':
      return `target=${String(m.target)}`
    case 'backendCallResult': {
      const took = event.eventStart === null ? '' : `  ${formatMicros(event.eventEnd - event.eventStart)}`
      return `status=${m.status === null || m.status === undefined ? '-' : String(m.status)}${m.error !== null && m.error !== undefined ? ` error=${String(m.error)}` : ''}${took}`
    }
    case 'connectionStarted':
      return `${m.protocol} connection from ${String(m.source?.address)}${m.serverName !== undefined ? `  sni=${m.serverName ?? '-'}` : ''}${m.mode !== undefined ? `  ${m.mode.toLowerCase()}` : ''}`
    case 'requestFinished': {
      if (m.stream !== undefined) return `${m.stream.reason}  received=${formatBytes(m.stream.bytesFromClient)} sent=${formatBytes(m.stream.bytesToClient)}  ${formatMicros(event.eventEnd)}`
      const final = [...events.slice(0, index)].reverse().find(e => e.message.type === 'responseSnapshot')
      const res = responseOf(final)
      return `${res === undefined ? 'no response' : `status=${String(res.code)}`}  ${formatMicros(event.eventEnd)}`
    }
    case 'inferencePick': {
      // What a user debugging a pool asks first: which pod, chosen by whom, how fast, and
      // what the picker named that the gateway would not connect to.
      const where = `pool=${m.pool} picker=${m.picker}`
      const refused = m.refused !== undefined && m.refused.length > 0 ? `  refused=${m.refused.join(',')}` : ''
      const took = m.latencyMs !== undefined ? `  ${m.latencyMs.toFixed(2)}ms` : ''
      switch (m.outcome) {
        case 'picked': return `picked ${String(m.endpoint)}${m.endpoints !== undefined && m.endpoints.length > 1 ? ` (then ${m.endpoints.slice(1).join(',')})` : ''}  ${where}${took}${refused}`
        case 'fallback': return `fallback ${String(m.from)} → ${String(m.endpoint)}${m.reason !== undefined ? `: ${m.reason}` : ''}  ${where}`
        case 'immediate': return `picker answered status=${String(m.status)}  ${where}${took}`
        case 'failOpen': return `picker failed, gateway chose ${String(m.endpoint)}${m.reason !== undefined ? `: ${m.reason}` : ''}  ${where}${took}`
        case 'failClose': return `picker failed, 503${m.reason !== undefined ? `: ${m.reason}` : ''}  ${where}${took}${refused}`
      }
      return where
    }
    case 'modelSelection':
      return `${m.requestModel === '' ? '(no model)' : m.requestModel} → ${m.model}${m.why.length > 0 ? `  ${m.why.join('; ')}` : ''}`
    default: {
      // Every other type (policy decisions, retries, LLM and MCP events, and types a newer
      // proxy sends): its fields as key=value.
      const rest = Object.entries(m as Record<string, unknown>).filter(([k]) => k !== 'type').map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      return rest.join(' ')
    }
  }
}
