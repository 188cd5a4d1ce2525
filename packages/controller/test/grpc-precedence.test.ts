/**
 * GRPCRoute precedence, end to end through the engine's route table: the rules of
 * golden/grpcroute/precedence.yaml are written least specific first, and each call must reach the
 * rule the spec gives it (characters of the service, then of the method, then header count).
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import type { RouteIR } from '@portico/engine/ir'
import { RouteTable } from '../../engine/src/routing/route-table.ts'
import { translate } from '../src/translate/translate.ts'
import { CONTROLLER, clusterState } from './cluster-state.ts'

const input = readFileSync(new URL('./golden/grpcroute/precedence.yaml', import.meta.url), 'utf8')

function table (): RouteTable<{ ir: RouteIR }> {
  const result = translate(clusterState(input), { controllerName: CONTROLLER })
  const listener = result.gateways[0]!.ir.binds.flatMap(b => b.listeners).find(l => l.name === 'any')!
  return new RouteTable(listener.routes.map(ir => ({ ir })))
}

function rule (t: RouteTable<{ ir: RouteIR }>, path: string, headers: Record<string, string> = {}, method = 'POST'): string | null {
  const r = t.select('grpc.example.com', { method, path, query: '', headers }, false).route
  return r === null ? null : `${r.ir.name}.${r.ir.ruleName ?? ''}`
}

test('GRPCRoute rules rank by service, then method, then headers, whatever their order', () => {
  const t = table()
  assert.equal(rule(t, '/grpc.health.v1.Health/Check', { 'x-tenant': 'a' }), 'ordered.exact')
  assert.equal(rule(t, '/grpc.health.v1.Health/Watch', { 'x-tenant': 'a' }), 'ordered.service-only')
  assert.equal(rule(t, '/other.Service/Check', { 'x-tenant': 'a' }), 'ordered.method-only', 'a method beats a header match')
  assert.equal(rule(t, '/other.Service/Other', { 'x-tenant': 'a' }), 'ordered.headers-only')
  assert.equal(rule(t, '/other.Service/Other'), 'ordered.catch-all')
})

test('a service prefix is whole segments: a longer service name is another service', () => {
  assert.equal(rule(table(), '/grpc.health.v1.HealthX/Watch'), 'ordered.catch-all')
})

test('a rule without a method match takes any request; one with a method match only POSTs (gRPC calls)', () => {
  const t = table()
  assert.equal(rule(t, '/grpc.health.v1.Health/Check', {}, 'GET'), 'ordered.catch-all')
  assert.equal(rule(t, '/', {}, 'GET'), 'ordered.catch-all')
})
