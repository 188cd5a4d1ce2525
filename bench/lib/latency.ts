/**
 * Latency samples in milliseconds (sub-millisecond precision: autocannon's own histogram
 * rounds to whole milliseconds, too coarse for a loopback proxy), summarised by percentile.
 */

export class LatencyRecorder {
  private samples = new Float64Array(1 << 16)
  private n = 0

  add (ms: number): void {
    if (this.n === this.samples.length) {
      const bigger = new Float64Array(this.samples.length * 2)
      bigger.set(this.samples)
      this.samples = bigger
    }
    this.samples[this.n++] = ms
  }

  get count (): number {
    return this.n
  }

  /** The p-th percentile (0 < p <= 100), nearest-rank; NaN without samples. */
  percentile (p: number): number {
    if (this.n === 0) return NaN
    const sorted = this.samples.subarray(0, this.n).sort()
    const rank = Math.min(this.n, Math.max(1, Math.ceil((p / 100) * this.n)))
    return sorted[rank - 1]!
  }
}
