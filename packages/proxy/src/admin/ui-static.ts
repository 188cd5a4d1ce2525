/**
 * `/ui`: the web UI's static files (the Vite build of @portico/ui, `packages/ui/dist`),
 * with the single-page app's fallback: any `/ui/<path>` that is not a file gets index.html,
 * so a view's URL can be reloaded or shared. Hashed assets are cached for good, index.html
 * never. A Content-Security-Policy keeps the page to its own origin.
 */

import { existsSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, extname, join, normalize, sep } from 'node:path'
import type { FastifyInstance, FastifyReply } from 'fastify'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8'
}

export const UI_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join('; ')

/**
 * The directory of the built UI: `UI_DIR` when set (tests, custom builds), else
 * @portico/ui's `dist/`. Null when there is no index.html there (not built).
 */
export function findUiDir (env: NodeJS.ProcessEnv = process.env): string | null {
  let dir: string
  if (env.UI_DIR !== undefined && env.UI_DIR !== '') {
    dir = env.UI_DIR
  } else {
    try {
      dir = join(dirname(createRequire(import.meta.url).resolve('@portico/ui/package.json')), 'dist')
    } catch {
      return null
    }
  }
  return existsSync(join(dir, 'index.html')) ? dir : null
}

function securityHeaders (reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', UI_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
}

export function registerUiStatic (app: FastifyInstance, dir: string | null): void {
  const notBuilt = async (_req: unknown, reply: FastifyReply) => await reply.code(404).type('text/plain').send('the web UI is not built here: run `pnpm --filter @portico/ui build` (./scripts/setup does)\n')
  if (dir === null) {
    app.get('/ui', notBuilt)
    app.get('/ui/*', notBuilt)
    return
  }
  const root = normalize(dir + sep)
  const index = () => readFileSync(join(root, 'index.html'))
  const sendIndex = async (_req: unknown, reply: FastifyReply) =>
    await securityHeaders(reply).type(TYPES['.html']!).header('cache-control', 'no-cache').send(index())

  app.get('/ui', sendIndex)
  app.get('/ui/*', async (req, reply) => {
    // find-my-way has already percent-decoded the wildcard.
    const rest = (req.params as { '*': string })['*']
    if (rest.includes('\0')) return await reply.code(400).type('text/plain').send('bad path\n')
    const file = normalize(join(root, rest))
    const inside = file.startsWith(root) && !rest.split('/').includes('..')
    if (inside && rest !== '' && isFile(file)) {
      const type = TYPES[extname(file)] ?? 'application/octet-stream'
      const immutable = rest.startsWith('assets/')
      return await securityHeaders(reply).type(type).header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache').send(readFileSync(file))
    }
    // An asset that is not there is a 404; any other path is a view of the app.
    if (rest.startsWith('assets/') || extname(rest) !== '') return await reply.code(404).type('text/plain').send('not found\n')
    return await sendIndex(req, reply)
  })
}

function isFile (path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}
