/**
 * promptGuard on neutral stream events (llm/guard/guard.ts StreamGuard): text held back and
 * masked per block, flushed before its block_stop and before the finish, other blocks'
 * events passed as they come, a reject replacing the rest with one error event, a stream
 * cut without a finish still flushed; and the decisions recorded.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { RequestContext } from '../src/request/context.ts'
import type { PromptGuardIR } from '../src/ir/types.ts'
import type { StreamEvent } from '../src/llm/canonical.ts'
import { StreamGuard } from '../src/llm/guard/guard.ts'

const ctx = (): RequestContext => ({ tracer: null, guardDecisions: null }) as unknown as RequestContext
const mask: PromptGuardIR = { kind: 'regex', action: 'mask', rules: [{ builtin: 'Ssn' }], rejection: { status: 403 } }
const reject: PromptGuardIR = { kind: 'regex', action: 'reject', rules: [{ builtin: 'Ssn' }], rejection: { status: 403 } }

const text = (events: StreamEvent[], index = 0): string => events.map(e => e.type === 'text_delta' && e.index === index ? e.text : '').join('')

test('text is masked across deltas, flushed before block_stop; a tool call block passes as it comes', () => {
  const c = ctx()
  const g = new StreamGuard(c, 'm', [mask])
  const out: StreamEvent[] = []
  const feed = (...events: StreamEvent[]): void => { out.push(...g.process(events)) }
  feed({ type: 'start', id: 'x', model: 'm' }, { type: 'block_start', index: 0, block: { type: 'text' } })
  feed({ type: 'text_delta', index: 0, text: 'ssn 123-4' })
  feed({ type: 'text_delta', index: 0, text: '5-6789 ok' })
  feed({ type: 'block_start', index: 1, block: { type: 'tool_call', id: 't', name: 'f' } }, { type: 'tool_args_delta', index: 1, json: '{"a":"123-45-6789"}' })
  assert.equal(out.at(-1)!.type, 'tool_args_delta', 'another block\'s events are not held')
  feed({ type: 'block_stop', index: 0 }, { type: 'block_stop', index: 1 }, { type: 'finish', stopReason: 'tool_use', usage: null })
  assert.equal(text(out), 'ssn <SSN> ok')
  const stop0 = out.findIndex(e => e.type === 'block_stop' && e.index === 0)
  assert.ok(out.slice(stop0).every(e => e.type !== 'text_delta'), 'no text of block 0 after its block_stop')
  assert.deepEqual(c.guardDecisions, [{ model: 'm', guard: 'regex', action: 'mask' }])
})

test('a stream cut before its finish: held text flushed first, then the error', () => {
  const g = new StreamGuard(ctx(), 'm', [mask])
  const out = [...g.process([{ type: 'block_start', index: 0, block: { type: 'text' } }, { type: 'text_delta', index: 0, text: 'tail 123-45-6789' }])]
  assert.equal(text(out), 'tail', 'what lies before the hold-back (12 characters for Ssn) is sent at once')
  out.push(...g.process([{ type: 'error', error: { status: 502, kind: 'api_error', message: 'cut' } }]))
  out.push(...g.flush())
  assert.equal(text(out), 'tail <SSN>')
  assert.equal(out.at(-1)!.type, 'error')
  // No error event at all: flush alone sends what was held.
  const h = new StreamGuard(ctx(), 'm', [mask])
  const first = h.process([{ type: 'block_start', index: 0, block: { type: 'text' } }, { type: 'text_delta', index: 0, text: 'x 123-45-6789' }])
  assert.equal(text([...first, ...h.flush()]), 'x <SSN>')
})

test('reject: one error event instead of the rest; nothing of the match was sent', () => {
  const c = ctx()
  const g = new StreamGuard(c, 'm', [reject])
  const out: StreamEvent[] = []
  out.push(...g.process([{ type: 'block_start', index: 0, block: { type: 'text' } }, { type: 'text_delta', index: 0, text: 'a'.repeat(40) + ' 123-' }]))
  out.push(...g.process([{ type: 'text_delta', index: 0, text: '45-6789 and more' }, { type: 'block_stop', index: 0 }, { type: 'finish', stopReason: 'end_turn', usage: null }]))
  assert.ok(!text(out).includes('123'), text(out))
  const last = out.at(-1)!
  assert.equal(last.type, 'error')
  assert.equal(last.type === 'error' ? last.error.status : 0, 403)
  assert.equal(g.ended, true)
  assert.deepEqual(g.process([{ type: 'text_delta', index: 0, text: 'later' }]), [])
  assert.deepEqual(c.guardDecisions, [{ model: 'm', guard: 'regex', action: 'reject' }])
})

test('a webhook response guard is not run on a stream: recorded as a pass saying why', () => {
  const c = ctx()
  const g = new StreamGuard(c, 'm', [{ kind: 'webhook', url: 'http://127.0.0.1:9/x', timeoutMs: 100, failureMode: 'closed', maxResponseBytes: 1024, rejection: { status: 403 } }])
  const events: StreamEvent[] = [{ type: 'text_delta', index: 0, text: '123-45-6789' }]
  assert.deepEqual(g.process(events), events)
  assert.deepEqual(c.guardDecisions, [{ model: 'm', guard: 'webhook', action: 'pass' }])
})
