import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TraceEvent } from '@portico/engine'
import { bodyLines, detailLines, previousSnapshot, snapshotFor, unifiedDiff } from '../src/trace/detail.ts'
import { fixtureEvents } from './fixtures.ts'

const events = fixtureEvents('get-200.jsonl')
const text = (lines: Array<{ text: string }>) => lines.map(l => l.text).join('\n')

test('event mode: the raw event as pretty JSON', () => {
  const lines = detailLines(events, 4, 'event')
  assert.deepEqual(JSON.parse(text(lines)), events[4])
})

test('snapshot mode: a snapshot event shows its state as YAML; others show the latest snapshot', () => {
  const own = text(detailLines(events, 3, 'snapshot'))
  assert.match(own, /^request snapshot · gateway policies\nrequest:\n {2}method: GET\n/)
  assert.match(own, /x-forwarded-proto: http/)
  const route = text(detailLines(events, 4, 'snapshot'))
  assert.match(route, /^request snapshot · gateway policies \(the latest snapshot at event #5: #4\)/)
  assert.match(text(detailLines(events, 0, 'snapshot')), /no snapshot yet/)
  assert.equal(snapshotFor(events, 0), null)
  assert.equal(snapshotFor(events, 12)?.index, 12)
})

test('snapshot mode decodes bodies: UTF-8 as text, binary as hex', () => {
  const body = text(detailLines(events, 14, 'snapshot'))
  assert.match(body, /^body · response · \d+/)
  assert.match(body, /<html|<!DOCTYPE/i)
  const binary: TraceEvent = { eventStart: null, eventEnd: 1, severity: 'info', message: { type: 'bodySnapshot', stage: 'response', body: Buffer.from([0xff, 0x00, 0x41]).toString('base64'), truncated: false } }
  const lines = text(bodyLines(binary))
  assert.match(lines, /binary \(not UTF-8\); hex of the first 3 bytes:\n000000 {2}ff 00 41/)
})

test('diff mode: against the previous snapshot of the same kind', () => {
  // route policies (#7) against gateway policies (#4): the route's header modifier added x-portico.
  const diff = detailLines(events, 6, 'diff')
  assert.equal(diff[0]!.text, 'request snapshot · route policies (#7) against gateway policies (#4)')
  assert.ok(diff.some(l => l.text === '--- gateway policies' && l.color === 'yellow'))
  assert.ok(diff.some(l => l.text === '+++ route policies'))
  assert.ok(diff.some(l => l.text === '+    x-portico: quickstart' && l.color === 'green'), text(diff))
  assert.ok(!diff.some(l => l.text.startsWith('-') && !l.text.startsWith('---')), 'nothing removed')
  // responses compare with responses
  assert.equal(previousSnapshot(events, 12)?.index, 11)
  assert.match(text(detailLines(events, 1, 'diff')), /the first request snapshot: nothing to compare/)
  assert.match(text(detailLines(events, 11, 'diff')), /the first response snapshot/)
  assert.match(text(detailLines(events, 14, 'diff')), /bodies are not diffed/)
})

test('unifiedDiff colours lines and drops the index header', () => {
  const lines = unifiedDiff('a', 'b', 'x: 1\ny: 2\n', 'x: 1\ny: 3\n')
  assert.deepEqual(lines.map(l => [l.text, l.color ?? '']), [
    ['--- a', 'yellow'],
    ['+++ b', 'yellow'],
    ['@@ -1,2 +1,2 @@', 'cyan'],
    [' x: 1', ''],
    ['-y: 2', 'red'],
    ['+y: 3', 'green']
  ])
})
