/**
 * `portico --validate -f FILE` on a config text: the exit code and the diagnostic lines
 * (`file:line:col: path: message`), for bad-input tests.
 */

import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import assert from 'node:assert/strict'
import { type ConfigInput, configText, makeTempDir, runPortico } from '@portico/testkit/portico'

export interface Validation {
  code: number | null
  /** `path: message` of each diagnostic line (file, line and column dropped). */
  problems: string[]
  stderr: string
}

export async function validateConfig (config: ConfigInput): Promise<Validation> {
  const dir = makeTempDir('portico-validate-')
  try {
    const file = join(dir, 'config.yaml')
    writeFileSync(file, configText(config))
    const run = await runPortico(['--validate', '-f', file])
    const problems = run.stderr.split('\n')
      .filter(line => line.startsWith(file))
      .map(line => line.slice(file.length).replace(/^:\d+:\d+/, '').replace(/^: /, ''))
    return { code: run.code, problems, stderr: run.stderr }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Asserts the config is refused with a problem at `path` whose message matches `message`. */
export async function assertConfigError (config: ConfigInput, path: string, message: RegExp): Promise<void> {
  const v = await validateConfig(config)
  assert.equal(v.code, 1, `expected the config to be refused\n${v.stderr}`)
  assert.ok(v.problems.some(p => p.startsWith(`${path}: `) && message.test(p.slice(path.length + 2))),
    `expected a problem at ${path} matching ${String(message)}; got:\n${v.stderr}`)
}
