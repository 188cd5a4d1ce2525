/**
 * A parsed YAML (or JSON) config document that can say where any field path sits in the text,
 * so every error names file, line and column. Positions come from the `yaml` library's nodes.
 */

import { LineCounter, parseDocument, isMap, isSeq, isPair, isScalar, visit, type Document, type Node } from 'yaml'
import type { ConfigDiagnostic } from './diagnostics.ts'

export interface YamlSource {
  /** The document as plain data (undefined for an empty file). */
  value: unknown
  /** Syntax errors (duplicate keys, bad indentation, ...). */
  syntaxErrors: ConfigDiagnostic[]
  /**
   * Position of a field: its key in a map, or the item in a list. Falls back to the nearest
   * existing ancestor when the path does not exist (a missing required field).
   */
  locate(path: ReadonlyArray<string | number>): { line: number, col: number } | undefined
}

export function parseYamlSource (text: string): YamlSource {
  const lineCounter = new LineCounter()
  const doc: Document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true })

  const syntaxErrors: ConfigDiagnostic[] = doc.errors.map(err => {
    const pos = lineCounter.linePos(err.pos[0])
    // The library's message repeats the position; keep its first line only.
    const message = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')
    return { path: [], message: `YAML syntax: ${message}`, line: pos.line, col: pos.col }
  })

  const position = (node: { range?: [number, number, number] | null } | null | undefined) => {
    if (node?.range == null) return undefined
    return lineCounter.linePos(node.range[0])
  }

  function locate (path: ReadonlyArray<string | number>) {
    let node: unknown = doc.contents
    let last = position(doc.contents as Node | null)
    for (const part of path) {
      const child = childOf(node, part)
      if (child === undefined) return last
      node = child.value
      last = position(child.key as Node) ?? position(child.value as Node) ?? last
    }
    return last
  }

  let value: unknown
  if (syntaxErrors.length === 0) {
    try {
      value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT })
    } catch (err) {
      // The library throws (a ReferenceError) when aliases expand too much: a "billion laughs"
      // document. It is a config error like any other, placed at the first alias.
      syntaxErrors.push({ ...firstAliasPosition(doc, lineCounter), path: [], message: aliasMessage(err) })
    }
  }
  return { value, syntaxErrors, locate }
}

/**
 * The `yaml` library's bound on alias expansion: for each anchor, (times it is aliased) x
 * (aliases inside it, recursively). A config reuses a block a few times; 100 stops exponential
 * expansion long before it costs memory.
 */
const MAX_ALIAS_COUNT = 100

function aliasMessage (err: unknown): string {
  const text = err instanceof Error ? err.message : String(err)
  if (/excessive alias count/i.test(text)) return `YAML: aliases expand too much (aliases of nodes that hold aliases, as in a "billion laughs" document; the limit is ${MAX_ALIAS_COUNT} expanded nodes per anchor)`
  return `YAML: ${text}`
}

function firstAliasPosition (doc: Document, lineCounter: LineCounter): { line: number, col: number } {
  let offset: number | undefined
  visit(doc, {
    Alias (_key, node) {
      offset = node.range?.[0]
      return visit.BREAK
    }
  })
  return offset === undefined ? { line: 1, col: 1 } : lineCounter.linePos(offset)
}

function childOf (node: unknown, part: string | number): { key?: unknown, value: unknown } | undefined {
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair)) continue
      const k = isScalar(pair.key) ? pair.key.value : pair.key
      if (String(k) === String(part)) return { key: pair.key, value: pair.value }
    }
    return undefined
  }
  if (isSeq(node) && typeof part === 'number') {
    const item = node.items[part]
    return item === undefined ? undefined : { value: item }
  }
  return undefined
}
