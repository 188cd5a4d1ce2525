/**
 * Whether a committed ConformanceReport still describes the code: the report a run of the
 * suite just wrote (FRESH) is compared with the committed one (COMMITTED) on everything a run
 * decides — per profile the core and extended results, counts, claimed and unclaimed features,
 * failed and skipped tests — and not on what changes every run (the date) or by hand (the
 * implementation's version and contact).
 *
 * Why this and not a digest of the code or a commit: a report is stale exactly when the code
 * now gives a different result, and most changes to the code change no result. scripts/conformance
 * runs the suites in CI without --write-reports, writes the fresh reports to a temporary
 * directory and calls this for each, so a change that alters a result (a test now failing or
 * passing, a feature claimed or dropped) fails CI until the reports are regenerated
 * (`sudo ./scripts/conformance --write-reports`), while a refactor does not.
 *
 *   node e2e/conformance/compare-reports.ts COMMITTED.yaml FRESH.yaml
 * exits 0 when they agree, 1 with the differences otherwise.
 */

import { readFileSync } from 'node:fs'
import { isDeepStrictEqual } from 'node:util'
import { parse } from 'yaml'

interface Level {
  result?: string
  statistics?: Record<string, number>
  supportedFeatures?: string[]
  unsupportedFeatures?: string[]
  failedTests?: string[]
  skippedTests?: string[]
}

interface Report {
  gatewayAPIVersion?: string
  gatewayAPIChannel?: string
  mode?: string
  profiles?: Array<{ name: string, core?: Level, extended?: Level }>
}

/** What a run decides, in a form that compares equal when the runs agree (lists sorted). */
export function reportOutcome (report: Report): Record<string, unknown> {
  const level = (l: Level | undefined): Record<string, unknown> | undefined => l === undefined
    ? undefined
    : {
        result: l.result,
        statistics: l.statistics ?? {},
        supportedFeatures: [...(l.supportedFeatures ?? [])].sort(),
        unsupportedFeatures: [...(l.unsupportedFeatures ?? [])].sort(),
        failedTests: [...(l.failedTests ?? [])].sort(),
        skippedTests: [...(l.skippedTests ?? [])].sort()
      }
  const profiles: Record<string, unknown> = {}
  for (const p of report.profiles ?? []) profiles[p.name] = { core: level(p.core), extended: level(p.extended) }
  return { gatewayAPIVersion: report.gatewayAPIVersion, gatewayAPIChannel: report.gatewayAPIChannel, mode: report.mode, profiles }
}

/** Each difference as `path: committed → fresh`; empty when the reports agree. */
export function compareReports (committed: Report, fresh: Report): string[] {
  const out: string[] = []
  const walk = (path: string, a: unknown, b: unknown): void => {
    if (isDeepStrictEqual(a, b)) return
    if (Array.isArray(a) && Array.isArray(b)) {
      const gone = a.filter(x => !b.includes(x))
      const added = b.filter(x => !a.includes(x))
      out.push(`${path}: ${gone.length > 0 ? `no longer ${JSON.stringify(gone)}` : ''}${gone.length > 0 && added.length > 0 ? '; ' : ''}${added.length > 0 ? `now also ${JSON.stringify(added)}` : ''}`)
      return
    }
    if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
      for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
        walk(path === '' ? key : `${path}.${key}`, (a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
      }
      return
    }
    out.push(`${path}: ${JSON.stringify(a)} → ${JSON.stringify(b)}`)
  }
  walk('', reportOutcome(committed), reportOutcome(fresh))
  return out
}

function main (): void {
  const [committedFile, freshFile] = process.argv.slice(2)
  if (committedFile === undefined || freshFile === undefined) {
    console.error('usage: compare-reports.ts COMMITTED.yaml FRESH.yaml')
    process.exit(2)
  }
  let committed: Report
  try {
    committed = parse(readFileSync(committedFile, 'utf8')) as Report
  } catch (err) {
    console.error(`${committedFile}: ${(err as Error).message}`)
    process.exit(1)
  }
  const fresh = parse(readFileSync(freshFile, 'utf8')) as Report
  const differences = compareReports(committed, fresh)
  if (differences.length === 0) {
    console.error(`conformance: ${committedFile} agrees with this run`)
    return
  }
  console.error(`conformance: ${committedFile} is not what this code gives (${freshFile}):`)
  for (const d of differences) console.error(`  ${d}`)
  process.exit(1)
}

if (import.meta.main) main()
