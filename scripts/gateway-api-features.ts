/**
 * Writes conformance/<version>-features.json: every FeatureName of a Gateway API release
 * (its channel, the feature sets and conformance profiles it belongs to) and every test of
 * that release's conformance suite with the features it needs. Read from the Go module's
 * source, so the committed list is what the module says, and CI (which has no Go module
 * cache) can check docs/conformance.md against it
 * (packages/controller/test/conformance-doc-table.test.ts).
 *
 *   node scripts/gateway-api-features.ts            # v1.7.0 (GOTOOLCHAIN=go1.27.3 fetches Go 1.27 if needed)
 *   node scripts/gateway-api-features.ts --check    # fails when the committed file differs
 *
 * The Go source is parsed, not run: the shapes read (const blocks of `Support… = "…"`,
 * `Feature{Name, Channel}` values, `sets.New(…)` lists, `ConformanceTest{ShortName, Features}`)
 * are the ones the module has used since v1.1; anything the parser cannot place fails the run
 * rather than being left out.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const VERSION = 'v1.7.0'
export const FEATURES_PATH = fileURLToPath(new URL(`../conformance/${VERSION}-features.json`, import.meta.url))

export interface FeatureEntry {
  name: string
  channel: 'standard' | 'experimental'
  /** The `pkg/features` sets holding it (e.g. GatewayExtendedFeatures). */
  sets: string[]
  /** Conformance profile → `core` or `extended`. */
  profiles: Record<string, 'core' | 'extended'>
  /** ShortNames of the suite's tests that need it. */
  tests: string[]
}

export interface TestEntry {
  shortName: string
  features: string[]
  provisional: boolean
}

export interface FeatureList {
  module: string
  generatedBy: string
  features: FeatureEntry[]
  tests: TestEntry[]
}

function stripComments (go: string): string {
  return go.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '')
}

/** The `sets.New(...)` member list starting at `from`, balanced parentheses. */
function setMembers (src: string, from: number): string[] {
  const open = src.indexOf('(', from)
  let depth = 0
  for (let i = open; i < src.length; i++) {
    if (src[i] === '(') depth++
    else if (src[i] === ')' && --depth === 0) {
      return src.slice(open + 1, i).split(',').map(s => s.trim()).filter(s => s !== '')
    }
  }
  throw new Error(`unbalanced sets.New at ${from}`)
}

/** A regex group that the pattern always captures (a parse error otherwise). */
function g (m: RegExpMatchArray, i: number): string {
  const v = m[i]
  if (v === undefined) throw new Error(`no group ${i} in ${m[0]}`)
  return v
}

export function parseModule (featuresDir: string, conformanceDir: string): Omit<FeatureList, 'module' | 'generatedBy'> {
  const src = readdirSync(featuresDir).filter(f => f.endsWith('.go') && !f.endsWith('_test.go')).sort()
    .map(f => stripComments(readFileSync(join(featuresDir, f), 'utf8'))).join('\n')

  // Constant identifier → feature name (typed `FeatureName = "…"` or untyped `= "…"`).
  const names = new Map<string, string>()
  for (const m of src.matchAll(/\b(Support\w+)\s+(?:FeatureName\s+)?=\s+"([^"]+)"/g)) names.set(g(m, 1), g(m, 2))

  // Feature variable → {name, channel}.
  const featureVars = new Map<string, { name: string, channel: 'standard' | 'experimental' }>()
  for (const m of src.matchAll(/\b(\w+)\s*=\s*Feature\{\s*Name:\s*(\w+),\s*Channel:\s*(\w+),?\s*\}/g)) {
    const name = names.get(g(m, 2))
    if (name === undefined) throw new Error(`feature ${g(m, 1)} names unknown constant ${g(m, 2)}`)
    const channel = g(m, 3) === 'FeatureChannelExperimental' ? 'experimental' : g(m, 3) === 'FeatureChannelStandard' ? 'standard' : undefined
    if (channel === undefined) throw new Error(`feature ${g(m, 1)}: unknown channel ${g(m, 3)}`)
    featureVars.set(g(m, 1), { name, channel })
  }

  // Named sets (var X = sets.New(...)), AllFeatures aside.
  const sets = new Map<string, string[]>()
  for (const m of src.matchAll(/\b(\w+Features)\s*=\s*sets\.New\(/g)) {
    const members = setMembers(src, m.index)
    for (const v of members) if (!featureVars.has(v)) throw new Error(`set ${g(m, 1)}: unknown feature ${v}`)
    sets.set(g(m, 1), members.map(v => featureVars.get(v)!.name))
  }
  const all = src.match(/AllFeatures\s*=\s*sets\.New\[Feature\]\(\)\.([\s\S]*?)\n\s*\n/)
  if (all === null) throw new Error('AllFeatures not found')
  const allSets = [...g(all, 1).matchAll(/Insert\((\w+)\.UnsortedList\(\)\.\.\.\)/g)].map(m => g(m, 1))
  for (const s of allSets) if (!sets.has(s)) throw new Error(`AllFeatures inserts unknown set ${s}`)

  const features = new Map<string, FeatureEntry>()
  for (const s of allSets) {
    for (const name of sets.get(s)!) {
      const v = [...featureVars.values()].find(f => f.name === name)!
      const entry = features.get(name) ?? { name, channel: v.channel, sets: [], profiles: {}, tests: [] }
      entry.sets.push(s)
      features.set(name, entry)
    }
  }
  for (const name of names.values()) if (!features.has(name)) throw new Error(`FeatureName ${name} is in no set of AllFeatures`)

  // Profiles (conformance/utils/suite/profiles.go).
  const profilesSrc = stripComments(readFileSync(join(conformanceDir, 'utils/suite/profiles.go'), 'utf8'))
  const profileNames = new Map<string, string>()
  for (const m of profilesSrc.matchAll(/\b(\w+ConformanceProfileName)\s+ConformanceProfileName\s*=\s*"([^"]+)"/g)) profileNames.set(g(m, 1), g(m, 2))
  for (const m of profilesSrc.matchAll(/\w+ConformanceProfile\s*=\s*ConformanceProfile\{\s*Name:\s*(\w+),([\s\S]*?)\n\t\}/g)) {
    const profile = profileNames.get(g(m, 1))
    if (profile === undefined) throw new Error(`unknown profile name ${g(m, 1)}`)
    const [core, extended] = g(m, 2).split('ExtendedFeatures:')
    if (core === undefined || extended === undefined) throw new Error(`${profile}: no ExtendedFeatures`)
    for (const c of core.matchAll(/features\.(Support\w+)/g)) {
      const name = names.get(g(c, 1))
      if (name === undefined) throw new Error(`${profile}: unknown core feature ${g(c, 1)}`)
      features.get(name)!.profiles[profile] = 'core'
    }
    for (const e of extended.matchAll(/features\.(\w+Features)\b/g)) {
      const set = sets.get(g(e, 1))
      if (set === undefined) throw new Error(`${profile}: unknown set ${g(e, 1)}`)
      for (const name of set) features.get(name)!.profiles[profile] ??= 'extended'
    }
  }

  // The suite's tests.
  // The suite's tests: tests/*.go and tests/mesh/*.go (the MESH profiles' own tests).
  const tests: TestEntry[] = []
  const testFiles = ['tests', 'tests/mesh'].flatMap(dir => readdirSync(join(conformanceDir, dir))
    .filter(f => f.endsWith('.go') && !f.endsWith('_test.go')).map(f => `${dir}/${f}`)).sort()
  for (const file of testFiles) {
    const go = stripComments(readFileSync(join(conformanceDir, file), 'utf8'))
    for (const part of go.split(/ConformanceTest\{/).slice(1)) {
      const shortName = part.match(/ShortName:\s*"([^"]+)"/)?.[1]
      if (shortName === undefined) continue
      const list = part.match(/Features:\s*\[\]features\.FeatureName\{([^}]*)\}/)?.[1]
      if (list === undefined) throw new Error(`${file}: test ${shortName} has no Features list this parser reads`)
      const needs = [...list.matchAll(/features\.(Support\w+)/g)].map(f => {
        const name = names.get(f[1] ?? '')
        if (name === undefined) throw new Error(`${file}: ${shortName} needs unknown ${f[1]}`)
        return name
      })
      tests.push({ shortName, features: needs, provisional: /Provisional:\s*true/.test(part) })
    }
  }
  tests.sort((a, b) => a.shortName.localeCompare(b.shortName))
  for (const t of tests) for (const f of t.features) features.get(f)!.tests.push(t.shortName)

  return { features: [...features.values()].sort((a, b) => a.name.localeCompare(b.name)), tests }
}

function moduleDir (path: string): string {
  const out = execFileSync('go', ['mod', 'download', '-json', `${path}@${VERSION}`], {
    encoding: 'utf8',
    // v1.7.0's go.mod asks for Go 1.27; `go` fetches that toolchain from the proxy.
    env: { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'go1.27.3' }
  })
  const info = JSON.parse(out) as { Dir?: string, Error?: string }
  if (info.Dir === undefined) throw new Error(`go mod download ${path}@${VERSION}: ${info.Error ?? 'no Dir'}`)
  return info.Dir
}

export function render (): string {
  const parsed = parseModule(join(moduleDir('sigs.k8s.io/gateway-api'), 'pkg/features'), moduleDir('sigs.k8s.io/gateway-api/conformance'))
  const list: FeatureList = {
    module: `sigs.k8s.io/gateway-api@${VERSION} (pkg/features; conformance@${VERSION} utils/suite/profiles.go, tests/*.go, tests/mesh/*.go)`,
    generatedBy: 'node scripts/gateway-api-features.ts',
    ...parsed
  }
  // One line per feature and per test: diffs between releases read as added/changed lines.
  const lines = (items: unknown[]): string => items.map(i => `    ${JSON.stringify(i)}`).join(',\n')
  return `{\n  "module": ${JSON.stringify(list.module)},\n  "generatedBy": ${JSON.stringify(list.generatedBy)},\n` +
    `  "features": [\n${lines(list.features)}\n  ],\n  "tests": [\n${lines(list.tests)}\n  ]\n}\n`
}

if (import.meta.main) {
  const text = render()
  if (process.argv.includes('--check')) {
    if (readFileSync(FEATURES_PATH, 'utf8') !== text) {
      process.stderr.write(`${FEATURES_PATH} is out of date: run node scripts/gateway-api-features.ts\n`)
      process.exit(1)
    }
  } else {
    writeFileSync(FEATURES_PATH, text)
    process.stdout.write(`wrote ${FEATURES_PATH}\n`)
  }
}
