/**
 * CPU and heap profiles in pprof format (gzipped protobuf, as `go tool pprof` reads them),
 * taken with V8's own profilers through the inspector protocol and encoded with
 * `pprof-format`. No native addon: nothing to build. Loaded with the admin app (the heap
 * sampler, which runs from the start, is heap-sampler.ts).
 */

import { Session } from 'node:inspector/promises'
import { gzipSync } from 'node:zlib'
import { Function as PFunction, Line, Location, Profile, Sample, StringTable, ValueType } from 'pprof-format'
import { PorticoError } from '@portico/engine'
import type { HeapNode, HeapSampler } from './heap-sampler.ts'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}

/** A call-tree node with the value(s) attributed to it (not its children). */
interface TreeNode {
  callFrame: CallFrame
  values: number[]
  children: TreeNode[]
}

interface ProfileShape {
  sampleTypes: Array<[type: string, unit: string]>
  periodType: [type: string, unit: string]
  period: number
  durationNanos: number
}

/** Walks a call tree into a pprof profile: one location per tree node, stacks leaf first. */
export function treeToPprof (root: TreeNode, shape: ProfileShape): Uint8Array {
  const strings = new StringTable()
  const functions: PFunction[] = []
  const functionIds = new Map<string, number>()
  const locations: Location[] = []
  const samples: Sample[] = []

  const functionId = (cf: CallFrame): number => {
    const name = cf.functionName === '' ? '(anonymous)' : cf.functionName
    const key = `${name}\0${cf.url}\0${cf.lineNumber}`
    let id = functionIds.get(key)
    if (id === undefined) {
      id = functions.length + 1
      functionIds.set(key, id)
      functions.push(new PFunction({ id, name: strings.dedup(name), systemName: strings.dedup(name), filename: strings.dedup(cf.url), startLine: cf.lineNumber + 1 }))
    }
    return id
  }

  const visit = (node: TreeNode, stack: number[]) => {
    const isRoot = node.callFrame.functionName === '(root)'
    let here = stack
    if (!isRoot) {
      const id = locations.length + 1
      locations.push(new Location({ id, line: [new Line({ functionId: functionId(node.callFrame), line: node.callFrame.lineNumber + 1 })] }))
      here = [id, ...stack]
      if (node.values.some(v => v > 0)) samples.push(new Sample({ locationId: here, value: node.values }))
    }
    for (const child of node.children) visit(child, here)
  }
  visit(root, [])

  const profile = new Profile({
    sampleType: shape.sampleTypes.map(([type, unit]) => new ValueType({ type: strings.dedup(type), unit: strings.dedup(unit) })),
    sample: samples,
    location: locations,
    function: functions,
    stringTable: strings,
    timeNanos: BigInt(Date.now()) * 1_000_000n,
    durationNanos: shape.durationNanos,
    periodType: new ValueType({ type: strings.dedup(shape.periodType[0]), unit: strings.dedup(shape.periodType[1]) }),
    period: shape.period
  })
  return gzipSync(profile.encode())
}

interface CpuProfileNode {
  id: number
  callFrame: CallFrame
  hitCount?: number
  children?: number[]
}

interface CpuProfile {
  nodes: CpuProfileNode[]
  startTime: number
  endTime: number
}

let busy = false

/** Samples the CPU for `seconds` (1–300) and returns a pprof profile. One at a time. */
export async function cpuProfile (seconds: number, hz = 100): Promise<Uint8Array> {
  if (busy) throw new PorticoError('PORTICO_PROFILE_BUSY', 'a CPU profile is already being taken')
  busy = true
  const session = new Session()
  session.connect()
  try {
    const intervalUs = Math.round(1_000_000 / hz)
    await session.post('Profiler.enable')
    await session.post('Profiler.setSamplingInterval', { interval: intervalUs })
    await session.post('Profiler.start')
    await new Promise(resolve => setTimeout(resolve, seconds * 1000))
    const { profile } = await session.post('Profiler.stop') as unknown as { profile: CpuProfile }
    await session.post('Profiler.disable')
    const byId = new Map(profile.nodes.map(n => [n.id, n]))
    const toTree = (n: CpuProfileNode): TreeNode => ({
      callFrame: n.callFrame,
      values: [n.hitCount ?? 0, (n.hitCount ?? 0) * intervalUs * 1000],
      children: (n.children ?? []).map(id => toTree(byId.get(id)!))
    })
    return treeToPprof(toTree(profile.nodes[0]!), {
      sampleTypes: [['samples', 'count'], ['cpu', 'nanoseconds']],
      periodType: ['cpu', 'nanoseconds'],
      period: intervalUs * 1000,
      durationNanos: (profile.endTime - profile.startTime) * 1000
    })
  } finally {
    session.disconnect()
    busy = false
  }
}

/** A heap profile in pprof format from `sampler` (started with the admin server: admin/heap-sampler.ts). */
export async function heapProfile (sampler: HeapSampler): Promise<Uint8Array> {
  const toTree = (n: HeapNode): TreeNode => ({ callFrame: n.callFrame, values: [n.selfSize], children: n.children.map(toTree) })
  return treeToPprof(toTree(await sampler.sample()), {
    sampleTypes: [['inuse_space', 'bytes']],
    periodType: ['space', 'bytes'],
    period: sampler.intervalBytes,
    durationNanos: 0
  })
}
