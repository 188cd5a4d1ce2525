/**
 * The `config:` section's CEL (access-log `filter` and `fields.add`, `tracing.fields.add`):
 * compiled when the file loads, so a bad expression is refused with its place in the file
 * (`file:line:col: config.accessLog.fields.add.user: ...`) by `--validate` and at start alike,
 * before anything starts. The proxy compiles them again to use them.
 */

import type { StaticConfig } from './schema.ts'
import type { ConfigDiagnostic } from './diagnostics.ts'
import { compileCel } from '../cel/expression.ts'
import { ACCESS_LOG_CEL_VARIABLES } from '../pipeline/access-log-fields.ts'

export function staticConfigDiagnostics (config: StaticConfig | undefined): ConfigDiagnostic[] {
  const out: ConfigDiagnostic[] = []
  const check = (expression: string, path: Array<string | number>, expectBool = false): void => {
    try {
      compileCel(expression, ACCESS_LOG_CEL_VARIABLES, { expectBool })
    } catch (err) {
      out.push({ path, message: (err as Error).message })
    }
  }
  const accessLog = config?.accessLog
  if (accessLog?.filter !== undefined) check(accessLog.filter, ['config', 'accessLog', 'filter'], true)
  for (const [name, expression] of Object.entries(accessLog?.fields?.add ?? {})) check(expression, ['config', 'accessLog', 'fields', 'add', name])
  for (const [name, expression] of Object.entries(config?.tracing?.fields?.add ?? {})) check(expression, ['config', 'tracing', 'fields', 'add', name])
  return out
}
