/**
 * V8's sampling heap profiler, started with the admin server so that a heap profile covers
 * the allocations still alive since then (inuse_space, like Go's heap profile). Apart from
 * its encoding (pprof.ts, with pprof-format), which loads with the admin app at the first
 * admin request: the sampler must run from the start, the encoder only when asked (issue 54,
 * start-up).
 */

import { Session } from 'node:inspector/promises'

/** A node of V8's sampling heap profile. */
export interface HeapNode {
  callFrame: { functionName: string, url: string, lineNumber: number, columnNumber: number }
  selfSize: number
  children: HeapNode[]
}

export class HeapSampler {
  private readonly session = new Session()
  private started: Promise<void> | undefined
  /** Bytes between samples. */
  readonly intervalBytes: number

  constructor (intervalBytes = 512 * 1024) {
    this.intervalBytes = intervalBytes
  }

  start (): Promise<void> {
    this.started ??= (async () => {
      this.session.connect()
      await this.session.post('HeapProfiler.enable')
      await this.session.post('HeapProfiler.startSampling', { samplingInterval: this.intervalBytes })
    })()
    return this.started
  }

  /** The sampled allocations still alive, as V8 gives them (pprof.ts heapProfile encodes them). */
  async sample (): Promise<HeapNode> {
    await this.start()
    const { profile } = await this.session.post('HeapProfiler.getSamplingProfile') as unknown as { profile: { head: HeapNode } }
    return profile.head
  }

  stop (): void {
    if (this.started === undefined) return
    this.session.post('HeapProfiler.stopSampling').catch(() => {}).finally(() => this.session.disconnect())
  }
}
