import { test } from 'node:test'
import assert from 'node:assert/strict'
import { TargetNaming, wrapPromptResult, wrapToolResult } from '../src/mcp/session/names.ts'
import { mergeInitialize } from '../src/mcp/session/merge.ts'
import { errorResponse, gatewayErrorReason, sessionNotFound, targetTimeout, targetUnavailable } from '../src/mcp/protocol/jsonrpc.ts'

const two = new TargetNaming({ targets: [{ name: 'a' }, { name: 'b' }] as never, prefixMode: 'conditional' })
const one = new TargetNaming({ targets: [{ name: 'a' }] as never, prefixMode: 'conditional' })

test('URIs in tool results and prompt messages get the target prefix when names are prefixed', () => {
  const tool = { content: [{ type: 'text', text: 'x' }, { type: 'resource_link', uri: 'file:///1', name: '1' }, { type: 'resource', resource: { uri: 'test://2', text: 't' } }], isError: false }
  assert.deepEqual(wrapToolResult(two, 'a', tool).content, [{ type: 'text', text: 'x' }, { type: 'resource_link', uri: 'a+file:///1', name: '1' }, { type: 'resource', resource: { uri: 'a+test://2', text: 't' } }])
  assert.equal(wrapToolResult(one, 'a', tool), tool, 'one target, conditional prefixing: untouched')
  const prompt = { messages: [{ role: 'user', content: { type: 'resource', resource: { uri: 'test://3', text: 't' } } }, { role: 'user', content: { type: 'text', text: 'hi' } }] }
  assert.deepEqual(wrapPromptResult(two, 'b', prompt).messages, [{ role: 'user', content: { type: 'resource', resource: { uri: 'b+test://3', text: 't' } } }, { role: 'user', content: { type: 'text', text: 'hi' } }])
})

test('several targets advertise only the capabilities the gateway routes across them; one target passes all', () => {
  const caps = { tools: { listChanged: true }, tasks: { list: {} }, experimental: { x: {} }, logging: {} }
  const merged = mergeInitialize([{ name: 'a', result: { capabilities: caps } as never }, { name: 'b', result: { capabilities: { prompts: {} } } as never }], '2025-11-25')
  assert.deepEqual(Object.keys(merged.capabilities as object).sort(), ['logging', 'prompts', 'tools'])
  const single = mergeInitialize([{ name: 'a', result: { capabilities: caps } as never }], '2025-11-25')
  assert.ok('tasks' in (single.capabilities as object))
})

test('errors the gateway makes say so in data; a target\'s own error with the same code does not', () => {
  assert.equal(gatewayErrorReason(targetTimeout(1, 'slow').error), 'target-timeout')
  assert.equal(gatewayErrorReason(sessionNotFound().error), 'session-not-found')
  assert.equal(targetTimeout(1, 'x').error.code, sessionNotFound().error.code, 'the SDK uses -32001 for both')
  assert.equal(gatewayErrorReason(targetUnavailable(2, 'down').error), 'target-unavailable')
  assert.equal(gatewayErrorReason(errorResponse(3, -32001, 'a target timing out its own work').error), null)
  assert.equal(gatewayErrorReason(errorResponse(3, -32000, 'x', { source: 'someone-else' }).error), null)
})
