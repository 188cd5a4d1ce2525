/**
 * The authorization filter over items (tools, prompts, resources). It is decided per request
 * by the route's rules (client/http.ts) and applied by the session's routing (session/) and by
 * a 2026-07-28 forward to a target (upstream/stateless-forward.ts): both sides read it, so
 * it lives on the floor of mcp/.
 */

/**
 * Whether this request's caller may see or use an item (tools, prompts, resources), by the
 * route's authorization rules. `name` is the upstream name (URI for resources).
 */
export type ItemFilter = (item: { method: string, kind: 'tool' | 'prompt' | 'resource', name: string, target: string }) => boolean
