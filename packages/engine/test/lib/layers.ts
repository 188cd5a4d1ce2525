/**
 * The engine's layers, lowest first: each top folder of packages/engine/src is a room, and a
 * file imports its own room or a room of a lower layer. The one list both checks read:
 * import-graph.test.ts holds the imports to it, architecture-doc.test.ts holds the layer
 * table of docs/architecture.md to it.
 */
export const LAYERS: ReadonlyArray<readonly string[]> = [
  ['util'],
  ['ir'],
  ['routing', 'auth', 'traffic', 'cel', 'trace', 'mesh'],
  ['http'],
  ['request'],
  ['policy', 'llm', 'mcp', 'stream', 'inference'],
  ['pipeline'],
  ['engine', 'config'],
  ['(root)']
]
