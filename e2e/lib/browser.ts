/**
 * A real browser for UI tests: Debian's Chromium (`scripts/test-tools` installs it and
 * exports CHROMIUM) driven by playwright-core — headless, sandbox off (we run as root in
 * containers), no background traffic, a fresh profile in a temp directory. Screenshots go
 * to `.artifacts/ui/` at the repo root (gitignored), kept as test artifacts.
 */

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { REPO_ROOT } from '@portico/testkit/portico'
import { findTool } from '@portico/testkit/tools'

export const ARTIFACTS_DIR = join(REPO_ROOT, '.artifacts/ui')

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
  '--no-first-run',
  '--no-default-browser-check'
]

/** The Chromium binary: $CHROMIUM, else `chromium` on PATH; null when there is none. */
export function findChromium (): string | null {
  const found = findTool('CHROMIUM', 'chromium')
  if (found === null) return null
  return found === 'chromium' ? '/usr/bin/chromium' : found
}

export interface Browser {
  context: BrowserContext
  page: Page
  /** Console errors and uncaught page errors seen so far (CSP violations show up here). */
  problems: string[]
  screenshot(name: string): Promise<string>
  close(): Promise<void>
}

export async function launchBrowser (executablePath: string, options: { width?: number, height?: number } = {}): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'portico-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: options.width ?? 1440, height: options.height ?? 960 },
    timeout: 60_000
  })
  const page = context.pages()[0] ?? await context.newPage()
  const problems: string[] = []
  page.on('console', msg => { if (msg.type() === 'error') problems.push(`console: ${msg.text()}`) })
  page.on('pageerror', err => problems.push(`page error: ${err.message}`))
  mkdirSync(ARTIFACTS_DIR, { recursive: true })
  return {
    context,
    page,
    problems,
    async screenshot (name) {
      const path = join(ARTIFACTS_DIR, `${name}.png`)
      await page.screenshot({ path, fullPage: true })
      return path
    },
    async close () {
      await context.close().catch(() => {})
      rmSync(profile, { recursive: true, force: true })
    }
  }
}
