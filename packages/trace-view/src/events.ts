/**
 * The trace event record, as `/debug/trace` streams it and `porticoctl proxy trace --raw`
 * saves it: the union of event types defined once in @portico/engine/trace-events. Only types
 * come from there (a module that imports nothing), so this package and the browser bundle
 * that uses it never load the engine.
 */

export type * from '@portico/engine/trace-events'
