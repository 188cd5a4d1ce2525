/**
 * Outside tools a test runs against (promtool, go, helm, ...). `scripts/test-tools`
 * installs them and exports their paths; a developer running one file by hand may not have
 * them. Missing in CI is a failure; missing locally skips the test with the reason.
 */

import { spawnSync } from 'node:child_process'
import type { TestContext } from 'node:test'

export function findTool (envName: string, command: string): string | null {
  const fromEnv = process.env[envName]
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv
  const probe = spawnSync(command, ['--version'], { stdio: 'ignore' })
  return probe.error === undefined ? command : null
}

/** The tool's path, or null after marking the test skipped (locally) / failing it (CI). */
export function requireTool (t: TestContext, envName: string, command: string): string | null {
  const path = findTool(envName, command)
  if (path !== null) return path
  const why = `${command} not found: run ./scripts/test (it installs it) or set ${envName}`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}
