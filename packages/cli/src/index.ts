/** @portico/cli — `porticoctl`. The modules are exported for tests and other tools. */
export { main, splitPassthrough } from './main.ts'
export { parseCurlArgs, type CurlRequest } from './trace/curl-args.ts'
export { summarize, typeLabel } from './trace/summary.ts'
export { detailLines, type DetailMode } from './trace/detail.ts'
export { parseRawTrace, rawLine } from './trace/events.ts'
export { backendsTable, formatConfigAll } from './config/format.ts'
export type { Target, Instance, Connection } from './targets/types.ts'
