/**
 * The web UI's API helpers: CEL values as JSON, JWT decoding (no verification), the
 * same-origin / anti-rebinding checks, and the static files' lookup.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyRequest } from 'fastify'
import { compileCel } from '@portico/engine'
import { celToJson, checkApiRequest, decodeJwt } from '../src/admin/ui-api.ts'
import { findUiDir } from '../src/admin/ui-static.ts'

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')

test('celToJson: lists, maps, ints, doubles, bytes, errors', () => {
  const value = compileCel('[1, 2.5, "x", null, {"k": [true]}, b"hi", jwt.n]', ['jwt']).evaluate({ jwt: { n: 3 } })
  assert.deepEqual(celToJson(value), [1, 2.5, 'x', null, { k: [true] }, { bytes: 'aGk=' }, 3])
  assert.deepEqual(celToJson(compileCel('jwt', ['jwt']).evaluate({ jwt: { permissions: ['read'] } })), { permissions: ['read'] })
  assert.equal(celToJson(compileCel('9223372036854775807', []).evaluate({})), '9223372036854775807')
  assert.deepEqual(celToJson(compileCel('jwt.missing', ['jwt']).evaluate({ jwt: {} })), { error: 'field not found: missing' })
})

test('decodeJwt: header and claims, with or without "Bearer ", never verified', () => {
  const token = `${b64({ alg: 'RS256', kid: 'k1' })}.${b64({ sub: 'alice', permissions: ['read'] })}.c2lnbmF0dXJl`
  assert.deepEqual(decodeJwt(token), { header: { alg: 'RS256', kid: 'k1' }, claims: { sub: 'alice', permissions: ['read'] } })
  assert.deepEqual(decodeJwt(`Bearer ${token}\n`).claims.sub, 'alice')
  assert.throws(() => decodeJwt('not-a-token'), /not a JWT/)
  assert.throws(() => decodeJwt(`${b64({})}.!!!.x`), /payload is not base64url JSON/)
  assert.throws(() => decodeJwt(`${b64({})}.${b64([1])}.x`), /payload is not a JSON object/)
})

function req (headers: Record<string, string>, method = 'GET'): FastifyRequest {
  return { headers, method } as unknown as FastifyRequest
}

test('checkApiRequest: same origin only, no DNS rebinding, JSON bodies', () => {
  assert.equal(checkApiRequest(req({ host: '127.0.0.1:15000' })), null)
  assert.equal(checkApiRequest(req({ host: 'localhost:15000', origin: 'http://localhost:15000', 'sec-fetch-site': 'same-origin' })), null)
  assert.equal(checkApiRequest(req({ host: '[::1]:15000' })), null)
  assert.equal(checkApiRequest(req({ host: '10.1.2.3:15000', 'content-type': 'application/json; charset=utf-8' }, 'POST')), null)
  assert.match(checkApiRequest(req({ host: 'evil.example:15000' })) ?? '', /DNS rebinding/)
  assert.match(checkApiRequest(req({ host: '127.0.0.1:15000', origin: 'http://127.0.0.1:3000' })) ?? '', /same-origin only/)
  assert.match(checkApiRequest(req({ host: '127.0.0.1:15000', origin: 'null' })) ?? '', /same-origin only/)
  assert.match(checkApiRequest(req({ host: '127.0.0.1:15000', 'sec-fetch-site': 'cross-site' })) ?? '', /cross-site/)
  assert.match(checkApiRequest(req({ host: '127.0.0.1:15000', 'content-type': 'text/plain' }, 'POST')) ?? '', /application\/json/)
  assert.match(checkApiRequest(req({ host: '127.0.0.1:15000' }, 'POST')) ?? '', /application\/json/)
})

test('findUiDir: UI_DIR when it has an index.html, else null', () => {
  const dir = mkdtempSync(join(tmpdir(), 'portico-ui-'))
  try {
    assert.equal(findUiDir({ UI_DIR: dir }), null)
    writeFileSync(join(dir, 'index.html'), '<!doctype html>')
    assert.equal(findUiDir({ UI_DIR: dir }), dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
