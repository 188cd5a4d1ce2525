/**
 * gRPC as the gateway sees it: which requests are gRPC (they need HTTP/2 to their backend,
 * and local answers as gRPC statuses), and what a request records of its call for traces,
 * access logs and metrics (OpenTelemetry's rpc.* attributes).
 */

import type { IncomingHttpHeaders } from 'node:http'

/**
 * Is this a gRPC request (`application/grpc`, `application/grpc+proto`, …; not gRPC-Web,
 * which HTTP/1.1 carries)?
 */
export function isGrpc (headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type']
  return typeof type === 'string' && type.startsWith('application/grpc') && (type.length === 16 || type[16] === '+' || type[16] === ';')
}

/** A gRPC call: what it called, and its status once known. */
export interface GrpcCall {
  service: string
  method: string
  /** grpc-status of the answer (trailers, a trailers-only head, or the gateway's own answer). */
  status: number | null
}

/** The gRPC call of a request path `/package.Service/Method`. */
export function grpcCallOf (path: string): GrpcCall {
  const slash = path.indexOf('/', 1)
  return slash < 0 ? { service: path.slice(1), method: '', status: null } : { service: path.slice(1, slash), method: path.slice(slash + 1), status: null }
}
