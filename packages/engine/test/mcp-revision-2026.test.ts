/**
 * mcp/revisions/revision-2026.ts without a network: which era a POST is, the errors of the
 * 2026-07-28 revision (UnsupportedProtocolVersionError, HeaderMismatch), Mcp-Name's base64
 * sentinel, the discover result and result reshaping, and the per-request channel.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  checkStandardHeaders, classify, decodeHeaderValue, discoverResult, modernCapabilities, upstreamRequest
} from '../src/mcp/revisions/revision-2026.ts'
import { ModernCall, ParkedCalls, type CallBinding } from '../src/mcp/session/modern-call.ts'
import { inputKey } from '../src/mcp/revisions/revision-2026-input.ts'
import { modernResult } from '../src/mcp/revisions/revision-2026.ts'
import { SessionIdCodec } from '../src/mcp/session/session-id.ts'
import { waitUntil } from '../../testkit/src/wait.ts'
import type { Channel } from '../src/mcp/session/channels.ts'
import type { JsonRpcMessage, JsonRpcRequest } from '../src/mcp/protocol/jsonrpc.ts'

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} }
const call = (meta: Record<string, unknown> = META): JsonRpcRequest => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {}, _meta: meta } })
const H = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' }

test('classify: _meta version makes a request modern; headers must agree with it', () => {
  assert.deepEqual(classify(H, [call()], false), { era: 'modern', version: '2026-07-28' })
  const noHeader = classify({ 'mcp-method': 'tools/call', 'mcp-name': 'echo' }, [call()], false)
  assert.equal(noHeader.era, 'reject')
  assert.equal((noHeader as { body: any }).body.error.code, -32020)
  const other = classify({ ...H, 'mcp-protocol-version': '2025-11-25' }, [call()], false)
  assert.equal((other as { status: number }).status, 400)
  assert.equal((other as { body: any }).body.error.code, -32020)
  assert.equal(classify(H, [call()], true).era, 'reject', 'no batches in 2026-07-28')
})

test('classify: an unknown version, in _meta or in the header alone, is UnsupportedProtocolVersionError', () => {
  const r = classify({ ...H, 'mcp-protocol-version': '2099-01-01' }, [call({ ...META, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' })], false) as { status: number, body: any }
  assert.equal(r.status, 400)
  assert.equal(r.body.id, 1)
  assert.equal(r.body.error.code, -32022)
  assert.equal(r.body.error.data.requested, '2099-01-01')
  assert.deepEqual(r.body.error.data.supported.slice(0, 2), ['2026-07-28', '2025-11-25'])
  const byHeader = classify({ 'mcp-protocol-version': '1999-01-01' }, [{ jsonrpc: '2.0', id: 2, method: 'ping' }], false) as { body: any }
  assert.equal(byHeader.body.error.code, -32022)
})

test('classify: initialize-era traffic stays legacy; a 2026 header without _meta is refused, a notification accepted', () => {
  assert.deepEqual(classify({}, [{ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }], false), { era: 'legacy' })
  assert.deepEqual(classify({ 'mcp-protocol-version': '2025-06-18' }, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], false), { era: 'legacy' })
  assert.deepEqual(classify({}, [call({ ...META, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' })], false), { era: 'legacy' })
  assert.equal(classify({ 'mcp-protocol-version': '2026-07-28' }, [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }], false).era, 'reject')
  assert.equal(classify({ 'mcp-protocol-version': '2026-07-28' }, [{ jsonrpc: '2.0', method: 'notifications/cancelled' }], false).era, 'modern')
  // Sent by an initialize-era client, a disagreeing Mcp-Method is still refused.
  assert.equal(classify({ 'mcp-method': 'tools/list' }, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], false).era, 'reject')
})

test('Mcp-Method and Mcp-Name: compared with the body, base64 sentinel decoded, required on modern requests', () => {
  assert.equal(checkStandardHeaders(H, call(), true), null)
  assert.match(String(checkStandardHeaders({ ...H, 'mcp-method': 'tools/list' }, call(), true)), /Mcp-Method/)
  assert.match(String(checkStandardHeaders({ ...H, 'mcp-name': 'other' }, call(), true)), /Mcp-Name/)
  assert.match(String(checkStandardHeaders({ 'mcp-method': 'tools/call' }, call(), true)), /Mcp-Name header is required/)
  assert.equal(checkStandardHeaders({}, call(), false), null, 'optional for initialize-era requests')
  assert.equal(checkStandardHeaders({ ...H, 'mcp-name': `=?base64?${Buffer.from('echo').toString('base64')}?=` }, call(), true), null)
  assert.equal(decodeHeaderValue('=?base64?SGVsbG8sIOS4lueVjA==?='), 'Hello, 世界')
  assert.equal(decodeHeaderValue('=?base64?not base64?='), null)
  assert.equal(decodeHeaderValue('us-west1'), 'us-west1')
})

test('discover and results: resultType, cache hints, serverInfo in _meta; no tasks, change-notification flags kept (subscriptions/listen)', () => {
  const d = discoverResult({ protocolVersion: '2025-11-25', capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, tasks: {}, logging: {} }, serverInfo: { name: 's', version: '1' }, instructions: 'hi' })
  assert.equal(d.resultType, 'complete')
  assert.equal((d.supportedVersions as string[])[0], '2026-07-28')
  assert.deepEqual(d.capabilities, { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, logging: {} })
  assert.equal(d.instructions, 'hi')
  assert.deepEqual(d._meta, { 'io.modelcontextprotocol/serverInfo': { name: 's', version: '1' } })
  assert.equal(d.ttlMs, 0)
  assert.equal(d.cacheScope, 'private')
  assert.deepEqual(modernCapabilities({ experimental: { x: {} } }), { experimental: { x: {} } })
  const list = modernResult('tools/list', { tools: [], _meta: { other: 1 } }, { name: 's', version: '1' })
  assert.deepEqual(list, { resultType: 'complete', tools: [], _meta: { other: 1, 'io.modelcontextprotocol/serverInfo': { name: 's', version: '1' } }, ttlMs: 0, cacheScope: 'private' })
  const callResult = modernResult('tools/call', { content: [] }, undefined)
  assert.deepEqual(callResult, { resultType: 'complete', content: [] })
})

test('upstreamRequest: a gateway id and progress token, the 2026 _meta keys left out', () => {
  const req = call({ ...META, progressToken: 'p', 'io.modelcontextprotocol/logLevel': 'info', other: true })
  assert.deepEqual(upstreamRequest(req, 'up-1', 'tok-up'), { jsonrpc: '2.0', id: 'up-1', method: 'tools/call', params: { name: 'echo', arguments: {}, _meta: { other: true, progressToken: 'tok-up' } } })
  assert.deepEqual(upstreamRequest({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: META } }, 'up-2', undefined), { jsonrpc: '2.0', id: 'up-2', method: 'tools/list', params: {} })
})

const sink = () => {
  const got: JsonRpcMessage[] = []
  const channel: Channel = { open: true, deliver: m => { got.push(m); return true } }
  return { got, channel }
}

test('ModernCall: ids and tokens mapped back, logging by level, input requests of a client without the capability refused', () => {
  const { got, channel } = sink()
  const answered: JsonRpcMessage[] = []
  const call = new ModernCall({ channel, clientId: 7, clientToken: 'mine', logLevel: 'warning' }, {
    upstreamId: 'up', method: 'resources/read', upstreamToken: 'tok', serverInfo: { name: 's', version: '1' }, clientCapabilities: {}, answer: m => answered.push(m), park: () => 'state'
  })
  call.deliver({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'tok', progress: 1 } })
  call.deliver({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'someone-else', progress: 1 } })
  call.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } })
  call.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'error', data: 'y' } })
  call.deliver({ jsonrpc: '2.0', id: 'portico-1', method: 'sampling/createMessage', params: {} })
  call.deliver({ jsonrpc: '2.0', id: 'up', error: { code: -32002, message: 'Resource not found' } })
  assert.equal(call.done, true)
  assert.deepEqual(got, [
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'mine', progress: 1 } },
    { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'error', data: 'y' } },
    { jsonrpc: '2.0', id: 7, error: { code: -32602, message: 'Resource not found' } }
  ])
  assert.equal(answered.length, 1)
  assert.equal((answered[0] as any).id, 'portico-1')
  assert.equal((answered[0] as any).error.code, -32601)
  assert.match((answered[0] as any).error.message, /did not declare the sampling capability/)
})

test('ModernCall: a target\'s requests become one input_required result; the retry\'s responses go back and its POST gets the answer', async () => {
  const first = sink()
  const answered: JsonRpcMessage[] = []
  const parked: ModernCall[] = []
  const call = new ModernCall({ channel: first.channel, clientId: 1, clientToken: undefined, logLevel: undefined }, {
    upstreamId: 'up', method: 'tools/call', upstreamToken: undefined, serverInfo: undefined,
    clientCapabilities: { elicitation: {}, sampling: {} }, answer: m => answered.push(m), park: c => { parked.push(c); return 'sealed' }
  })
  call.deliver({ jsonrpc: '2.0', id: 'portico-1', method: 'elicitation/create', params: { message: 'name?' } })
  call.deliver({ jsonrpc: '2.0', id: 'portico-2', method: 'sampling/createMessage', params: { maxTokens: 5 } })
  call.deliver({ jsonrpc: '2.0', id: 'portico-3', method: 'roots/list', params: {} })
  // The input requests gathered go out as one input_required answer.
  await waitUntil(() => first.got.length > 0, 5_000, 'the input_required answer')
  assert.equal(answered.length, 1, 'roots/list refused: no roots capability')
  const nameKey = inputKey('elicitation/create', { message: 'name?' }, 0)
  const sampleKey = inputKey('sampling/createMessage', { maxTokens: 5 }, 0)
  assert.match(nameKey, /^in-[\w-]{16}-0$/)
  assert.deepEqual(first.got, [{
    jsonrpc: '2.0',
    id: 1,
    result: { resultType: 'input_required', inputRequests: { [nameKey]: { method: 'elicitation/create', params: { message: 'name?' } }, [sampleKey]: { method: 'sampling/createMessage', params: { maxTokens: 5 } } }, requestState: 'sealed' }
  }])
  assert.equal(parked.length, 1)
  assert.equal(call.isBoundTo(first.channel), false, 'the first POST is done; closing it does not cancel the call')

  assert.match(call.checkResponses([1]) ?? '', /must be an object/)
  assert.match(call.checkResponses({ [nameKey]: 'Ada' }) ?? '', /must be the result/)
  assert.equal(call.checkResponses({ [nameKey]: { action: 'accept', content: { name: 'Ada' } }, extra: 1 }), null)

  // One key answered, one missing: it is asked again, not an error.
  const second = sink()
  call.resume({ channel: second.channel, clientId: 2, clientToken: undefined, logLevel: undefined }, { [nameKey]: { action: 'accept', content: { name: 'Ada' } }, extra: 1 })
  assert.deepEqual(answered.slice(1), [{ jsonrpc: '2.0', id: 'portico-1', result: { action: 'accept', content: { name: 'Ada' } } }])
  assert.deepEqual(call.answers, { [nameKey]: { action: 'accept', content: { name: 'Ada' } } })
  await waitUntil(() => second.got.length > 0, 5_000, 'the input_required answer asking again')
  assert.deepEqual(Object.keys((second.got[0] as any).result.inputRequests), [sampleKey])

  const third = sink()
  call.resume({ channel: third.channel, clientId: 3, clientToken: undefined, logLevel: undefined } satisfies CallBinding, { [sampleKey]: { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm' } })
  call.deliver({ jsonrpc: '2.0', id: 'up', result: { content: [{ type: 'text', text: 'done' }] } })
  assert.deepEqual(third.got, [{ jsonrpc: '2.0', id: 3, result: { resultType: 'complete', content: [{ type: 'text', text: 'done' }] } }])
})

test('ModernCall: input requests during a method that cannot answer input_required are refused', () => {
  const { got, channel } = sink()
  const answered: JsonRpcMessage[] = []
  const call = new ModernCall({ channel, clientId: 1, clientToken: undefined, logLevel: undefined }, {
    upstreamId: 'up', method: 'tools/list', upstreamToken: undefined, serverInfo: undefined, clientCapabilities: { elicitation: {} }, answer: m => answered.push(m), park: () => 'x'
  })
  call.deliver({ jsonrpc: '2.0', id: 'portico-1', method: 'elicitation/create', params: {} })
  assert.equal((answered[0] as any).error.code, -32601)
  assert.deepEqual(got, [])
})

test('ModernCall run again with earlier answers: questions already answered are answered from them, the same question asked twice keeps two keys', async () => {
  const { got, channel } = sink()
  const answered: JsonRpcMessage[] = []
  const known = inputKey('elicitation/create', { message: 'name?' }, 0)
  const call = new ModernCall({ channel, clientId: 9, clientToken: undefined, logLevel: undefined }, {
    upstreamId: 'up', method: 'tools/call', upstreamToken: undefined, serverInfo: undefined, clientCapabilities: { elicitation: {} }, answer: m => answered.push(m), park: () => 'sealed'
  }, { [known]: { action: 'accept', content: { name: 'Ada' } } })
  // _meta (a progress token the target adds) does not change the question.
  call.deliver({ jsonrpc: '2.0', id: 'portico-7', method: 'elicitation/create', params: { message: 'name?', _meta: { progressToken: 3 } } })
  assert.deepEqual(answered, [{ jsonrpc: '2.0', id: 'portico-7', result: { action: 'accept', content: { name: 'Ada' } } }])
  call.deliver({ jsonrpc: '2.0', id: 'portico-8', method: 'elicitation/create', params: { message: 'name?' } })
  await waitUntil(() => got.length > 0, 5_000, 'the input_required answer')
  assert.deepEqual(Object.keys((got[0] as any).result.inputRequests), [inputKey('elicitation/create', { message: 'name?' }, 1)])
})

test('ParkedCalls: a requestState opens only unaltered, for the same request; a call no longer parked is run again with its answers', async () => {
  const parked = new ParkedCalls(new SessionIdCodec())
  const call = new ModernCall({ channel: sink().channel, clientId: 1, clientToken: undefined, logLevel: undefined }, {
    upstreamId: 'up', method: 'tools/call', upstreamToken: undefined, serverInfo: undefined, clientCapabilities: {}, answer: () => {}, park: () => ''
  })
  call.answers.k1 = { action: 'accept' }
  let expired = 0
  const what = { backend: 'b', method: 'tools/call', name: 'greet' }
  const state = parked.park(call, what, 30, () => expired++)
  assert.deepEqual(parked.find(state, what), { call })
  // One character changed (the one before the last, all of whose bits count): never the same string.
  const altered = state.slice(0, -2) + (state.at(-2) === 'A' ? 'B' : 'A') + state.slice(-1)
  assert.deepEqual(parked.find(altered, what), { refused: 'Invalid or expired requestState' })
  assert.deepEqual(parked.find('opaque-from-elsewhere', what), { refused: 'Invalid or expired requestState' })
  assert.match(JSON.stringify(parked.find(state, { ...what, name: 'other' })), /another request/)
  assert.match(JSON.stringify(parked.find(42, what)), /must be a string/)
  // Parked for 30 ms: it expires.
  await waitUntil(() => expired > 0, 5_000, 'the parked call to expire')
  assert.equal(expired, 1)
  assert.equal(call.done, true)
  // Another replica (or this one after the call expired): the answers so far, to run it again.
  assert.deepEqual(parked.find(state, what), { rerun: { k1: { action: 'accept' } } })
  assert.deepEqual(new ParkedCalls(new SessionIdCodec()).find(state, what), { refused: 'Invalid or expired requestState' }, 'another key: not ours')
})
