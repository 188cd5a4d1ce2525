/**
 * The import graph of a source tree, for the tests that keep it in shape: the engine's rooms
 * and their layers (packages/engine/test/import-graph.test.ts) and the proxy's files without
 * a cycle (packages/proxy/test/import-cycles.test.ts). Read from the text, not a compiler:
 * type-only imports count as much as any other (reading a module means reading the types it
 * names), and so do dynamic `import('./x.ts')`s.
 */

import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'

/** The .ts files under `dir`, as paths relative to it with `/` separators, sorted. */
export function sourceFiles (dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter(f => f.endsWith('.ts'))
    .map(f => f.split('\\').join('/'))
    .sort()
}

/**
 * Static imports and re-exports (`import … from './x.ts'`, `export … from`, `import './x.ts'`,
 * anchored at a line's start so doc comments that quote code do not count; named lists may
 * span lines) and dynamic `import('./x.ts')`. Only relative specifiers: packages are outside.
 * A `new URL('./x.ts', import.meta.url)` (a worker thread's entry) is not an import.
 */
const STATIC = /^(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]|^import\s*['"]([^'"]+)['"]/gm
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g

/** The files `file` (relative to `dir`) imports, relative to `dir`. */
export function importsOf (dir: string, file: string): string[] {
  const text = readFileSync(join(dir, file), 'utf8')
  const specs: string[] = []
  for (const m of text.matchAll(STATIC)) specs.push((m[1] ?? m[2])!)
  for (const m of text.matchAll(DYNAMIC)) specs.push(m[1]!)
  return specs
    .filter(s => s.startsWith('.'))
    .map(s => relative(dir, normalize(join(dir, dirname(file), s))).split('\\').join('/'))
}

/** Every file under `dir` → the files it imports (only those under `dir`). */
export function importGraph (dir: string): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>()
  for (const file of sourceFiles(dir)) graph.set(file, new Set(importsOf(dir, file).filter(to => to.startsWith('..') === false)))
  return graph
}

/**
 * The cycles of a graph: its strongly connected components of more than one node, plus any
 * node that imports itself, each sorted, by Tarjan's algorithm. Nodes only named as targets
 * count as nodes.
 */
export function cycles (graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const nodes = new Set<string>()
  for (const [from, targets] of graph) { nodes.add(from); for (const to of targets) nodes.add(to) }
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const out: string[][] = []
  const visit = (v: string): void => {
    index.set(v, next); low.set(v, next); next++
    stack.push(v); onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)) } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = []
      let w: string
      do { w = stack.pop()!; onStack.delete(w); component.push(w) } while (w !== v)
      if (component.length > 1 || graph.get(v)?.has(v) === true) out.push(component.sort())
    }
  }
  for (const v of [...nodes].sort()) if (!index.has(v)) visit(v)
  return out
}

/** One cycle through a component, as `a → b → … → a`, for a message that shows where to cut. */
export function cyclePath (graph: ReadonlyMap<string, ReadonlySet<string>>, component: readonly string[]): string {
  const inside = new Set(component)
  const start = component[0]!
  // Breadth-first from start back to start, inside the component: the shortest loop through it.
  const previous = new Map<string, string>()
  const queue = [start]
  while (queue.length > 0) {
    const v = queue.shift()!
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!inside.has(w)) continue
      if (w === start) {
        const path = [v]
        while (path[0] !== start) path.unshift(previous.get(path[0]!)!)
        return [...path, start].join(' → ')
      }
      if (!previous.has(w)) { previous.set(w, v); queue.push(w) }
    }
  }
  return component.join(' ↔ ')
}
