import { test } from 'node:test'
import assert from 'node:assert/strict'
import { authority, hostPort } from '../src/util/host-port.ts'

test('hostPort brackets IPv6 addresses', () => {
  assert.equal(hostPort('127.0.0.1', 8080), '127.0.0.1:8080')
  assert.equal(hostPort('::1', 8080), '[::1]:8080')
})

test('authority leaves out the scheme\'s default port', () => {
  assert.equal(authority('api.openai.com', 443, 'https'), 'api.openai.com')
  assert.equal(authority('api.openai.com', 443, 'http'), 'api.openai.com:443')
  assert.equal(authority('h', 80, 'http'), 'h')
  assert.equal(authority('::1', 80, 'http'), '[::1]')
  assert.equal(authority('::1', 8000, 'http'), '[::1]:8000')
})
