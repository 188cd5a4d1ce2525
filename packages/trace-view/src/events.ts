/**
 * The trace event record, as `/debug/trace` streams it and `porticoctl proxy trace --raw`
 * saves it. The same shape as `TraceEvent` of @portico/engine, written out here so this
 * package (and the browser bundle that uses it) does not import the engine.
 */

export type TraceSeverity = 'info' | 'warn' | 'error'

export interface TraceEvent {
  /** Start of a span in µs since the request started; set only on timed events. */
  eventStart: number | null
  /** µs since the request started. */
  eventEnd: number
  severity: TraceSeverity
  message: { type: string } & Record<string, unknown>
}
