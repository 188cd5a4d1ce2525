/**
 * Reads the SNI name (and ALPN list) from the first bytes of a TLS connection, without
 * decrypting anything: TLS listeners choose a listener and a route from it before deciding
 * whether to pass the connection through or terminate it.
 *
 * The bytes come from the client and are hostile: every length is checked against what is
 * there, the hello may arrive split across reads and across several TLS records, and the
 * caller caps how much is buffered (MAX_CLIENT_HELLO_BYTES) and for how long.
 *
 * Formats: RFC 8446 §5.1 (record layer), §4.1.2 (ClientHello), RFC 6066 §3 (server_name),
 * RFC 7301 §3.1 (ALPN).
 */

/** Most bytes a client may send before its hello is complete (a post-quantum key share is ~1.2 KiB; 16 KiB is a full record). */
export const MAX_CLIENT_HELLO_BYTES = 64 * 1024

export type ClientHelloResult =
  | { kind: 'incomplete' }
  | { kind: 'hello', serverName: string | null, alpn: string[] }
  | { kind: 'invalid', reason: string }

const RECORD_HANDSHAKE = 22
const HANDSHAKE_CLIENT_HELLO = 1
const EXT_SERVER_NAME = 0
const EXT_ALPN = 16
const MAX_RECORD_LENGTH = 16384 + 256

/** What the buffered bytes say so far. */
export function parseClientHello (data: Buffer): ClientHelloResult {
  // Gather the handshake bytes from consecutive handshake records.
  const chunks: Buffer[] = []
  let have = 0
  let need = -1
  let offset = 0
  while (need === -1 || have < need) {
    if (data.length < offset + 5) return { kind: 'incomplete' }
    if (data[offset] !== RECORD_HANDSHAKE) return { kind: 'invalid', reason: offset === 0 ? 'not a TLS handshake' : 'client hello interrupted by another record type' }
    if (data[offset + 1] !== 3) return { kind: 'invalid', reason: 'not a TLS record version' }
    const length = data.readUInt16BE(offset + 3)
    if (length === 0 || length > MAX_RECORD_LENGTH) return { kind: 'invalid', reason: 'bad TLS record length' }
    const end = offset + 5 + Math.min(length, data.length - offset - 5)
    chunks.push(data.subarray(offset + 5, end))
    have += end - offset - 5
    if (need === -1 && have >= 4) {
      const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) return { kind: 'invalid', reason: 'first handshake message is not a client hello' }
      need = 4 + head.readUIntBE(1, 3)
      if (need > MAX_CLIENT_HELLO_BYTES) return { kind: 'invalid', reason: 'client hello too large' }
    }
    if (end - offset - 5 < length) {
      // The record is not all here yet.
      if (need !== -1 && have >= need) break
      return { kind: 'incomplete' }
    }
    offset += 5 + length
  }
  const hello = Buffer.concat(chunks).subarray(4, need)
  return readHello(hello)
}

function readHello (b: Buffer): ClientHelloResult {
  const bad = (reason: string): ClientHelloResult => ({ kind: 'invalid', reason: `malformed client hello: ${reason}` })
  let p = 2 + 32 // legacy_version, random
  if (b.length < p + 1) return bad('truncated')
  p += 1 + b[p]! // legacy_session_id
  if (b.length < p + 2) return bad('truncated')
  p += 2 + b.readUInt16BE(p) // cipher_suites
  if (b.length < p + 1) return bad('truncated')
  p += 1 + b[p]! // legacy_compression_methods
  if (p === b.length) return { kind: 'hello', serverName: null, alpn: [] } // no extensions
  if (b.length < p + 2) return bad('truncated')
  const extEnd = p + 2 + b.readUInt16BE(p)
  if (extEnd > b.length) return bad('extensions overrun')
  p += 2
  let serverName: string | null = null
  let alpn: string[] = []
  const seen = new Set<number>()
  while (p < extEnd) {
    if (extEnd < p + 4) return bad('extension header truncated')
    const type = b.readUInt16BE(p)
    const len = b.readUInt16BE(p + 2)
    const body = p + 4
    if (body + len > extEnd) return bad('extension overruns')
    if (seen.has(type)) return bad(`extension ${type} repeated`)
    seen.add(type)
    if (type === EXT_SERVER_NAME) {
      const name = readServerName(b.subarray(body, body + len))
      if (name !== null && typeof name === 'object') return bad(name.error)
      serverName = name
    } else if (type === EXT_ALPN) {
      const list = readAlpn(b.subarray(body, body + len))
      if (list === null) return bad('bad ALPN list')
      alpn = list
    }
    p = body + len
  }
  return { kind: 'hello', serverName, alpn }
}

/** The host_name entry of a server_name extension: lower case, without a trailing dot. */
function readServerName (e: Buffer): string | null | { error: string } {
  if (e.length < 2 || e.readUInt16BE(0) !== e.length - 2) return { error: 'bad server_name list' }
  let p = 2
  while (p < e.length) {
    if (e.length < p + 3) return { error: 'server_name entry truncated' }
    const type = e[p]!
    const len = e.readUInt16BE(p + 1)
    if (p + 3 + len > e.length) return { error: 'server_name entry overruns' }
    if (type === 0) {
      const name = e.subarray(p + 3, p + 3 + len).toString('latin1').toLowerCase().replace(/\.$/, '')
      // A DNS name (RFC 6066: no IP literals, ASCII only); anything else cannot match a hostname.
      if (name.length === 0 || name.length > 253 || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(name)) return { error: 'server name is not a DNS name' }
      return name
    }
    p += 3 + len
  }
  return null
}

function readAlpn (e: Buffer): string[] | null {
  if (e.length < 2 || e.readUInt16BE(0) !== e.length - 2) return null
  const out: string[] = []
  let p = 2
  while (p < e.length) {
    const len = e[p]!
    if (len === 0 || p + 1 + len > e.length) return null
    out.push(e.subarray(p + 1, p + 1 + len).toString('latin1'))
    p += 1 + len
  }
  return out
}
