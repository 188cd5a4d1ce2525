/**
 * A logger that writes pino's JSON lines without pino, for data-plane worker threads (Logs'
 * `withoutPino`). pino and what it loads -- its dependencies and, through sonic-boom and
 * thread-stream, Node's `assert` with its diff and colour modules -- are compiled again in
 * every worker thread's isolate: about 1.7 MiB of private memory a worker (a bare worker thread
 * with and without `pino()`, 2026-12-06), against a target of 15 MiB for the whole worker
 * (docs/multicore.md, Memory). A worker logs little (start-up, reloads, warnings; its access
 * log already bypasses pino, Logs#infoLine), so the subset the proxy calls is enough:
 * trace/debug/info/warn/error/fatal with `(fields, msg)`, `(msg)` or `(err, msg)`, `child`,
 * `level` and `isLevelEnabled`. Lines are pino's, byte for byte where the proxy's lines go:
 * `{"level":30,"time":"<ISO>","pid":N,<bindings>,<fields>,"msg":"..."}`, an `err` field as
 * pino-std-serializers writes it (type, message and stack with their causes, aggregate
 * errors, the error's own fields).
 */

import { isoTime } from './time.ts'

export const LEVEL_VALUES = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity } as const
export type JsonLevel = keyof typeof LEVEL_VALUES

type LogMethod = (fieldsOrMsg?: unknown, msg?: string) => void

export class JsonLogger {
  private threshold: number = LEVEL_VALUES.info
  private name: JsonLevel = 'info'
  readonly trace: LogMethod
  readonly debug: LogMethod
  readonly info: LogMethod
  readonly warn: LogMethod
  readonly error: LogMethod
  readonly fatal: LogMethod

  private readonly out: { write(line: string): unknown }
  private readonly bindings: string

  /** `bindings`: `"pid":N,...` as pino writes them after the time (no braces). */
  constructor (out: { write(line: string): unknown }, bindings: string, level: JsonLevel = 'info') {
    this.out = out
    this.bindings = bindings
    this.level = level
    const method = (value: number): LogMethod => (fieldsOrMsg, msg) => { if (value >= this.threshold) this.write(value, fieldsOrMsg, msg) }
    this.trace = method(LEVEL_VALUES.trace)
    this.debug = method(LEVEL_VALUES.debug)
    this.info = method(LEVEL_VALUES.info)
    this.warn = method(LEVEL_VALUES.warn)
    this.error = method(LEVEL_VALUES.error)
    this.fatal = method(LEVEL_VALUES.fatal)
  }

  get level (): JsonLevel { return this.name }
  set level (level: JsonLevel) {
    this.name = level
    this.threshold = LEVEL_VALUES[level]
  }

  isLevelEnabled (level: JsonLevel): boolean {
    return LEVEL_VALUES[level] >= this.threshold
  }

  child (bindings: Record<string, unknown>): JsonLogger {
    const more = fieldsJson(bindings)
    return new JsonLogger(this.out, more === '' ? this.bindings : `${this.bindings},${more}`, this.name)
  }

  private write (value: number, fieldsOrMsg: unknown, msg: string | undefined): void {
    let fields: Record<string, unknown> | undefined
    if (typeof fieldsOrMsg === 'string') msg = fieldsOrMsg
    else if (fieldsOrMsg instanceof Error) {
      fields = { err: fieldsOrMsg }
      msg ??= fieldsOrMsg.message
    } else if (fieldsOrMsg !== null && typeof fieldsOrMsg === 'object') {
      fields = fieldsOrMsg as Record<string, unknown>
      const err = fields.err as { message?: unknown } | undefined
      if (msg === undefined && fields.msg === undefined && err !== null && typeof err === 'object' && typeof err.message === 'string') msg = err.message
    }
    const body = fields === undefined ? '' : fieldsJson(fields)
    this.out.write(`{"level":${value}${isoTime()},${this.bindings}${body === '' ? '' : `,${body}`}${msg === undefined ? '' : `,"msg":${JSON.stringify(String(msg))}`}}\n`)
  }
}

/** An object's fields as JSON without its braces: undefined values left out, `err` serialized as pino does. */
function fieldsJson (fields: Record<string, unknown>): string {
  const parts: string[] = []
  for (const key in fields) {
    let value = fields[key]
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue
    if (key === 'err') value = serializeError(value, new Set())
    parts.push(`${JSON.stringify(key)}:${safeJson(value)}`)
  }
  return parts.join(',')
}

/** JSON.stringify, with cycles as "[Circular]" and BigInts as numbers' digits (as pino's safe-stable-stringify). */
function safeJson (value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => typeof v === 'bigint' ? Number(v) : v) ?? 'null'
  } catch {
    const seen = new WeakSet<object>()
    return JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === 'bigint') return Number(v)
      if (v !== null && typeof v === 'object') {
        if (seen.has(v)) return '[Circular]'
        seen.add(v)
      }
      return v
    }) ?? 'null'
  }
}

const isErrorLike = (e: unknown): e is Error & Record<string, unknown> => e !== null && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string'

function causeOf (err: Error): (Error & Record<string, unknown>) | undefined {
  const cause = (err as { cause?: unknown }).cause
  const value = typeof cause === 'function' ? (cause as () => unknown)() : cause
  return isErrorLike(value) ? value : undefined
}

/** pino-std-serializers' `err`: type, message and stack with their causes, aggregate errors, own enumerable fields. */
function serializeError (err: unknown, seen: Set<unknown>): unknown {
  if (!isErrorLike(err)) return err
  seen.add(err)
  const ctor = (err as { constructor?: unknown }).constructor
  const out: Record<string, unknown> = {
    type: typeof ctor === 'function' ? ctor.name : err.name,
    message: messageWithCauses(err, new Set(), false),
    stack: stackWithCauses(err, new Set())
  }
  const errors = (err as { errors?: unknown }).errors
  if (Array.isArray(errors)) out.aggregateErrors = errors.map(e => serializeError(e, seen))
  for (const key in err) {
    if (out[key] !== undefined) continue
    const value = err[key]
    if (isErrorLike(value)) {
      if (key !== 'cause' && !seen.has(value)) out[key] = serializeError(value, seen)
    } else out[key] = value
  }
  return out
}

function stackWithCauses (err: Error, seen: Set<Error>): string {
  const stack = err.stack ?? ''
  if (seen.has(err)) return `${stack}\ncauses have become circular...`
  const cause = causeOf(err)
  if (cause === undefined) return stack
  seen.add(err)
  return `${stack}\ncaused by: ${stackWithCauses(cause, seen)}`
}

function messageWithCauses (err: Error, seen: Set<Error>, skip: boolean): string {
  const message = skip ? '' : (err.message ?? '')
  if (seen.has(err)) return `${message}: ...`
  const cause = causeOf(err)
  if (cause === undefined) return message
  seen.add(err)
  // A VError-style cause (a function) is joined without the `: ` (pino-std-serializers).
  const skipCause = typeof (err as { cause?: unknown }).cause === 'function'
  return message + (skipCause ? '' : ': ') + messageWithCauses(cause, seen, skipCause)
}
