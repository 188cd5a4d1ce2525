/**
 * Golden cases: one input file → one output file, one folder per resource kind, shared by the
 * controller's translation cases and the engine's config → IR cases. `scripts/golden --update`
 * (UPDATE_GOLDEN=1) rewrites every output; a review is then the diff.
 *
 * Outputs are written with sorted object keys (array order is kept: it means something), so a
 * change in the order a translator builds an object does not churn every file.
 */

import { readdirSync, readFileSync, writeFileSync, existsSync, rmSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

export interface GoldenCase {
  /** `<folder>/<name>`, what the test is called. */
  id: string
  input: string
  /** The outputs this case may have, in the order an existing one is looked for. */
  outputs: string[]
}

export interface GoldenLayout {
  /** Input file suffix, e.g. `.yaml`. */
  input: string
  /** Possible output suffixes (a case has exactly one of them), e.g. `.ir.json`, `.refused.json`. */
  outputs: string[]
}

/** A kind's folder of files its cases read (certificates a config names), skipped as a case. */
export const FILES = 'files'

export const updating = (): boolean => process.env.UPDATE_GOLDEN === '1'

/** Every case under root's folders (one level: root/<kind>/<case>.<suffix>), sorted. */
export function goldenCases (root: string, layout: GoldenLayout): GoldenCase[] {
  const cases: GoldenCase[] = []
  for (const folder of readdirSync(root).sort()) {
    const dir = join(root, folder)
    if (!statSync(dir).isDirectory()) continue
    for (const file of readdirSync(dir).sort()) {
      if (!file.endsWith(layout.input)) continue
      const base = join(dir, file.slice(0, -layout.input.length))
      cases.push({ id: relative(root, base), input: join(dir, file), outputs: layout.outputs.map(s => base + s) })
    }
  }
  return cases
}

/**
 * Files under root that pair with nothing: an output without its input, a file of another name
 * (but the kind's files/ folder), a file directly in root (cases live in a kind's folder).
 * With UPDATE_GOLDEN=1 stray outputs are removed instead (a renamed or deleted case).
 */
export function unpairedFiles (root: string, layout: GoldenLayout): string[] {
  const stray: string[] = []
  for (const folder of readdirSync(root).sort()) {
    const dir = join(root, folder)
    if (!statSync(dir).isDirectory()) { stray.push(folder); continue }
    for (const file of readdirSync(dir).sort()) {
      const path = join(dir, file)
      // <kind>/files/: what the kind's cases read (PEM files named in a config), not cases.
      if (file === FILES && statSync(path).isDirectory()) continue
      if (file.endsWith(layout.input)) {
        const base = path.slice(0, -layout.input.length)
        const present = layout.outputs.filter(s => existsSync(base + s))
        if (present.length === 0 && !updating()) stray.push(`${relative(root, path)} (no output)`)
        continue
      }
      const suffix = layout.outputs.find(s => file.endsWith(s))
      const base = suffix === undefined ? undefined : path.slice(0, -suffix.length)
      if (base === undefined) stray.push(`${relative(root, path)} (not a case file)`)
      else if (!existsSync(base + layout.input)) {
        if (updating()) rmSync(path)
        else stray.push(`${relative(root, path)} (no input)`)
      }
    }
  }
  return stray
}

/** `N (folder n, …)`: how many cases, per kind folder — what the golden tests print. */
export function caseCount (cases: GoldenCase[]): string {
  const perFolder = new Map<string, number>()
  for (const c of cases) {
    const folder = c.id.split('/')[0]!
    perFolder.set(folder, (perFolder.get(folder) ?? 0) + 1)
  }
  return `${cases.length} (${[...perFolder].map(([f, n]) => `${f} ${n}`).join(', ')})`
}

/** JSON with every object's keys sorted, two-space indented, newline-terminated. */
export function stableJSON (value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v
    const sorted: Record<string, unknown> = {}
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k]
    return sorted
  }, 2) + '\n'
}

/**
 * The case's output text and the file it belongs in → what the file holds. With UPDATE_GOLDEN=1
 * writes the file (removing the case's other outputs); without, a case with no output fails, so
 * a new case is committed with the output its author has read.
 */
export function goldenCompare (c: GoldenCase, output: string, actual: string): { expected: string, path: string } {
  const existing = c.outputs.find(p => existsSync(p))
  if (updating()) {
    for (const p of c.outputs) if (p !== output && existsSync(p)) rmSync(p)
    writeFileSync(output, actual)
    return { expected: actual, path: output }
  }
  if (existing === undefined) return { expected: '(no output recorded: run scripts/golden --update and read it)', path: output }
  // The case's recorded output is of another kind (accepted before, refused now or the reverse).
  if (existing !== output) return { expected: `(recorded as ${relative(join(existing, '..'), existing)})`, path: existing }
  return { expected: readFileSync(output, 'utf8'), path: output }
}
