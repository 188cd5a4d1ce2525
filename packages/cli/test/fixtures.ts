/**
 * What packages/cli's tests share beyond @portico/testkit/porticoctl (which runs porticoctl):
 * the recorded trace fixtures.
 */

import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { TraceEvent } from '@portico/engine/trace-events'

export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url))

export function fixtureEvents (name: string): TraceEvent[] {
  return readFileSync(`${FIXTURES}${name}`, 'utf8').split('\n').filter(l => l !== '').map(l => JSON.parse(l) as TraceEvent)
}
