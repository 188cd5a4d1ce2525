/**
 * The rooms of packages/engine/src and the one direction their imports run (issue 15,
 * "Imports run one way"). Each top folder is a room; a file may import files of its own room,
 * or of a room in a LOWER layer — never one in its own layer or above:
 *
 *   0  util                  leaf helpers: errors, durations, byte sizes, linear-time regexes
 *   1  ir                    the floor: IR data types, their grammar, contentVersion, validateIR
 *   2  routing auth traffic  route matching; auth and gRPC clients (JWT, OIDC, ext-authz, RLS, ext-proc);
 *      cel trace mesh        CEL expressions; trace events and snapshots; the mesh identity and HBONE tunnels
 *   3  http                  the transport: client edges, headers, bodies, upstream pools and calls
 *   4  request               per-request state: RequestContext, the compiled config's types, the
 *                            policy contract (CompiledPolicy), the MCP and LLM call records
 *   5  policy llm mcp stream  what runs on a request or connection: policies, LLM usage, the MCP gateway, TCP/TLS forwarding,
 *      inference             an InferencePool's endpoint picker (its endpoints and protocol)
 *   6  pipeline              one request from route to answer
 *   7  engine config         compile and install an IR; the YAML front end that produces one
 *   8  (root)                index.ts, the package barrel
 *
 * The list itself is test/lib/layers.ts (architecture-doc.test.ts holds the table of
 * docs/architecture.md to it too).
 *
 * Type-only imports count: reading a room means reading the types it names (the cycle the
 * issue started from — ir/types.ts → policy/types.ts → RequestContext — was type-only).
 *
 * Rooms below request/ that must see a request's state (cel/, trace/, http/) declare the
 * narrow interface they read beside the code that reads it; RequestContext satisfies it.
 *
 * Imports that run against this order would be listed in ALLOWED, each named, grouped by
 * the work that removes them; it is empty now (issue 15). The test fails on any import that
 * is neither in order nor listed, and on any cycle between rooms outside the list; an entry
 * that no longer matches an import is reported so it can be deleted. The list only shrinks:
 * never add to it.
 *
 * mcp/ has rooms of its own (issue 54; mcp/README.md says what goes where), in one order:
 *
 *   client     the client-facing listeners: streamable HTTP and legacy SSE, 2026-07-28 POSTs
 *   session    sessions and routing: the gateway, multiplexing, names, sessions on any replica
 *   upstream   targets behind one transport interface: stdio, SSE, streamable, stateless
 *   revisions  the bridge between initialize-era and 2026-07-28 messages (both sides use it)
 *   protocol   the floor: JSON-RPC messages and codes, message limits, SSE writing
 *
 * A file of mcp/ imports its own room or a lower one; the rest of the engine enters mcp/ only
 * through MCP_DOORS.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
// The graph reading and cycle finding the proxy's cycle test uses too (one piece serves both).
import { cycles, importsOf, sourceFiles } from '../../testkit/src/import-graph.ts'
import { LAYERS } from './lib/layers.ts'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

/**
 * Imports against the order that still exist, as `from -> to` (paths under src/): none since
 * RequestContext and the compiled config's types moved to request/. Never add one.
 */
const ALLOWED: ReadonlySet<string> = new Set<string>([])

interface Edge { from: string, to: string }

function room (file: string): string {
  const slash = file.indexOf('/')
  return slash === -1 ? '(root)' : file.slice(0, slash)
}

function crossRoomEdges (): Edge[] {
  const edges: Edge[] = []
  for (const from of sourceFiles(SRC)) {
    for (const to of new Set(importsOf(SRC, from))) if (room(from) !== room(to)) edges.push({ from, to })
  }
  return edges
}

const RANK = new Map(LAYERS.flatMap((rooms, rank) => rooms.map(r => [r, rank] as const)))
const key = (e: Edge): string => `${e.from} -> ${e.to}`

/** The room graph, one line per room: its imports, with how many file imports each (listed ones marked). */
function describeGraph (edges: Edge[]): string {
  const counts = new Map<string, Map<string, { n: number, allowed: number }>>()
  for (const e of edges) {
    const targets = counts.get(room(e.from)) ?? new Map()
    counts.set(room(e.from), targets)
    const c = targets.get(room(e.to)) ?? { n: 0, allowed: 0 }
    c.n++
    if (ALLOWED.has(key(e))) c.allowed++
    targets.set(room(e.to), c)
  }
  return [...counts.entries()]
    .sort(([a], [b]) => (RANK.get(a) ?? 99) - (RANK.get(b) ?? 99) || a.localeCompare(b))
    .map(([from, targets]) => `  ${from.padEnd(9)} → ${[...targets.entries()]
      .sort(([a], [b]) => (RANK.get(a) ?? 99) - (RANK.get(b) ?? 99) || a.localeCompare(b))
      .map(([to, c]) => `${to}(${c.n}${c.allowed > 0 ? `, ${c.allowed} listed` : ''})`).join(' ')}`)
    .join('\n')
}

/** Cycles between rooms (strongly connected components of more than one room). */
function roomCycles (edges: Edge[]): string[][] {
  const graph = new Map<string, Set<string>>()
  for (const e of edges) {
    if (!graph.has(room(e.from))) graph.set(room(e.from), new Set())
    if (!graph.has(room(e.to))) graph.set(room(e.to), new Set())
    graph.get(room(e.from))!.add(room(e.to))
  }
  return cycles(graph)
}

test('import graph: every room of packages/engine/src is in LAYERS', () => {
  const rooms = new Set(sourceFiles(SRC).map(room))
  const missing = [...rooms].filter(r => !RANK.has(r))
  assert.deepEqual(missing, [], `rooms without a layer: ${missing.join(', ')} — add them to LAYERS in test/lib/layers.ts (and the tables above it and in docs/architecture.md)`)
})

test('import graph: imports run down the layers (ir is the floor); only listed exceptions run up', (t) => {
  const edges = crossRoomEdges()
  const upward = edges.filter(e => (RANK.get(room(e.to)) ?? Infinity) >= (RANK.get(room(e.from)) ?? -Infinity))
  const fresh = upward.filter(e => !ALLOWED.has(key(e)))
  const stale = [...ALLOWED].filter(k => !upward.some(e => key(e) === k))
  if (stale.length > 0) t.diagnostic(`ALLOWED entries with no import left (delete them): ${stale.join(', ')}`)
  assert.deepEqual(fresh.map(key), [], [
    'imports against the layer order (see the top of test/import-graph.test.ts):',
    ...fresh.map(e => `  ${key(e)}   (${room(e.from)} is layer ${RANK.get(room(e.from))}, ${room(e.to)} is layer ${RANK.get(room(e.to))})`),
    'the room graph today (file imports per room; "listed" = in ALLOWED):',
    describeGraph(edges)
  ].join('\n'))
})

test('import graph: no cycle between rooms outside the listed exceptions', (t) => {
  const edges = crossRoomEdges()
  const cycles = roomCycles(edges.filter(e => !ALLOWED.has(key(e))))
  t.diagnostic(`cycles through listed exceptions (to remove): ${roomCycles(edges).map(c => c.join(' ↔ ')).join('; ') || 'none'}`)
  assert.deepEqual(cycles, [], `cycles between rooms: ${cycles.map(c => c.join(' ↔ ')).join('; ')}\nthe room graph today:\n${describeGraph(edges)}`)
})

test('import graph: ir/ imports nothing above it (only ir/ and util/)', () => {
  const out = crossRoomEdges().filter(e => room(e.from) === 'ir' && room(e.to) !== 'util')
  assert.deepEqual(out.map(key), [])
})

/** mcp/'s rooms, top to bottom (see the table at the top): imports run down, never up or sideways. */
const MCP_LAYERS: ReadonlyArray<readonly string[]> = [['client'], ['session'], ['upstream'], ['revisions'], ['protocol']]
const MCP_RANK = new Map(MCP_LAYERS.flatMap((rooms, rank) => rooms.map(r => [r, rank] as const)))
/** The files of mcp/ the rest of the engine may import: the HTTP listener and the gateway. */
const MCP_DOORS: ReadonlySet<string> = new Set(['mcp/client/http.ts', 'mcp/session/gateway.ts'])

/** The room of a file under mcp/ (`client`, `session`, …); `(loose)` for a file directly in mcp/. */
function mcpRoom (file: string): string {
  const parts = file.split('/')
  return parts.length >= 3 ? parts[1]! : '(loose)'
}

function mcpEdges (): Edge[] {
  const edges: Edge[] = []
  for (const from of sourceFiles(SRC).filter(f => f.startsWith('mcp/'))) {
    for (const to of new Set(importsOf(SRC, from))) if (to.startsWith('mcp/') && mcpRoom(from) !== mcpRoom(to)) edges.push({ from, to })
  }
  return edges
}

test('import graph: every file of mcp/ is in one of its rooms', () => {
  const loose = sourceFiles(SRC).filter(f => f.startsWith('mcp/') && !MCP_RANK.has(mcpRoom(f)))
  assert.deepEqual(loose, [], `files of mcp/ outside its rooms (${[...MCP_RANK.keys()].join(', ')}): put them in one, or add the room to MCP_LAYERS and mcp/README.md`)
})

test('import graph: mcp/ rooms import down (client → session → upstream → revisions → protocol)', () => {
  const upward = mcpEdges().filter(e => MCP_RANK.get(mcpRoom(e.to))! <= MCP_RANK.get(mcpRoom(e.from))!)
  assert.deepEqual(upward.map(key), [], 'imports against the order of mcp/ rooms (see the top of test/import-graph.test.ts and mcp/README.md)')
})

test('import graph: the rest of the engine enters mcp/ only through its doors', () => {
  const edges = crossRoomEdges().filter(e => room(e.to) === 'mcp' && !MCP_DOORS.has(e.to))
  assert.deepEqual(edges.map(key), [], `imports of mcp/ other than ${[...MCP_DOORS].join(', ')}`)
})
