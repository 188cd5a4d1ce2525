/**
 * The environment a stdio MCP server inherits is the SDK's stdio client's (Portico keeps the
 * list itself so the SDK's schemas never load for it): same names, same refusal of exported
 * shell functions.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { DEFAULT_INHERITED_ENV_VARS, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js'
import { INHERITED_ENV_VARS, inheritedEnvironment } from '../src/mcp/upstream/stdio.ts'

test('the inherited variables are the SDK stdio client\'s', () => {
  assert.deepEqual([...INHERITED_ENV_VARS], [...DEFAULT_INHERITED_ENV_VARS])
  assert.deepEqual(inheritedEnvironment(), getDefaultEnvironment())
})

test('an exported shell function is not inherited; other variables are not either', () => {
  const env = inheritedEnvironment({ HOME: '/home/a', SHELL: '() { :; }; echo pwned', SECRET_TOKEN: 'x', PATH: '/bin' })
  assert.equal(env.HOME, '/home/a')
  assert.equal(env.PATH, '/bin')
  assert.ok(!('SHELL' in env))
  assert.ok(!('SECRET_TOKEN' in env))
})
