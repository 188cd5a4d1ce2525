/**
 * A parsed YAML (or JSON) config document that can say where any field path sits in the text,
 * so every error names file, line and column. Positions come from the `yaml` library's nodes.
 */

import { LineCounter, parseDocument, isMap, isSeq, isPair, isScalar, type Document, type Node } from 'yaml'
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

  return {
    value: syntaxErrors.length > 0 ? undefined : doc.toJS({ maxAliasCount: 100 }),
    syntaxErrors,
    locate
  }
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
