/**
 * mcp/protocol/jsonrpc.ts keeps its own copy of the MCP protocol versions so the gateway need not load
 * the SDK's types.js (and zod under it); this pins the copy to the SDK it is tested against.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as sdk from '@modelcontextprotocol/sdk/types.js'
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '../src/mcp/protocol/jsonrpc.ts'

test('the MCP protocol versions are the SDK\'s', () => {
  assert.equal(LATEST_PROTOCOL_VERSION, sdk.LATEST_PROTOCOL_VERSION)
  assert.deepEqual([...SUPPORTED_PROTOCOL_VERSIONS], [...sdk.SUPPORTED_PROTOCOL_VERSIONS])
})
