/**
 * gRPC as the gateway sees it: which requests are gRPC (they need HTTP/2 to their backend,
 * and local answers as gRPC statuses), and what a request records of its call for traces,
 * access logs and metrics (OpenTelemetry's rpc.* attributes).
 */

import type { IncomingHttpHeaders } from 'node:http'

/**
 * Is this a gRPC request -- `application/grpc`, `application/grpc+proto`, ... -- or a gRPC-Web
 * one (`application/grpc-web[+proto]`, or its base64 form `application/grpc-web-text[+proto]`,
 * which browsers send over HTTP/1.1 and which Portico turns into gRPC to the backend)?
 */
export function isGrpc (headers: IncomingHttpHeaders): boolean {
  return grpcKind(headers['content-type']) !== null
}

/**
 * A `grpc-message` value as the gRPC spec (PROTOCOL-HTTP2.md, "Status-Message") writes it:
 * the text's UTF-8 bytes, with only those outside 0x20-0x7E and `%` itself percent-encoded
 * (upper-case hex). Clients decode exactly this, and grpc-js with `decodeURI`, which leaves
 * `%3A` or `%2F` as they are -- so `encodeURIComponent` would reach users as `no route%3A ...`.
 */
export function grpcMessageEncode (text: string): string {
  let plain = true
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c > 0x7e || c === 0x25) { plain = false; break }
  }
  if (plain) return text
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x25 ? '%' + byte.toString(16).toUpperCase().padStart(2, '0') : String.fromCharCode(byte)
  }
  return out
}

/** `grpc`, `grpc-web` or `grpc-web-text` from a content type, or null. */
export function grpcKind (type: string | string[] | undefined): 'grpc' | 'grpc-web' | 'grpc-web-text' | null {
  if (typeof type !== 'string' || !type.startsWith('application/grpc')) return null
  const ends = (at: number) => type.length === at || type[at] === '+' || type[at] === ';'
  if (ends(16)) return 'grpc'
  if (type.startsWith('-web-text', 16) && ends(25)) return 'grpc-web-text'
  if (type.startsWith('-web', 16) && ends(20)) return 'grpc-web'
  return null
}

/** The gRPC content type a gRPC-Web one maps to (`application/grpc-web[-text]+proto` -> `application/grpc+proto`). */
export function grpcContentTypeOf (webType: string): string {
  return 'application/grpc' + webType.slice(webType.startsWith('-web-text', 16) ? 25 : 20)
}

/**
 * Base64 across chunk boundaries (grpc-web-text): `decode` takes text as it comes and returns
 * the bytes of the complete quads so far; `encode` takes bytes and returns the text of the
 * complete triples; `flush` ends either, padded.
 */
export class Base64Stream {
  private rest: Buffer = Buffer.alloc(0)
  private restText = ''

  decode (chunk: Buffer): Buffer {
    // Whitespace is not part of the stream; padding may end one message's text and not the stream's.
    const text = this.restText + chunk.toString('latin1').replace(/\s+/g, '')
    let out = Buffer.alloc(0)
    let start = 0
    for (let i = 0; i + 4 <= text.length; i += 4) {
      if (text[i + 3] === '=') {
        out = Buffer.concat([out, Buffer.from(text.slice(start, i + 4), 'base64')])
        start = i + 4
      }
    }
    const whole = text.length - ((text.length - start) % 4)
    out = Buffer.concat([out, Buffer.from(text.slice(start, whole), 'base64')])
    this.restText = text.slice(whole)
    return out
  }

  encode (chunk: Buffer): string {
    const all = this.rest.length === 0 ? chunk : Buffer.concat([this.rest, chunk])
    const whole = all.length - (all.length % 3)
    this.rest = all.subarray(whole)
    return all.subarray(0, whole).toString('base64')
  }

  flush (): string {
    const text = this.rest.toString('base64')
    this.rest = Buffer.alloc(0)
    return text
  }
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
  /** The client speaks gRPC-Web: its answer's trailers go into the body. */
  web: boolean
  /** ...in its base64 form (grpc-web-text): the bodies are base64 both ways. */
  text: boolean
  /** grpc-status of the answer (trailers, a trailers-only head, or the gateway's own answer). */
  status: number | null
}

/** The gRPC call of a request path `/package.Service/Method`. */
export function grpcCallOf (path: string, kind: 'grpc' | 'grpc-web' | 'grpc-web-text' = 'grpc'): GrpcCall {
  const web = kind !== 'grpc'
  const text = kind === 'grpc-web-text'
  const slash = path.indexOf('/', 1)
  return slash < 0 ? { service: path.slice(1), method: '', web, text, status: null } : { service: path.slice(1, slash), method: path.slice(slash + 1), web, text, status: null }
}
