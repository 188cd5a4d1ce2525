/** The event list's `Type` and `Summary` columns: shared with the web UI (@portico/trace-view). */
export { typeLabel, summarize, formatMicros, formatBytes, bodyBytes } from '@portico/trace-view'
