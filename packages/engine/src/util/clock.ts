/**
 * The `performance` global, read once. On globalThis it is an accessor (Node makes it on
 * first use), so every `performance.now()` written against the global went through V8's
 * generic global load and, where the caller was not inlined, a runtime call: ~180-400
 * instructions a read, five or more reads a proxied request (bench/tracing-instructions.ts
 * --functions). Modules on the request path import it from here instead, under the same name.
 *
 * Not node:perf_hooks: loading that module on the request's thread made every request of a
 * traced proxy ~2,400 instructions dearer, none of its code running (docs/tracing-cost-log.md, second round).
 */
export const performance: typeof globalThis.performance = globalThis.performance
