/**
 * Request-path counters, gauges and histograms that cost a map lookup and a few additions per
 * request (or connection). prom-client validates and hashes label sets on every call (even through
 * `labels()` children), which showed as several percent of proxy CPU under load; these keep
 * their series in a Map keyed by a string the caller builds, and hand prom-client's
 * registry the values only when /metrics is scraped (prom-client formats them).
 */

import type { Registry } from 'prom-client'

interface MetricValue {
  labels: Record<string, string | number>
  value: number
  metricName?: string
}

/** The shape prom-client's registry reads from a metric. */
interface ScrapedMetric {
  name: string
  help: string
  type: 'counter' | 'gauge' | 'histogram'
  aggregator: 'sum'
  values: MetricValue[]
}

abstract class LocalMetric {
  readonly name: string
  readonly help: string
  abstract readonly type: 'counter' | 'gauge' | 'histogram'
  readonly aggregator = 'sum' as const

  constructor (registry: Registry, name: string, help: string) {
    this.name = name
    this.help = help
    registry.registerMetric(this as never)
  }

  abstract values (): MetricValue[]

  async get (): Promise<ScrapedMetric> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() }
  }

  reset (): void {}
}

/** A counter's or gauge's series: its labels and its value. */
export interface ValueSeries {
  readonly labels: Record<string, string>
  value: number
}

/** A histogram's series: its labels, a count per bucket (not cumulative), the sum and the count. */
export interface HistogramSeries {
  readonly labels: Record<string, string>
  readonly counts: Float64Array
  sum: number
  count: number
}

/** One number per series: what counters and gauges have in common. */
abstract class LocalValues extends LocalMetric {
  private readonly series = new Map<string, ValueSeries>()

  /**
   * The series `key`, made on first use (`labels` is only called then). A caller that keeps
   * it adds to `value` without looking it up again (metrics.ts caches a request's series).
   */
  seriesOf (key: string, labels: () => Record<string, string>): ValueSeries {
    let s = this.series.get(key)
    if (s === undefined) this.series.set(key, s = { labels: labels(), value: 0 })
    return s
  }

  /** Adds `by` to the series `key`; `labels` is only called for a new series. */
  protected addTo (key: string, labels: () => Record<string, string>, by: number): void {
    this.seriesOf(key, labels).value += by
  }

  values (): MetricValue[] {
    return [...this.series.values()].map(s => ({ labels: s.labels, value: s.value }))
  }

  /** Zeroes the series rather than dropping them: a caller may hold one (seriesOf). */
  override reset (): void {
    for (const s of this.series.values()) s.value = 0
  }
}

export class LocalCounter extends LocalValues {
  readonly type = 'counter' as const

  /** Adds `by` to the series `key`; `labels` is only called for a new series. */
  inc (key: string, labels: () => Record<string, string>, by = 1): void {
    this.addTo(key, labels, by)
  }
}

export class LocalGauge extends LocalValues {
  readonly type = 'gauge' as const

  /** Adds `by` (negative to subtract) to the series `key`; `labels` is only called for a new series. */
  add (key: string, labels: () => Record<string, string>, by: number): void {
    this.addTo(key, labels, by)
  }
}

export class LocalHistogram extends LocalMetric {
  readonly type = 'histogram' as const
  private readonly buckets: readonly number[]
  private readonly series = new Map<string, HistogramSeries>()

  constructor (registry: Registry, name: string, help: string, buckets: readonly number[]) {
    super(registry, name, help)
    this.buckets = buckets
  }

  /** The series `key`, made on first use (`labels` is only called then); see LocalValues.seriesOf. */
  seriesOf (key: string, labels: () => Record<string, string>): HistogramSeries {
    let s = this.series.get(key)
    if (s === undefined) this.series.set(key, s = { labels: labels(), counts: new Float64Array(this.buckets.length), sum: 0, count: 0 })
    return s
  }

  observe (key: string, labels: () => Record<string, string>, value: number): void {
    this.record(this.seriesOf(key, labels), value)
  }

  /** Counts `value` in the series `s` (one of this histogram's, from seriesOf). */
  record (s: HistogramSeries, value: number): void {
    const b = this.buckets
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]!) {
        s.counts[i]!++
        break
      }
    }
    s.sum += value
    s.count++
  }

  values (): MetricValue[] {
    const out: MetricValue[] = []
    for (const s of this.series.values()) {
      let cumulative = 0
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += s.counts[i]!
        out.push({ labels: { le: this.buckets[i]!, ...s.labels }, value: cumulative, metricName: `${this.name}_bucket` })
      }
      out.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` })
      out.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` })
      out.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` })
    }
    return out
  }

  /** Zeroes the series rather than dropping them: a caller may hold one (seriesOf). */
  override reset (): void {
    for (const s of this.series.values()) {
      s.counts.fill(0)
      s.sum = 0
      s.count = 0
    }
  }
}

/**
 * A counter of exact amounts: each series adds integers of 10^-`scale` units as BigInt (an
 * LLM call's cost in 10^-12 currency units), so no sum drifts as float additions would; the
 * value is turned into a number once, when scraped.
 */
export class LocalExactCounter extends LocalMetric {
  readonly type = 'counter' as const
  private readonly scale: number
  private readonly series = new Map<string, { labels: Record<string, string>, units: bigint }>()

  constructor (registry: Registry, name: string, help: string, scale: number) {
    super(registry, name, help)
    this.scale = scale
  }

  inc (key: string, labels: () => Record<string, string>, units: bigint): void {
    let s = this.series.get(key)
    if (s === undefined) this.series.set(key, s = { labels: labels(), units: 0n })
    s.units += units
  }

  values (): MetricValue[] {
    return [...this.series.values()].map(s => ({ labels: s.labels, value: Number(decimal(s.units, this.scale)) }))
  }

  override reset (): void {
    for (const s of this.series.values()) s.units = 0n
  }
}

/** `units` × 10^-`scale` as a plain decimal string (the nearest number to it is then one rounding away). */
function decimal (units: bigint, scale: number): string {
  const digits = units.toString().padStart(scale + 1, '0')
  return `${digits.slice(0, -scale)}.${digits.slice(-scale)}`
}
