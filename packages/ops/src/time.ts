/** The time field of a log line. */

let second = NaN
let secondPrefix = ''

/**
 * pino's `,"time":"<ISO 8601>"`, as pino.stdTimeFunctions.isoTime writes it, with the part up
 * to the second made once a second: Date#toISOString formats through the C library's printf,
 * ~7,400 instructions a line -- with the access log on, ~5 % of a proxied GET
 * (bench/tracing-instructions.ts --configs log).
 */
export function isoTime (): string {
  const now = Date.now()
  const ms = now % 1000
  const s = now - ms
  if (s !== second) {
    second = s
    secondPrefix = `,"time":"${new Date(s).toISOString().slice(0, 20)}`
  }
  return secondPrefix + (ms < 10 ? `00${ms}Z"` : ms < 100 ? `0${ms}Z"` : `${ms}Z"`)
}
