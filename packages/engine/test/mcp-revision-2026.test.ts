/**
 * mcp/revision-2026.ts without a network: which era a POST is, the errors of the
 * 2026-07-28 revision (UnsupportedProtocolVersionError, HeaderMismatch), Mcp-Name's base64
 * sentinel, the discover result and result reshaping, and the per-request channel.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  checkStandardHeaders, classify, decodeHeaderValue, discoverResult, modernCapabilities, ModernChannel, modernResult, upstreamRequest
} from '../src/mcp/revision-2026.ts'
import type { Channel } from '../src/mcp/channels.ts'
import type { JsonRpcMessage, JsonRpcRequest } from '../src/mcp/jsonrpc.ts'

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

test('discover and results: resultType, cache hints, serverInfo in _meta; no tasks or change-notification flags', () => {
  const d = discoverResult({ protocolVersion: '2025-11-25', capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, tasks: {}, logging: {} }, serverInfo: { name: 's', version: '1' }, instructions: 'hi' })
  assert.equal(d.resultType, 'complete')
  assert.equal((d.supportedVersions as string[])[0], '2026-07-28')
  assert.deepEqual(d.capabilities, { tools: {}, resources: {}, logging: {} })
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

test('ModernChannel: ids and tokens mapped back, logging by level, a target\'s own requests refused', () => {
  const got: JsonRpcMessage[] = []
  const refused: JsonRpcMessage[] = []
  const inner: Channel = { open: true, deliver: m => { got.push(m); return true } }
  const channel = new ModernChannel(inner, { clientId: 7, upstreamId: 'up', method: 'resources/read', clientToken: 'mine', upstreamToken: 'tok', logLevel: 'warning', serverInfo: { name: 's', version: '1' }, refuse: m => refused.push(m) })
  channel.deliver({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'tok', progress: 1 } })
  channel.deliver({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'someone-else', progress: 1 } })
  channel.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } })
  channel.deliver({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'error', data: 'y' } })
  channel.deliver({ jsonrpc: '2.0', id: 'portico-1', method: 'sampling/createMessage', params: {} })
  channel.deliver({ jsonrpc: '2.0', id: 'up', error: { code: -32002, message: 'Resource not found' } })
  assert.equal(channel.done, true)
  assert.deepEqual(got, [
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'mine', progress: 1 } },
    { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'error', data: 'y' } },
    { jsonrpc: '2.0', id: 7, error: { code: -32602, message: 'Resource not found' } }
  ])
  assert.equal(refused.length, 1)
  assert.equal((refused[0] as any).id, 'portico-1')
  assert.equal((refused[0] as any).error.code, -32601)
})
