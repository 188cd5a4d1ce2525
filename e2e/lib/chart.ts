/**
 * The Helm chart under test (charts/portico) and the real `helm` binary that
 * scripts/test-tools builds (env HELM): rendering, linting, golden files of the test cases in
 * charts/portico/tests/cases/*.yaml (outputs in tests/golden/; UPDATE_GOLDEN=1 rewrites them).
 */

import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { TestContext } from 'node:test'
import { parseAllDocuments } from 'yaml'
import { requireTool } from '@portico/testkit/tools'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const CHART_DIR = join(REPO_ROOT, 'charts/portico')
export const CASES_DIR = join(CHART_DIR, 'tests/cases')
export const GOLDEN_DIR = join(CHART_DIR, 'tests/golden')
/** Release name and namespace of every rendering (goldens and the install test). */
export const RELEASE = 'portico'
export const NAMESPACE = 'portico-system'

/** Versions scripts/test-tools builds and caches (read from it, so they are written once). */
function scriptDefault (variable: string): string | null {
  try {
    const text = readFileSync(join(REPO_ROOT, 'scripts/test-tools'), 'utf8')
    return new RegExp(`\\$\\{${variable}:-([^}]+)\\}`).exec(text)?.[1] ?? null
  } catch {
    return null
  }
}

/**
 * helm from the environment (HELM, as scripts/test-tools prints it) or its cache, else null
 * after skipping the test (locally) / throwing (CI) through requireTool.
 */
export function requireHelm (t: TestContext): string | null {
  if (process.env.HELM === undefined || process.env.HELM === '') {
    const version = process.env.PORTICO_HELM_VERSION ?? scriptDefault('PORTICO_HELM_VERSION')
    const cached = join(process.env.PORTICO_CACHE ?? join(homedir(), '.cache/portico'), `helm-${version}`, 'helm')
    if (version !== null && existsSync(cached)) process.env.HELM = cached
  }
  return requireTool(t, 'HELM', 'helm')
}

/** Directory of the extra CRDs (ServiceMonitor, PodMonitor, VPA) scripts/test-tools fetches. */
export function findChartCrds (): string | null {
  if (process.env.CHART_CRDS !== undefined && process.env.CHART_CRDS !== '') return process.env.CHART_CRDS
  const po = scriptDefault('PORTICO_PROMETHEUS_OPERATOR_VERSION')
  const vpa = scriptDefault('PORTICO_VPA_VERSION')
  const dir = join(process.env.PORTICO_CACHE ?? join(homedir(), '.cache/portico'), `chart-crds-${po}-${vpa}`)
  return existsSync(join(dir, '.complete')) ? dir : null
}

export interface RunResult {
  code: number
  stdout: string
  stderr: string
}

export function run (command: string, args: string[], options: { env?: NodeJS.ProcessEnv, timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise(resolve => {
    execFile(command, args, { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 120_000, env: options.env ?? process.env }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1
      resolve({ code, stdout: String(stdout), stderr: String(stderr) })
    })
  })
}

/** Test case names: charts/portico/tests/cases/<name>.yaml. */
export function caseNames (): string[] {
  return readdirSync(CASES_DIR).filter(f => f.endsWith('.yaml')).map(f => f.slice(0, -5)).sort()
}

/** `helm template` of the chart with a case's values (and extra args); throws on failure. */
export async function render (helm: string, caseName: string | null, extra: string[] = []): Promise<string> {
  const args = ['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, ...(caseName !== null ? ['-f', join(CASES_DIR, `${caseName}.yaml`)] : []), ...extra]
  const r = await run(helm, args)
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')} failed (${r.code}):\n${r.stderr}`)
  return r.stdout
}

export interface K8sObject {
  apiVersion: string
  kind: string
  metadata: { name: string, namespace?: string, labels?: Record<string, string>, annotations?: Record<string, string> }
  spec?: any
  data?: Record<string, string>
  rules?: any[]
  subjects?: any[]
  roleRef?: any
  [k: string]: unknown
}

/** The objects of a rendered manifest stream (empty documents dropped). */
export function objectsOf (manifest: string): K8sObject[] {
  const docs = parseAllDocuments(manifest)
  const out: K8sObject[] = []
  for (const doc of docs) {
    if ('errors' in doc && doc.errors.length > 0) throw new Error(`invalid YAML in the rendered chart: ${doc.errors[0]!.message}`)
    const value = doc.toJS() as K8sObject | null
    if (value !== null && value !== undefined) out.push(value)
  }
  return out
}

export function find (objects: K8sObject[], kind: string, name?: string): K8sObject | undefined {
  return objects.find(o => o.kind === kind && (name === undefined || o.metadata.name === name))
}
