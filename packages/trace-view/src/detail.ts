/**
 * The detail pane's text for one event, in three modes:
 * - `event`: the raw event record (pretty JSON);
 * - `snapshot`: the request/response state (YAML) of a snapshot event, the decoded body of a
 *   body snapshot, or for other events the latest snapshot at that point;
 * - `diff`: a unified diff (the `diff` package) of that snapshot against the previous one of
 *   the same kind (request against request, response against response).
 */

import { createTwoFilesPatch } from 'diff'
import { stringify } from 'yaml'
import type { BodySnapshotEvent, RequestSnapshotEvent, ResponseSnapshotEvent, TraceEvent } from './events.ts'
import { bodyBytes, formatBytes } from './summary.ts'

export type DetailMode = 'event' | 'snapshot' | 'diff'

export type LineColor = 'green' | 'red' | 'cyan' | 'gray' | 'yellow'

export interface DetailLine {
  text: string
  color?: LineColor
}

/** An event whose message is `M`: what `snapshotFor` finds, narrowed by `message.type`. */
export type EventOf<M> = Omit<TraceEvent, 'message'> & { message: M }

/** A request or response snapshot: the events that carry a `requestState`. */
export type StateSnapshot = EventOf<RequestSnapshotEvent | ResponseSnapshotEvent>

export type Snapshot = StateSnapshot | EventOf<BodySnapshotEvent>

function isStateSnapshot (e: TraceEvent): e is StateSnapshot {
  return e.message.type === 'requestSnapshot' || e.message.type === 'responseSnapshot'
}

function isBodySnapshot (e: TraceEvent): e is EventOf<BodySnapshotEvent> {
  return e.message.type === 'bodySnapshot'
}

/** The snapshot shown for event `index`: itself if it is one, else the latest before it. */
export function snapshotFor (events: TraceEvent[], index: number): { index: number, event: Snapshot } | null {
  for (let i = Math.min(index, events.length - 1); i >= 0; i--) {
    const e = events[i]!
    if (isStateSnapshot(e) || (i === index && isBodySnapshot(e))) return { index: i, event: e }
  }
  return null
}

/** The previous snapshot of the same type as events[index]. */
export function previousSnapshot (events: TraceEvent[], index: number): { index: number, event: TraceEvent } | null {
  const type = events[index]?.message.type
  for (let i = index - 1; i >= 0; i--) {
    if (events[i]!.message.type === type) return { index: i, event: events[i]! }
  }
  return null
}

/** The `requestState` of a request or response snapshot as YAML (`null` for other events). */
export function stateText (event: TraceEvent): string {
  return stringify(isStateSnapshot(event) ? event.message.requestState ?? null : null, { lineWidth: 0 })
}

/** The `stage` of a snapshot event, as text. */
function stageOf (event: TraceEvent): string {
  return 'stage' in event.message ? String(event.message.stage) : String(undefined)
}

function kindOf (event: StateSnapshot): 'request' | 'response' {
  return event.message.type === 'requestSnapshot' ? 'request' : 'response'
}

function plain (text: string, color?: LineColor): DetailLine[] {
  return text.replace(/\n$/, '').split('\n').map(t => color === undefined ? { text: t } : { text: t, color })
}

/** A body as text when it is UTF-8, else a note and a hex dump of the first bytes. */
export function bodyLines (event: TraceEvent): DetailLine[] {
  const bytes = bodyBytes(event)
  const m = event.message
  const truncated = m.type === 'bodySnapshot' && m.truncated === true
  const head: DetailLine = { text: `body · ${stageOf(event)} · ${formatBytes(bytes.length)}${truncated ? ' (truncated: only the first bytes are captured)' : ''}`, color: 'cyan' }
  if (bytes.length === 0) return [head, { text: '(empty)', color: 'gray' }]
  let text: string | null
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    if (/[\x00-\x08\x0e-\x1f]/.test(text)) text = null
  } catch {
    text = null
  }
  if (text !== null) return [head, ...plain(text)]
  const shown = bytes.subarray(0, 512)
  const lines: DetailLine[] = [head, { text: `binary (not UTF-8); hex of the first ${shown.length} bytes:`, color: 'gray' }]
  for (let i = 0; i < shown.length; i += 16) {
    const row = shown.subarray(i, i + 16)
    lines.push({ text: `${i.toString(16).padStart(6, '0')}  ${[...row].map(b => b.toString(16).padStart(2, '0')).join(' ')}` })
  }
  return lines
}

function snapshotLines (events: TraceEvent[], index: number): DetailLine[] {
  const found = snapshotFor(events, index)
  if (found === null) return [{ text: '(no snapshot yet at this event)', color: 'gray' }]
  if (!isStateSnapshot(found.event)) return bodyLines(found.event)
  const asOf = found.index === index ? '' : ` (the latest snapshot at event #${index + 1}: #${found.index + 1})`
  return [{ text: `${kindOf(found.event)} snapshot · ${stageOf(found.event)}${asOf}`, color: 'cyan' }, ...plain(stateText(found.event))]
}

/** Unified diff lines of two texts, coloured. */
export function unifiedDiff (oldName: string, newName: string, oldText: string, newText: string): DetailLine[] {
  const patch = createTwoFilesPatch(oldName, newName, oldText, newText, undefined, undefined, { context: 3 })
  const lines = patch.replace(/\n$/, '').split('\n').filter(l => !l.startsWith('=') && !l.startsWith('\\ No newline'))
  return lines.map(text => {
    if (text.startsWith('+++') || text.startsWith('---')) return { text, color: 'yellow' as const }
    if (text.startsWith('+')) return { text, color: 'green' as const }
    if (text.startsWith('-')) return { text, color: 'red' as const }
    if (text.startsWith('@@')) return { text, color: 'cyan' as const }
    return { text }
  })
}

function diffLines (events: TraceEvent[], index: number): DetailLine[] {
  const found = snapshotFor(events, index)
  if (found === null) return [{ text: '(no snapshot yet at this event)', color: 'gray' }]
  const current = found.event
  if (!isStateSnapshot(current)) return [{ text: '(bodies are not diffed; press s to see this one)', color: 'gray' }]
  const kind = kindOf(current)
  const prev = previousSnapshot(events, found.index)
  const title: DetailLine = { text: `${kind} snapshot · ${stageOf(current)} (#${found.index + 1}) against ${prev === null ? 'nothing' : `${stageOf(prev.event)} (#${prev.index + 1})`}`, color: 'cyan' }
  if (prev === null) return [title, { text: `(the first ${kind} snapshot: nothing to compare; press s to see it)`, color: 'gray' }]
  const before = stateText(prev.event)
  const after = stateText(current)
  if (before === after) return [title, { text: `(no change since ${stageOf(prev.event)})`, color: 'gray' }]
  return [title, ...unifiedDiff(stageOf(prev.event), stageOf(current), before, after)]
}

export function detailLines (events: TraceEvent[], index: number, mode: DetailMode): DetailLine[] {
  const event = events[index]
  if (event === undefined) return [{ text: '(no event)', color: 'gray' }]
  switch (mode) {
    case 'event': return plain(JSON.stringify(event, null, 2))
    case 'snapshot': return snapshotLines(events, index)
    case 'diff': return diffLines(events, index)
  }
}
