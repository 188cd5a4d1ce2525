/**
 * Gateway API HTTPPathModifier, shared by `requestRedirect` and `urlRewrite`:
 * ReplaceFullPath (`{full}`) puts a new path in place of the request's; ReplacePrefixMatch
 * (`{prefix}`) replaces the path prefix the route matched, segment-wise, with the trailing
 * slash rules of the spec's table:
 *
 *   request path | prefix match | replacement | result
 *   /foo/bar     | /foo         | /xyz        | /xyz/bar
 *   /foo/bar     | /foo/        | /xyz/       | /xyz/bar
 *   /foo         | /foo         | /xyz        | /xyz
 *   /foo/        | /foo         | /xyz        | /xyz/
 *   /foo/bar     | /foo         | ''          | /bar
 *   /foo/        | /foo         | ''          | /
 *   /foo         | /foo         | /           | /
 */

import type { PathMatchIR } from '../ir/types.ts'
import type { PathModifierIR } from '../ir/policy.ts'

/** A prefix without its trailing slashes; `/` becomes '' (it matches every path). */
function trimSlashes (prefix: string): string {
  let end = prefix.length
  while (end > 0 && prefix.charCodeAt(end - 1) === 47 /* / */) end--
  return prefix.slice(0, end)
}

/**
 * Replaces `matchedPrefix` at the start of `path` with `replacement`. Null when `path` does
 * not start with the prefix at a segment boundary (it was rewritten since the match).
 */
export function replacePrefixMatch (path: string, matchedPrefix: string, replacement: string): string | null {
  const prefix = trimSlashes(matchedPrefix)
  if (prefix !== '' && !(path === prefix || path.startsWith(prefix + '/'))) return null
  const rest = path.slice(prefix.length)
  const out = trimSlashes(replacement) + rest
  return out === '' ? '/' : out
}

/**
 * The path `mod` makes of `path`, given the route match that selected the request. A string
 * on success; an object with the reason when ReplacePrefixMatch cannot apply (no prefix
 * match selected the request, or the path no longer starts with it).
 */
export function modifyPath (path: string, mod: PathModifierIR, matched: PathMatchIR | null): string | { error: string } {
  if ('full' in mod) return mod.full
  if (matched === null || matched.kind !== 'prefix') {
    return { error: `ReplacePrefixMatch needs a path prefix match, and the request was selected by ${matched === null ? 'no route match' : `a ${matched.kind} path match`}` }
  }
  const out = replacePrefixMatch(path, matched.value, mod.prefix)
  return out ?? { error: `path ${path} no longer starts with the matched prefix ${matched.value}` }
}
