/**
 * What a committed conformance report describes: the gateway's code at the run. A report is
 * only true of that code, so beside each report `--report FILE` writes `FILE` with `.code.json`
 * for `.yaml` (e2e/conformance/run.ts), and packages/controller/test/conformance-reports.test.ts
 * fails once the code differs from it.
 *
 * The record is a digest of the files' contents, not a commit or a date: it is the same in any
 * checkout of the same code (a clean clone, a shallow one, a tarball, after a rebase or a squash
 * merge rewrote the commits, a merge that did not touch these paths), and it covers what the run
 * actually loaded, uncommitted edits included. Dates and commit order are not (a report committed
 * in the same commit as a later code change would look current; a merge brings old commits in).
 * The commit is kept too, for people: `git diff <commit> -- <paths>` shows what changed since.
 */

import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, sep } from 'node:path'

/**
 * The code a report describes: the controller (Gateway API → config), the engine (config →
 * routing, policies, backends) and the proxy (the process, listeners, xds client). Their tests
 * are not (a test-only change does not change what the suite exercises).
 */
export const CODE_PATHS = ['packages/controller', 'packages/engine', 'packages/proxy'] as const

/** The `.code.json` beside a report. */
export interface CodeRecord {
  /** The report's own `date` (ties this record to that run of the suite). */
  reportDate: string
  /** `sha256:` over the files below (codeDigest()). */
  codeDigest: string
  /** What it covers. */
  paths: string[]
  /** HEAD at the run, and whether CODE_PATHS had uncommitted changes (then the digest is of those). */
  commit: string
  uncommittedChanges: boolean
}

function isCode (path: string): boolean {
  const parts = path.split('/')
  return !parts.includes('test') && !parts.includes('node_modules')
}

/**
 * The files of CODE_PATHS, repository-relative with `/`, sorted: git's tracked and untracked
 * (not ignored) files when `root` is a git work tree, else a walk of the directories (an export
 * without .git). Both give the same list for a clean checkout.
 */
export function codeFiles (root: string): string[] {
  let files: string[]
  try {
    const out = execFileSync('git', ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', ...CODE_PATHS], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 })
    files = [...new Set(out.split('\0').filter(f => f !== ''))]
  } catch {
    files = CODE_PATHS.flatMap(p => walk(root, join(root, p)))
  }
  return files.filter(isCode).sort()
}

function walk (root: string, dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(entry => {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) return []
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return walk(root, path)
    return entry.isFile() ? [relative(root, path).split(sep).join('/')] : []
  })
}

/** sha256 over each file's path and the sha256 of its content (files deleted in the work tree are skipped). */
export function codeDigest (root: string, files = codeFiles(root)): string {
  const all = createHash('sha256')
  for (const file of files) {
    let content: Buffer
    try { content = readFileSync(join(root, file)) } catch { continue }
    all.update(`${file}\0${createHash('sha256').update(content).digest('hex')}\n`)
  }
  return `sha256:${all.digest('hex')}`
}

/** HEAD and whether CODE_PATHS differ from it ('' and true outside a git work tree). */
export function codeCommit (root: string): { commit: string, uncommittedChanges: boolean } {
  try {
    const commit = execFileSync('git', ['-C', root, 'rev-parse', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const status = execFileSync('git', ['-C', root, 'status', '--porcelain', '--', ...CODE_PATHS], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    return { commit, uncommittedChanges: status.split('\n').some(line => line.length > 3 && isCode(line.slice(3))) }
  } catch {
    return { commit: '', uncommittedChanges: true }
  }
}

/** The record of the code as it is now (run.ts takes it before the controller starts). */
export function codeRecord (root: string, reportDate = ''): CodeRecord {
  return { reportDate, codeDigest: codeDigest(root), paths: [...CODE_PATHS], ...codeCommit(root) }
}
