/**
 * The V8 young generation the data plane runs with. Node's default lets it grow to 64 MB
 * (two 32 MB semi-spaces): under load every request's short-lived objects fill it before a
 * scavenge, so the process holds ~130 MB more than it needs, and scavenges walk more memory.
 * With 4 MB semi-spaces (bench, 2026-11-24, 50 connections, one event loop): RSS loaded
 * 334 → 202–206 MB (RssAnon 256 → 123–128), CPU per 64 KiB response 87–100 → 63–68 µs,
 * per small one 30–33 → 35–39 µs.
 *
 * The main thread's size is fixed when Node starts (v8.setFlagsFromString cannot change it),
 * so bin/portico.ts starts Node again with the flag when it was started without it;
 * data-plane worker threads get it as a resource limit (a young generation of three
 * semi-spaces: two, and the large-object space).
 */

export const SEMI_SPACE_MB = 4
export const SEMI_SPACE_FLAG = `--max-semi-space-size=${SEMI_SPACE_MB}`
export const WORKER_YOUNG_GENERATION_MB = 3 * SEMI_SPACE_MB

/** Whether Node was started with a semi-space size of its own (the flag, or NODE_OPTIONS). */
export function semiSpaceGiven (execArgv: string[], nodeOptions: string | undefined): boolean {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(a => /^--max[-_]semi[-_]space[-_]size(=|$)/.test(a))
}
