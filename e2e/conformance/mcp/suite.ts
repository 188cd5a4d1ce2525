/**
 * Runs the official MCP conformance suite (`@modelcontextprotocol/conformance`, its server
 * scenarios) against a URL and reads what it decided, per scenario.
 *
 * The suite is a CLI: `conformance server --url U (--requirements REV | --spec-version REV)
 * -o DIR` writes one `server-<scenario>-<time>/checks.json` per scenario. A scenario passes
 * when none of its checks is a FAILURE (WARNING, SKIPPED and INFO do not fail it, as in the
 * suite's own summary).
 */

import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)
const CLI = join(dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist/index.js')

export interface SuiteRun {
  /** `--requirements` (a frozen revision set) or `--spec-version` (the suite as it is, for that revision). */
  select: { requirements: string } | { specVersion: string }
  url: string
  /** Per-scenario timeout of the suite (ms). */
  timeoutMs?: number
}

export interface ScenarioOutcome {
  passed: boolean
  /** `id: message` of each failed check. */
  failures: string[]
  checks: number
}

export interface SuiteResult {
  scenarios: Map<string, ScenarioOutcome>
  seconds: number
  /** The suite's own printed summary (for a failing test's message). */
  summary: string
}

interface Check { id: string, status: string, errorMessage?: string }

export async function runSuite (run: SuiteRun): Promise<SuiteResult> {
  const out = mkdtempSync(join(tmpdir(), 'mcp-conformance-'))
  const select = 'requirements' in run.select ? ['--requirements', run.select.requirements] : ['--spec-version', run.select.specVersion]
  const args = [CLI, 'server', '--url', run.url, ...select, '-o', out, '--timeout', String(run.timeoutMs ?? 30_000)]
  const start = performance.now()
  const summary = await new Promise<string>((resolve, reject) => {
    // The exit code says whether required scenarios failed; the comparison is ours, from the files.
    execFile(process.execPath, args, { cwd: out, maxBuffer: 64 * 1024 * 1024, timeout: 300_000 }, (err, stdout, stderr) => {
      if (err !== null && (err as { killed?: boolean }).killed === true) reject(new Error(`conformance suite timed out: ${stderr}`))
      else resolve(`${stdout}\n${stderr}`)
    })
  })
  const scenarios = new Map<string, ScenarioOutcome>()
  try {
    for (const dir of readdirSync(out)) {
      const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(dir)
      if (m === null) continue
      const checks = JSON.parse(readFileSync(join(out, dir, 'checks.json'), 'utf8')) as Check[]
      const failures = checks.filter(c => c.status === 'FAILURE').map(c => `${c.id}: ${c.errorMessage ?? ''}`)
      scenarios.set(m[1]!, { passed: failures.length === 0, failures, checks: checks.length })
    }
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
  if (scenarios.size === 0) throw new Error(`the conformance suite wrote no results:\n${summary}`)
  return { scenarios, seconds: (performance.now() - start) / 1000, summary }
}

/** Scenario names that pass in `a` but not in `b`, and the reverse. */
export function compare (a: SuiteResult, b: SuiteResult): { lost: string[], gained: string[] } {
  const lost: string[] = []
  const gained: string[] = []
  for (const [name, outcome] of a.scenarios) {
    const other = b.scenarios.get(name)
    if (outcome.passed && other?.passed !== true) lost.push(name)
    if (!outcome.passed && other?.passed === true) gained.push(name)
  }
  return { lost: lost.sort(), gained: gained.sort() }
}
