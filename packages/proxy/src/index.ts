export { Portico, type PorticoOptions, type ReloadRecord } from './portico.ts'
// Portico takes a Logs: embedders (tests, e2e) get it from here as well as from @portico/ops.
export { Logs, parseLogFilter, formatLogFilter } from '@portico/ops'
export { resolveSettings, parseAddress, type Settings } from './settings.ts'
export { ListenerManager } from './listeners.ts'
export { main } from './cli.ts'
