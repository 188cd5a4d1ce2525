/**
 * A V8 heap snapshot (.heapsnapshot JSON) summed by what holds the memory: self sizes by node
 * type, the `code`-type objects (bytecode, SharedFunctionInfos, feedback, scripts' metadata)
 * by their system name, the scripts' source strings (each Script's `source` edge), and the
 * objects by constructor. For bench/worker-memory.ts.
 */

import { readFileSync } from 'node:fs'

interface Snapshot {
  snapshot: { meta: { node_fields: string[], node_types: [string[], ...unknown[]], edge_fields: string[], edge_types: [string[], ...unknown[]] }, node_count: number }
  nodes: number[]
  edges: number[]
  strings: string[]
}

export interface HeapComposition {
  total: number
  byType: Record<string, number>
  /** `code`-type and `hidden`-type objects by name ('system / BytecodeArray', …). */
  bySystemName: Record<string, number>
  /**
   * The `source` strings of Script objects (every loaded module's source text), by where the
   * module comes from; `external`: strings whose characters live outside V8's heap (Node's own
   * modules, built into the binary: file pages shared with every process), not in the total.
   */
  scriptSources: Record<string, { count: number, bytes: number }>
  /** Bytes of external strings (outside the V8 heap, in the total's string figure). */
  externalStrings: number
  /** Everything else by constructor or name, largest first. */
  byName: Record<string, number>
}

export function heapComposition (path: string): HeapComposition {
  const s = JSON.parse(readFileSync(path, 'utf8')) as Snapshot
  const nf = s.snapshot.meta.node_fields
  const ef = s.snapshot.meta.edge_fields
  const types = s.snapshot.meta.node_types[0]
  const edgeTypes = s.snapshot.meta.edge_types[0]
  const N = nf.length
  const E = ef.length
  const iType = nf.indexOf('type')
  const iName = nf.indexOf('name')
  const iSize = nf.indexOf('self_size')
  const iEdges = nf.indexOf('edge_count')
  const eType = ef.indexOf('type')
  const eName = ef.indexOf('name_or_index')
  const eTo = ef.indexOf('to_node')
  const out: HeapComposition = { total: 0, byType: {}, bySystemName: {}, scriptSources: {}, externalStrings: 0, byName: {} }
  // Node offsets of the external strings: those the synthetic '(External strings)' node holds.
  const external = new Set<number>()
  {
    let e = 0
    for (let n = 0; n < s.nodes.length; n += N) {
      const edges = s.nodes[n + iEdges]!
      if (types[s.nodes[n + iType]!] === 'synthetic' && s.strings[s.nodes[n + iName]!] === '(External strings)') {
        for (let k = e; k < e + edges * E; k += E) external.add(s.edges[k + eTo]!)
      }
      e += edges * E
    }
  }
  for (const n of external) out.externalStrings += s.nodes[n + iSize]!
  const counted = new Set<number>()
  let edge = 0
  for (let n = 0; n < s.nodes.length; n += N) {
    const type = types[s.nodes[n + iType]!]!
    const name = s.strings[s.nodes[n + iName]!]!
    const size = s.nodes[n + iSize]!
    const edges = s.nodes[n + iEdges]!
    out.total += size
    out.byType[type] = (out.byType[type] ?? 0) + size
    if (type === 'code' || type === 'hidden' || type === 'array' || type === 'object shape') {
      const key = `${type}: ${name.replace(/ \/ .*?:.*$/, '')}`
      out.bySystemName[key] = (out.bySystemName[key] ?? 0) + size
    } else if (type === 'object' || type === 'closure' || type === 'native') {
      const key = `${type}: ${name.length > 60 ? name.slice(0, 60) + '…' : name}`
      out.byName[key] = (out.byName[key] ?? 0) + size
    }
    // A Script is a `code` node named by its URL, its text behind an edge named `source`.
    if (type === 'code') {
      for (let e = edge; e < edge + edges * E; e += E) {
        if (edgeTypes[s.edges[e + eType]!] !== 'element' && s.strings[s.edges[e + eName]!] === 'source') {
          const to = s.edges[e + eTo]!
          if (counted.has(to) || !types[s.nodes[to + iType]!]!.includes('string')) continue
          counted.add(to)
          const where = external.has(to) ? 'node: (external)' : name.startsWith('node:') ? 'node:' : name.includes('/node_modules/') ? 'node_modules' : name.includes('/packages/') ? 'portico packages' : 'other'
          const g = out.scriptSources[where] ??= { count: 0, bytes: 0 }
          g.count++
          g.bytes += s.nodes[to + iSize]!
        }
      }
    }
    edge += edges * E
  }
  return out
}
