/** The part of autocannon's programmatic API the benchmarks use (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  interface Options {
    url: string
    connections?: number
    duration?: number
    pipelining?: number
    timeout?: number
    overallRate?: number
    headers?: Record<string, string>
    method?: string
    body?: string | Buffer
  }

  interface Histogram {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    total: number
    p50: number
    p99: number
  }

  interface Result {
    duration: number
    errors: number
    timeouts: number
    non2xx: number
    '2xx': number
    latency: Histogram
    requests: Histogram & { sent: number }
    throughput: Histogram
  }

  interface Instance extends EventEmitter {
    stop (): void
  }

  function autocannon (options: Options, callback: (err: Error | null, result: Result) => void): Instance
  export default autocannon
}
