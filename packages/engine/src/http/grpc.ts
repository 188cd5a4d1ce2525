/**
 * gRPC as the gateway sees it: which requests are gRPC (they need HTTP/2 to their backend,
 * and local answers as gRPC statuses), and what a request records of its call for traces,
 * access logs and metrics (OpenTelemetry's rpc.* attributes).
 */

import type { IncomingHttpHeaders } from 'node:http'

/**
 * Is this a gRPC request — `application/grpc`, `application/grpc+proto`, … — or a binary
 * gRPC-Web one (`application/grpc-web[+proto]`, which browsers send over HTTP/1.1 and which
 * Portico turns into gRPC to the backend)? (grpc-web-text, base64, is not translated.)
 */
export function isGrpc (headers: IncomingHttpHeaders): boolean {
  return grpcKind(headers['content-type']) !== null
}

/** `grpc` or `grpc-web` from a content type, or null. */
export function grpcKind (type: string | string[] | undefined): 'grpc' | 'grpc-web' | null {
  if (typeof type !== 'string' || !type.startsWith('application/grpc')) return null
  const next = type[16]
  if (type.length === 16 || next === '+' || next === ';') return 'grpc'
  if (type.startsWith('-web', 16) && (type.length === 20 || type[20] === '+' || type[20] === ';')) return 'grpc-web'
  return null
}

/** The gRPC content type a gRPC-Web one maps to (`application/grpc-web+proto` → `application/grpc+proto`). */
export function grpcContentTypeOf (webType: string): string {
  return 'application/grpc' + webType.slice(20)
}

/**
 * The last frame of a gRPC-Web answer: the trailers (RFC 7230 header lines) behind a 0x80
 * flag byte and their length, as the gRPC-Web protocol carries them in the body.
 */
export function grpcWebTrailerFrame (trailers: Record<string, string | string[] | undefined>): Buffer {
  let text = ''
  for (const [name, value] of Object.entries(trailers)) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) text += `${name.toLowerCase()}:${v}\r\n`
  }
  const body = Buffer.from(text, 'latin1')
  const head = Buffer.alloc(5)
  head[0] = 0x80
  head.writeUInt32BE(body.length, 1)
  return Buffer.concat([head, body])
}

/** A gRPC call: what it called, and its status once known. */
export interface GrpcCall {
  service: string
  method: string
  /** The client speaks gRPC-Web (binary): its answer's trailers go into the body. */
  web: boolean
  /** grpc-status of the answer (trailers, a trailers-only head, or the gateway's own answer). */
  status: number | null
}

/** The gRPC call of a request path `/package.Service/Method`. */
export function grpcCallOf (path: string, web = false): GrpcCall {
  const slash = path.indexOf('/', 1)
  return slash < 0 ? { service: path.slice(1), method: '', web, status: null } : { service: path.slice(1, slash), method: path.slice(slash + 1), web, status: null }
}
