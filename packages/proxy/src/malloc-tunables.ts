/**
 * glibc's malloc settings the proxy starts with: `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072`.
 *
 * The value is glibc's own starting threshold (128 KiB: a block that size or larger is
 * mapped on its own, and unmapped when freed), but setting it turns off glibc's *dynamic*
 * threshold: by default, once a mapped block is freed, glibc raises the threshold to that
 * block's size (up to 32 MiB) and the heap's trim threshold to twice that. Start-up frees
 * blocks of several MB (Node reading its compile cache, V8's compiler zones), after which
 * glibc keeps everything below them in the main heap and trims its top only past twice
 * that: the freed memory of start-up stayed in the process. With it fixed: idle private
 * memory 58.6 → 52.5 MiB with one event loop, 118 → 110 MiB with two workers (quick start,
 * plain routes; docs/multicore.md, Memory). The 64 KiB socket reads stay in the heap (below
 * the threshold; 32768 mapped each on its own: 124 against 78 µs of CPU a proxied 64 KiB
 * answer). Measured no dearer: bench/builds.ts, one build with and without it, ABBA rounds,
 * CPU per proxied request ×0.945 (small) and ×0.953 (64 KiB), strace counting under
 * 50-connection 64 KiB load a brk call about every 150 requests, no mmap per request. What
 * it costs elsewhere: a buffer of 128 KiB or more (a buffered body that large) is mapped and
 * unmapped each time instead of coming from the heap once the threshold has climbed.
 *
 * glibc reads the variable when the process starts: bin/portico.ts adds it to the
 * environment of the Node it starts again (when it does, for its V8 flags), and the image
 * sets it (deploy/portico.Dockerfile). A GLIBC_TUNABLES of the user's own is left alone.
 * Child processes (stdio MCP servers) inherit it, with the same effect on their malloc.
 */

export const MALLOC_TUNABLES = 'glibc.malloc.mmap_threshold=131072'

/** `env` with Portico's GLIBC_TUNABLES when it has none of its own (empty counts as none). */
export function withMallocTunables (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return env.GLIBC_TUNABLES === undefined || env.GLIBC_TUNABLES === '' ? { ...env, GLIBC_TUNABLES: MALLOC_TUNABLES } : env
}
