/**
 * Copies what one workspace package needs at run time into OUT, keeping the workspace's
 * layout, for the images (deploy/*.Dockerfile) after a `pnpm install --prod --filter PKG...`:
 *
 *   node scripts/runtime-tree.ts @portico/controller /out
 *
 * - the package and every workspace package it depends on (transitively): package.json,
 *   bin/, src/, schema/ and a built dist/, with their node_modules links — never test/;
 * - each dependency's directory in the pnpm virtual store (node_modules/.pnpm/<entry>), found
 *   by following those links, and the store's hoisted links (.pnpm/node_modules) to them;
 * - protos/.
 *
 * Why not `pnpm deploy`: it copies workspace packages into node_modules/, where Node refuses
 * to strip TypeScript types; here they stay in packages/ and run as in a clone. pnpm also
 * installs the workspace root's dependencies under any filter, so the filtered install has
 * more than the package needs; this keeps only what its graph reaches.
 */

import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, symlinkSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'

const WORKSPACE_FILES = ['package.json', 'bin', 'src', 'schema', 'dist']

export function runtimeTree (root: string, name: string, out: string): { workspace: string[], store: string[] } {
  const store = join(root, 'node_modules/.pnpm')
  const byName = new Map<string, string>()
  for (const entry of readdirSync(join(root, 'packages'))) {
    const manifest = join(root, 'packages', entry, 'package.json')
    if (existsSync(manifest)) byName.set((JSON.parse(readFileSync(manifest, 'utf8')) as { name: string }).name, join(root, 'packages', entry))
  }
  const start = byName.get(name)
  if (start === undefined) throw new Error(`no workspace package named ${name} under ${root}/packages`)

  const workspace = new Set<string>()
  const entries = new Set<string>()
  const queue: string[] = []
  const visitModules = (nodeModules: string) => {
    if (!existsSync(nodeModules)) return
    for (const e of readdirSync(nodeModules)) {
      if (e.startsWith('.')) continue
      const p = join(nodeModules, e)
      const links = e.startsWith('@') ? readdirSync(p).map(x => join(p, x)) : [p]
      for (const link of links) {
        if (!lstatSync(link).isSymbolicLink()) continue
        let real: string
        try {
          real = realpathSync(link)
        } catch {
          continue // a dangling link (a bin of a package not installed): nothing to copy
        }
        const inStore = relative(store, real)
        if (!inStore.startsWith('..')) {
          const top = inStore.split(sep)[0]!
          if (!entries.has(top)) {
            entries.add(top)
            queue.push(join(store, top, 'node_modules'))
          }
        } else if (!relative(root, real).startsWith('..') && !workspace.has(real)) {
          workspace.add(real)
          queue.push(join(real, 'node_modules'))
        }
      }
    }
  }
  workspace.add(realpathSync(start))
  queue.push(join(start, 'node_modules'))
  while (queue.length > 0) visitModules(queue.shift()!)

  mkdirSync(out, { recursive: true })
  const copy = (from: string, to: string) => cpSync(from, to, { recursive: true, verbatimSymlinks: true })
  for (const pkg of workspace) {
    const rel = relative(root, pkg)
    for (const f of WORKSPACE_FILES) if (existsSync(join(pkg, f))) copy(join(pkg, f), join(out, rel, f))
    // Only the links (node_modules/.bin and links to what the graph reached).
    if (existsSync(join(pkg, 'node_modules'))) copy(join(pkg, 'node_modules'), join(out, rel, 'node_modules'))
  }
  for (const entry of entries) copy(join(store, entry), join(out, 'node_modules/.pnpm', entry))
  // The hoisted links packages use to reach undeclared dependencies (pnpm's hoist-pattern).
  const hoisted = join(store, 'node_modules')
  if (existsSync(hoisted)) {
    const keep = (link: string) => {
      try {
        const inStore = relative(store, realpathSync(link))
        return !inStore.startsWith('..') && entries.has(inStore.split(sep)[0]!)
      } catch {
        return false
      }
    }
    for (const e of readdirSync(hoisted)) {
      const p = join(hoisted, e)
      const links = e.startsWith('@') ? readdirSync(p).map(x => join(p, x)) : [p]
      for (const link of links) {
        if (!lstatSync(link).isSymbolicLink() || !keep(link)) continue
        const target = join(out, relative(root, link))
        mkdirSync(dirname(target), { recursive: true })
        symlinkSync(readlinkSync(link), target)
      }
    }
  }
  if (existsSync(join(root, 'protos'))) copy(join(root, 'protos'), join(out, 'protos'))
  return { workspace: [...workspace].map(p => relative(root, p)).sort(), store: [...entries].sort() }
}

if (import.meta.main) {
  const [name, out] = process.argv.slice(2)
  if (name === undefined || out === undefined) {
    process.stderr.write('usage: node scripts/runtime-tree.ts PACKAGE OUT\n')
    process.exit(2)
  }
  const root = resolve(import.meta.dirname, '..')
  const tree = runtimeTree(root, name, resolve(out))
  process.stdout.write(`${name}: workspace packages ${tree.workspace.join(', ')}; ${tree.store.length} dependencies\n`)
}
