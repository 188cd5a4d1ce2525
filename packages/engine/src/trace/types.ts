/**
 * The trace event record (the seed's "Trace event record" table): one JSON object per SSE
 * `data:` frame and per line of `porticoctl proxy trace --raw`.
 */

export type TraceSeverity = 'info' | 'warn' | 'error'

export interface TraceEvent {
  /** Start of a span in µs since the request started; set only on timed events. */
  eventStart: number | null
  /** µs since the request started; non-decreasing along a trace. */
  eventEnd: number
  severity: TraceSeverity
  message: TraceMessage
}

export type TraceMessage = { type: string } & Record<string, unknown>

/** Stages of `requestSnapshot` / `responseSnapshot` / `bodySnapshot`, in pipeline order. */
export type SnapshotStage =
  | 'initial request'
  | 'gateway policies'
  | 'route policies'
  | 'final request'
  | 'raw response'
  | 'backend response ready'
  | 'final response'
  | 'response'
