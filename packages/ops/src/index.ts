export { Logs, LEVELS, parseLogFilter, formatLogFilter, type LevelName, type LogFilter } from './logs.ts'
export { checkAdminMessage, checkAdminRequest, checkAdminHost, checkSameOrigin, hostnameOf, requestFacts, type AdminGuardOptions, type AdminRequestFacts } from './admin-guard.ts'
