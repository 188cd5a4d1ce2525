/**
 * Logs with pino. One root logger; each component (`portico`, `config`, `engine`, `request`
 * for access logs, `admin`, ...) gets a child whose level follows a filter such as
 * `info,config=debug` -- the same syntax /logging accepts at run time.
 */

import type { Logger, LevelWithSilent, pino as Pino } from 'pino'
import { createRequire } from 'node:module'
import type PinoPretty from 'pino-pretty'
// The errors module alone, not the engine barrel: the controller and `portico --version` load logs early.
import { PorticoError } from '@portico/engine/errors'
import { LineWriter } from './line-writer.ts'
import { JsonLogger } from './json-logger.ts'
import { isoTime } from './time.ts'

export { isoTime } from './time.ts'

/**
 * pino-pretty (about 30 modules) only for text logs: JSON, the default off a terminal, never
 * loads it; pino itself not in data-plane workers (Logs `withoutPino`, json-logger.ts).
 */
const requireModule = createRequire(import.meta.url)
const pino = (...args: Parameters<typeof Pino>): Logger => (requireModule('pino') as { pino: typeof Pino }).pino(...args) as unknown as Logger

export const LEVELS = ['error', 'warn', 'info', 'debug', 'trace', 'off'] as const
export type LevelName = typeof LEVELS[number]

export interface LogFilter {
  global: LevelName
  modules: Map<string, LevelName>
}

/** Parses `info`, `info,engine=debug` or `engine:debug` (both separators accepted). */
export function parseLogFilter (text: string): LogFilter {
  const filter: LogFilter = { global: 'info', modules: new Map() }
  let sawGlobal = false
  for (const raw of text.split(',')) {
    const part = raw.trim()
    if (part === '') continue
    const sep = part.search(/[=:]/)
    if (sep === -1) {
      filter.global = checkLevel(part, text)
      sawGlobal = true
    } else {
      const module = part.slice(0, sep).trim()
      if (module === '') throw badFilter(text, `"${part}" has no module name`)
      filter.modules.set(module, checkLevel(part.slice(sep + 1).trim(), text))
    }
  }
  if (!sawGlobal && filter.modules.size === 0) throw badFilter(text, 'empty filter')
  return filter
}

function checkLevel (level: string, text: string): LevelName {
  const l = level.toLowerCase()
  if ((LEVELS as readonly string[]).includes(l)) return l as LevelName
  throw badFilter(text, `unknown level "${level}"`)
}

function badFilter (text: string, why: string): PorticoError {
  return new PorticoError('PORTICO_BAD_LOG_LEVEL', `invalid log level "${text}": ${why}; use one of ${LEVELS.join(', ')}, or a filter such as info,engine=debug`)
}

export function formatLogFilter (f: LogFilter): string {
  return [f.global, ...[...f.modules].map(([m, l]) => `${m}=${l}`)].join(',')
}

/** Bytes a write to a pipe may hold and still never be interleaved with another writer's (Linux). */
const PIPE_BUF = 4096

const toPino = (l: LevelName): LevelWithSilent => l === 'off' ? 'silent' : l

export class Logs {
  readonly root: Logger
  private filter: LogFilter
  private readonly children = new Map<string, Logger>()
  private readonly destination: LineWriter | undefined
  /** Where JSON lines go when pino's formatting is bypassed (infoLine); null for text logs. */
  private readonly jsonOut: { write(line: string): unknown } | null
  /** `"pid":...` and the bindings, as pino writes them after the time. */
  private readonly baseJson: string
  /** Told of every filter change (the primary passes it on to the data-plane workers). */
  readonly onChange = new Set<(filter: string) => void>()

  /**
   * `bindings`: fields every line carries (a worker's number). `sharedOutput`: other threads
   * write the same stdout, so each write is whole lines of at most PIPE_BUF bytes, which a
   * pipe never interleaves with another writer's.
   * `withoutPino`: JSON lines are written by json-logger.ts rather than pino (data-plane workers:
   * pino compiled again in each worker's isolate costs it ~1.7 MiB); text logs still use pino.
   */
  constructor (options: { level: string, format: 'json' | 'text', stream?: NodeJS.WritableStream, bindings?: Record<string, unknown>, sharedOutput?: boolean, withoutPino?: boolean }) {
    this.filter = parseLogFilter(options.level)
    const base = { level: 'trace', base: { pid: process.pid, ...options.bindings }, timestamp: isoTime }
    this.baseJson = JSON.stringify(base.base).slice(1, -1)
    this.jsonOut = null
    if (options.stream !== undefined) {
      this.root = pino(base, options.stream)
      this.jsonOut = options.format === 'json' ? options.stream : null
    } else if (options.format === 'text') {
      // pino-pretty in the same thread: readable logs for people at a terminal.
      const pinoPretty = requireModule('pino-pretty') as typeof PinoPretty
      this.root = pino(base, pinoPretty({ sync: true, colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }))
    } else {
      // Access logs are one line per request: batch writes (16 KiB: fewer write calls
      // measured about 6 % less CPU per request at info level than 4 KiB batches), and flush
      // at least every 250 ms so a quiet proxy's lines still show up promptly. Threads that
      // share stdout write whole lines, at most PIPE_BUF bytes at a time.
      this.destination = new LineWriter(options.sharedOutput === true
        ? { fd: 1, minLength: 4000, maxWrite: PIPE_BUF }
        : { fd: 1, minLength: 16000, maxWrite: 16384 })
      this.root = options.withoutPino === true ? new JsonLogger(this.destination, this.baseJson, 'trace') as unknown as Logger : pino(base, this.destination)
      this.jsonOut = this.destination
      const flush = setInterval(() => { try { this.destination?.flush() } catch {} }, 250)
      flush.unref()
    }
  }

  /** The logger of a component; its level follows the current filter. */
  for (component: string): Logger {
    let child = this.children.get(component)
    if (child === undefined) {
      child = this.root.child({ component })
      child.level = toPino(this.levelOf(component))
      this.children.set(component, child)
    }
    return child
  }

  /**
   * Writes lines of `component` at info -- the access log's, one per request -- as pino writes
   * them (`{"level":30,"time":...,"pid":...,<bindings>,"component":...,<fields>,"msg":...}`), but
   * with one JSON.stringify of the fields where pino concatenates them one by one: half the
   * CPU a line (in a loop: 0.7 against 1.4 µs for the access log's fields). Text logs, and
   * fields JSON.stringify refuses (a cycle, a BigInt), go through pino. The caller checks
   * the level (`for(component).isLevelEnabled('info')`).
   */
  infoLine (component: string): (fields: Record<string, unknown>, msg: string) => void {
    const logger = this.for(component)
    const out = this.jsonOut
    if (out === null) return (fields, msg) => logger.info(fields, msg)
    const head = `{"level":30`
    const middle = `,${this.baseJson},"component":${JSON.stringify(component)}`
    return (fields, msg) => {
      let body: string
      try {
        body = JSON.stringify(fields)
      } catch {
        logger.info(fields, msg)
        return
      }
      out.write(`${head}${isoTime()}${middle}${body.length > 2 ? `,${body.slice(1, -1)}` : ''},"msg":${JSON.stringify(msg)}}\n`)
    }
  }

  levelOf (component: string): LevelName {
    return this.filter.modules.get(component) ?? this.filter.global
  }

  get current (): string {
    return formatLogFilter(this.filter)
  }

  /** Replaces the filter (throws PORTICO_BAD_LOG_LEVEL on bad input, changing nothing). */
  set (text: string): void {
    this.filter = parseLogFilter(text)
    for (const [component, child] of this.children) child.level = toPino(this.levelOf(component))
    for (const listener of this.onChange) listener(this.current)
  }

  flush (): void {
    try {
      this.destination?.flushSync()
    } catch {
      // nothing more we can do at exit
    }
  }
}

