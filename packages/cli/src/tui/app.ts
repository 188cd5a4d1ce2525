/**
 * The trace TUI (ink + React, written with createElement since Node runs .ts without JSX):
 * a status line, the event list (`#`, `Type`, `Summary`, rows coloured by severity), the
 * detail pane, and a key-help line.
 *
 * Keys: tab switches pane; ↑/↓ (and PgUp/PgDn, Home/End) move the selection in the list or
 * scroll the detail pane; enter opens the detail pane; e/s/d pick the detail mode (raw event,
 * snapshot, diff against the previous stage); q (or Esc, Ctrl-C) quits.
 */

import React, { useEffect, useState } from 'react'
import { Box, Text, useApp, useInput, useWindowSize } from 'ink'
import type { TraceEvent } from '../trace/events.ts'
import { detailLines, type DetailLine, type DetailMode } from '../trace/detail.ts'
import { typeLabel } from '../trace/summary.ts'
import type { TraceStore, TraceViewState } from './store.ts'
import { listHeader, listRow, paneSizes, windowStart } from './layout.ts'

const h = React.createElement

export type Pane = 'list' | 'detail'

const MODES: Array<[key: string, mode: DetailMode, label: string]> = [
  ['e', 'event', 'event'],
  ['s', 'snapshot', 'snapshot'],
  ['d', 'diff', 'diff']
]

function severityColor (event: TraceEvent): string | undefined {
  return event.severity === 'error' ? 'red' : event.severity === 'warn' ? 'yellow' : undefined
}

function EventList (props: { events: TraceEvent[], selected: number, rows: number, focused: boolean, width: number }) {
  const { events, selected, rows, focused } = props
  const start = windowStart(events.length, rows, selected)
  const shown = events.slice(start, start + rows)
  const title = `${focused ? '▸ ' : '  '}Events (${events.length})${events.length > rows ? `  ${start + 1}-${start + shown.length}` : ''}`
  const children = [
    h(Text, { key: 'title', bold: focused, color: focused ? 'cyan' : undefined, wrap: 'truncate-end' }, title),
    h(Text, { key: 'header', bold: true, wrap: 'truncate-end' }, listHeader())
  ]
  if (shown.length === 0) children.push(h(Text, { key: 'empty', color: 'gray' }, '   (no events yet)'))
  shown.forEach((event, i) => {
    const index = start + i
    children.push(h(Text, { key: `row${index}`, color: severityColor(event), inverse: index === selected, wrap: 'truncate-end' }, listRow(events, index, index === selected)))
  })
  return h(Box, { flexDirection: 'column', borderStyle: 'round', borderColor: focused ? 'cyan' : 'gray', width: props.width, height: rows + 4, flexShrink: 0 }, ...children)
}

function DetailPane (props: { events: TraceEvent[], selected: number, mode: DetailMode, lines: DetailLine[], scroll: number, rows: number, focused: boolean, width: number }) {
  const { lines, scroll, rows, focused, events, selected } = props
  const event = events[selected]
  const shown = lines.slice(scroll, scroll + rows)
  const modes = MODES.map(([key, mode, label]) => mode === props.mode ? `[${key}] ${label.toUpperCase()}` : `[${key}] ${label}`).join('  ')
  const where = lines.length > rows ? `  lines ${scroll + 1}-${scroll + shown.length} of ${lines.length}` : ''
  const title = `${focused ? '▸ ' : '  '}Detail${event === undefined ? '' : ` #${selected + 1} ${typeLabel(event.message.type)}`} · mode: ${modes}${where}`
  return h(Box, { flexDirection: 'column', borderStyle: 'round', borderColor: focused ? 'cyan' : 'gray', width: props.width, height: rows + 3, flexShrink: 0 },
    h(Text, { key: 'title', bold: focused, color: focused ? 'cyan' : undefined, wrap: 'truncate-end' }, title),
    ...shown.map((line, i) => h(Text, { key: `l${scroll + i}`, color: line.color, wrap: 'truncate-end' }, line.text === '' ? ' ' : line.text))
  )
}

export interface TraceAppProps {
  store: TraceStore
  /** Called when the user quits. */
  onQuit?: () => void
}

export function TraceApp (props: TraceAppProps) {
  const { store } = props
  const [state, setState] = useState<TraceViewState>(store.get())
  useEffect(() => store.subscribe(setState), [store])
  const [selected, setSelected] = useState(0)
  const [pane, setPane] = useState<Pane>('list')
  const [mode, setMode] = useState<DetailMode>('event')
  const [scroll, setScroll] = useState(0)
  const { exit } = useApp()
  const { columns, rows } = useWindowSize()

  const events = state.events
  const sizes = paneSizes(rows, events.length)
  const current = Math.min(selected, Math.max(0, events.length - 1))
  const lines = events.length === 0 ? [] : detailLines(events, current, mode)
  const maxScroll = Math.max(0, lines.length - sizes.detailRows)
  const top = Math.min(scroll, maxScroll)

  useInput((input, key) => {
    if (input === 'q' || key.escape) {
      props.onQuit?.()
      exit()
      return
    }
    if (key.tab) {
      setPane(p => p === 'list' ? 'detail' : 'list')
      return
    }
    if (key.return && pane === 'list') {
      setPane('detail')
      return
    }
    const picked = MODES.find(([k]) => k === input)
    if (picked !== undefined) {
      setMode(picked[1])
      setScroll(0)
      return
    }
    const page = pane === 'list' ? sizes.listRows : sizes.detailRows
    let delta = 0
    if (key.upArrow || input === 'k') delta = -1
    else if (key.downArrow || input === 'j') delta = 1
    else if (key.pageUp) delta = -page
    else if (key.pageDown || input === ' ') delta = page
    else if (key.home || input === 'g') delta = -Infinity
    else if (key.end || input === 'G') delta = Infinity
    if (delta === 0) return
    // Functional updates: several keys can arrive in one chunk, before the next render.
    const clamp = (value: number, max: number) => Math.max(0, Math.min(max, Number.isFinite(value) ? value : value > 0 ? max : 0))
    if (pane === 'list') {
      const last = Math.max(0, events.length - 1)
      setSelected(s => clamp(Math.min(s, last) + delta, last))
      setScroll(0)
    } else {
      setScroll(s => clamp(Math.min(s, maxScroll) + delta, maxScroll))
    }
  })

  const width = Math.max(20, columns)
  const help = 'tab: switch pane  ↑/↓ PgUp/PgDn: move/scroll  enter: detail  e: event  s: snapshot  d: diff  q: quit'
  return h(Box, { flexDirection: 'column', width },
    h(Text, { key: 'status', wrap: 'truncate-end', color: state.complete ? 'green' : 'yellow' }, `porticoctl trace · ${state.status}`),
    h(EventList, { key: 'list', events, selected: current, rows: sizes.listRows, focused: pane === 'list', width }),
    h(DetailPane, { key: 'detail', events, selected: current, mode, lines, scroll: top, rows: sizes.detailRows, focused: pane === 'detail', width }),
    h(Text, { key: 'help', color: 'gray', wrap: 'truncate-end' }, help)
  )
}
