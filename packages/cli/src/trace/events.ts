/**
 * Trace events as porticoctl reads them (the proxy's `/debug/trace` records) and the
 * `--raw` format: JSON Lines, one event record per line, which `-f FILE` reads back.
 */

import type { TraceEvent } from '@portico/engine/trace-events'
import { cliError } from '../errors.ts'

export type { TraceEvent }

/** The event shape, or a reason it is not one. */
export function checkEvent (value: unknown): TraceEvent | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object'
  const e = value as Record<string, unknown>
  const message = e.message as Record<string, unknown> | undefined
  if (typeof message !== 'object' || message === null || typeof message.type !== 'string') return 'no message.type'
  if (typeof e.eventEnd !== 'number') return 'no eventEnd'
  if (e.severity !== 'info' && e.severity !== 'warn' && e.severity !== 'error') return 'severity is not info, warn or error'
  return value as TraceEvent
}

/** One `--raw` line (no newline). */
export function rawLine (event: TraceEvent): string {
  return JSON.stringify(event)
}

/** Reads a saved `--raw` trace; blank lines are skipped, anything else must be an event. */
export function parseRawTrace (text: string, file: string): TraceEvent[] {
  const events: TraceEvent[] = []
  const lines = text.split('\n')
  lines.forEach((line, i) => {
    if (line.trim() === '') return
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      throw cliError('PORTICOCTL_TRACE_FILE', `${file}:${i + 1}: not JSON (a --raw trace has one event per line)`)
    }
    const event = checkEvent(value)
    if (typeof event === 'string') throw cliError('PORTICOCTL_TRACE_FILE', `${file}:${i + 1}: not a trace event: ${event}`)
    events.push(event)
  })
  if (events.length === 0) throw cliError('PORTICOCTL_TRACE_FILE', `${file}: no trace events`)
  return events
}
