import { createHash } from 'node:crypto'
import type { ProxyIR } from './types.ts'

/**
 * A short hash of the IR's content, so equal configs have equal versions whichever source
 * (YAML file, controller, xDS push) produced them.
 */
export function contentVersion (ir: Omit<ProxyIR, 'version'> & { version?: string }): string {
  const { version: _ignored, ...rest } = ir
  return createHash('sha256').update(JSON.stringify(rest)).digest('hex').slice(0, 12)
}
