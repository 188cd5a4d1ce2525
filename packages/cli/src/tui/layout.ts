/**
 * Sizes and rows of the trace TUI, as plain functions (unit-tested without a terminal).
 * The screen, top to bottom: a status line, the event list (a bordered box with a header
 * row), the detail pane (a bordered box with a title row) and a key-help line.
 */

import type { TraceEvent } from '../trace/events.ts'
import { summarize, typeLabel } from '../trace/summary.ts'

export const TYPE_WIDTH = 14
export const INDEX_WIDTH = 3

export interface PaneSizes {
  /** Event rows visible in the list. */
  listRows: number
  /** Text rows visible in the detail pane. */
  detailRows: number
}

/** Fits both panes into `rows` terminal rows (one row is kept free so nothing scrolls). */
export function paneSizes (rows: number, events: number): PaneSizes {
  const fixed = 1 + 3 + 3 + 1 + 1 // status, list borders + header, detail borders + title, help, spare
  const room = Math.max(4, rows - fixed)
  const listRows = Math.max(1, Math.min(Math.max(events, 1), Math.max(3, Math.floor(room * 0.4))))
  return { listRows, detailRows: Math.max(1, room - listRows) }
}

/** First visible row of a list of `count` rows showing `visible` with `selected` in view. */
export function windowStart (count: number, visible: number, selected: number): number {
  if (count <= visible) return 0
  return Math.max(0, Math.min(selected - Math.floor(visible / 2), count - visible))
}

export function listHeader (): string {
  return ` ${'#'.padStart(INDEX_WIDTH)}  ${'Type'.padEnd(TYPE_WIDTH)}  Summary`
}

/** One list row; the selected one starts with `›` (also visible without colours). */
export function listRow (events: TraceEvent[], index: number, selected: boolean): string {
  return `${selected ? '›' : ' '}${String(index + 1).padStart(INDEX_WIDTH)}  ${typeLabel(events[index]!.message.type).padEnd(TYPE_WIDTH)}  ${summarize(events, index)}`
}
