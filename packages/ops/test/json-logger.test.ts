/**
 * The workers' logger without pino (src/json-logger.ts) writes the lines pino writes: the same
 * calls through pino and through it give the same JSON, time aside.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { pino } from 'pino'
import { JsonLogger } from '../src/json-logger.ts'
import { isoTime } from '../src/time.ts'

/** Each call made on a pino logger and on a JsonLogger with the same bindings; their lines, time blanked. */
function both (calls: (log: { [k in 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal']: (a?: unknown, b?: string) => void } & { child: (b: Record<string, unknown>) => unknown, level: string }) => void): [string[], string[]] {
  const lines = (): { out: string[], stream: { write: (s: string) => boolean } } => {
    const out: string[] = []
    return { out, stream: { write: (s: string) => { out.push(...s.split('\n').filter(l => l !== '')); return true } } }
  }
  const p = lines()
  const j = lines()
  const base = { pid: 4242, worker: 1 }
  calls(pino({ level: 'trace', base, timestamp: isoTime }, p.stream) as never)
  calls(new JsonLogger(j.stream, JSON.stringify(base).slice(1, -1), 'trace') as never)
  const blank = (l: string) => l.replace(/"time":"[^"]+"/, '"time":"T"')
  return [p.out.map(blank), j.out.map(blank)]
}

test('fields and a message, a message alone, fields alone, every level, undefined and nested values', () => {
  const [viaPino, ours] = both(log => {
    log.info({ a: 1, b: 'two', c: undefined, d: { e: [1, 'x', null], f: true } }, 'hello "world"\n')
    log.warn('just a message')
    log.debug({ only: 'fields' })
    log.trace({ n: 1.5 }, 't')
    log.error({ e: 'x' }, 'e')
    log.fatal({}, 'f')
  })
  assert.deepEqual(ours, viaPino)
})

test('errors: as the first argument, as `err` (its message the line\'s when none is given), with a cause, an aggregate and own fields', () => {
  const withCode = Object.assign(new Error('refused'), { code: 'ECONNREFUSED', port: 80 })
  const caused = new Error('outer', { cause: new TypeError('inner') })
  const aggregate = new AggregateError([new Error('one'), new RangeError('two')], 'many')
  const [viaPino, ours] = both(log => {
    log.error(withCode, 'call failed')
    log.error(withCode)
    log.warn({ err: caused, at: 'x' })
    log.warn({ err: aggregate }, 'agg')
    log.info({ err: 'not an error' }, 'string err')
  })
  assert.deepEqual(ours.map(l => JSON.parse(l)), viaPino.map(l => JSON.parse(l)))
  assert.deepEqual(ours, viaPino)
})

test('children carry their bindings; levels filter; a cycle is written, not thrown', () => {
  const [viaPino, ours] = both(log => {
    const child = log.child({ component: 'engine' }) as typeof log
    child.level = 'warn'
    child.info({ skipped: true }, 'below the level')
    child.warn({ kept: true }, 'kept')
    const cyclic: Record<string, unknown> = { name: 'c' }
    cyclic.self = cyclic
    child.error({ cyclic }, 'cycle')
  })
  assert.deepEqual(ours, viaPino)
})
