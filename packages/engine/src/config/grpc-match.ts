/**
 * A gRPC method match (Gateway API GRPCRoute's GRPCMethodMatch) as the path match it is: gRPC
 * calls are POSTs to `/package.Service/Method`. One conversion for the standalone file's
 * `matches[].grpc` and the controller's GRPCRoute translation.
 */

import type { RouteMatchIR } from '../ir/types.ts'
import { linearRegexProblem } from '../util/linear-regex.ts'

type Path = Array<string | number>

const GRPC_SERVICE = /^\.?[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$/
const GRPC_METHOD = /^[A-Za-z_][A-Za-z_0-9]*$/

/** The pattern must compile on the linear-time engine the route table runs it on. */
function checkRegex (source: string, path: Path, fail: (p: Path, message: string) => void): void {
  const problem = linearRegexProblem(source)
  if (problem !== null) fail(path, problem)
}

/**
 * Both exact → that method; a service alone → all its methods (a segment-aware prefix); a
 * method alone → that method of any service; RegularExpression → RE2 patterns for either
 * part. Problems go to `fail` at `path`; null when nothing can be matched.
 */
export function grpcPathMatch (g: { service?: string, method?: string, type?: 'Exact' | 'RegularExpression' }, path: Path, fail: (p: Path, message: string) => void): RouteMatchIR['path'] | null {
  if (g.service === undefined && g.method === undefined) {
    fail(path, 'needs service, method or both')
    return null
  }
  if (g.type === 'RegularExpression') {
    const source = `/${g.service ?? '[^/]+'}/${g.method ?? '[^/]+'}`
    if (g.service !== undefined) checkRegex(g.service, [...path, 'service'], fail)
    if (g.method !== undefined) checkRegex(g.method, [...path, 'method'], fail)
    return { kind: 'regex', value: source }
  }
  if (g.service !== undefined && !GRPC_SERVICE.test(g.service)) fail([...path, 'service'], `"${g.service}" is not a gRPC service name (package.Service)`)
  if (g.method !== undefined && !GRPC_METHOD.test(g.method)) fail([...path, 'method'], `"${g.method}" is not a gRPC method name`)
  if (g.service !== undefined && g.method !== undefined) return { kind: 'exact', value: `/${g.service}/${g.method}` }
  if (g.service !== undefined) return { kind: 'prefix', value: `/${g.service}` }
  return { kind: 'regex', value: `/[^/]+/${g.method!}` }
}

