/**
 * Envoy's ext_proc messages (envoy.service.ext_proc.v3) encoded and decoded by hand, in the
 * shapes @grpc/proto-loader gives (keepCase, enums and longs as numbers, no defaults, oneof
 * names set; google.protobuf.Struct in protobufjs's camelCase). Every request of an extProc
 * policy or an InferencePool sends and reads several of these; protobufjs's generic
 * fromObject → encode and decode → toObject build each message twice and cost about a tenth
 * of what the endpoint picker's stream cost Portico (bench/inference-pool.ts).
 *
 * - encode: the ProcessingRequest fields Portico sends (request/response headers and body,
 *   metadata_context, protocol_config). A message with any other field is encoded by
 *   protobufjs (`fallback`), so nothing is ever dropped.
 * - decode: every ProcessingResponse field; unknown fields skipped as protobuf says, bounded
 *   nesting (a Struct deeper than MAX_DEPTH is an error), truncated or malformed input an error.
 * e2e/test/ext-proc-codec.test.ts checks both against protobufjs on the same protos.
 */

import type { ProcessingResponseMessage, StructMessage, ValueMessage } from './ext-proc-grpc.ts'
import { PorticoError } from '../util/errors.ts'

/** Struct/ListValue nesting decoded at most (protobufjs's own recursion limit is 100). */
const MAX_DEPTH = 64

// ───────────────────────────── encode ─────────────────────────────

type Msg = Record<string, unknown>

const REQUEST_KEYS = new Set(['request_headers', 'response_headers', 'request_body', 'response_body', 'metadata_context', 'protocol_config'])

const present = (v: unknown): boolean => v !== undefined && v !== null

/** A value the hand encoder does not take as it is (protobufjs would coerce or base64-decode it): protobufjs encodes the message. */
class Unsupported extends Error {}

/**
 * Whether the hand encoder covers this ProcessingRequest's fields: only the top level and
 * metadata_context are looked at here (protobufjs ignores unknown keys inside messages too);
 * the values' types are checked as they are measured, an unexpected one throwing Unsupported.
 */
function encodable (m: Msg): boolean {
  let oneof = 0
  for (const k in m) {
    if (!present(m[k])) continue
    if (!REQUEST_KEYS.has(k)) return false
    if (k !== 'metadata_context' && k !== 'protocol_config') oneof++
  }
  // Two fields of the oneof: protobufjs keeps the last one set; not worth copying that here.
  if (oneof > 1) return false
  const c = m.metadata_context as Msg | undefined | null
  if (present(c)) for (const k in c) if (k !== 'filter_metadata' && present(c![k])) return false
  return true
}

const str = (v: unknown): string => {
  if (typeof v !== 'string') throw new Unsupported()
  return v
}
const bytesOf = (v: unknown): Uint8Array => {
  if (!(v instanceof Uint8Array)) throw new Unsupported()
  return v
}
const num = (v: unknown): number => {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new Unsupported()
  return v
}
const bool = (v: unknown): boolean => {
  if (typeof v !== 'boolean') throw new Unsupported()
  return v
}
/** A bool field's size (tag and one byte), its type checked. */
const boolSize = (v: unknown): number => {
  bool(v)
  return 2
}

const varintSize = (n: number): number => n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5
/** A field of length-delimited content of `n` bytes: tag (fields < 16: one byte) + length + content. */
const lenField = (n: number): number => 1 + varintSize(n) + n

/** An enum or int field's varint size (negative int32s take ten bytes, as protobuf says). */
const intSize = (n: number): number => n < 0 ? 10 : varintSize(n)

/** Strings up to this long are written byte by byte when ASCII (header names and values mostly are). */
const SHORT_ASCII = 64

/** UTF-8 length: short ASCII strings counted in JS, the rest by Buffer.byteLength. */
function utf8Length (s: string): number {
  if (s.length > SHORT_ASCII) return Buffer.byteLength(s)
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s)
  return s.length
}

class Writer {
  buf: Buffer
  pos: number
  constructor (buf: Buffer, pos: number) {
    this.buf = buf
    this.pos = pos
  }

  varint (n: number): void {
    const b = this.buf
    while (n >= 0x80) {
      b[this.pos++] = (n & 0x7f) | 0x80
      n >>>= 7
    }
    b[this.pos++] = n
  }

  int (n: number): void {
    if (n >= 0) return this.varint(n)
    // A negative int32/enum: its 64-bit two's complement, ten bytes.
    let big = BigInt.asUintN(64, BigInt(n))
    while (big >= 0x80n) {
      this.buf[this.pos++] = Number(big & 0x7fn) | 0x80
      big >>= 7n
    }
    this.buf[this.pos++] = Number(big)
  }

  tag (field: number, wire: number): void {
    this.buf[this.pos++] = (field << 3) | wire
  }

  bytes (field: number, b: Uint8Array): void {
    this.tag(field, 2)
    this.varint(b.length)
    this.buf.set(b, this.pos)
    this.pos += b.length
  }

  string (field: number, s: string, n: number): void {
    this.tag(field, 2)
    this.varint(n)
    if (n === s.length && n <= SHORT_ASCII) {
      // ASCII (as many bytes as characters), short: a loop beats a call into the C++ writer.
      const b = this.buf
      for (let i = 0; i < n; i++) b[this.pos + i] = s.charCodeAt(i)
      this.pos += n
    } else this.pos += this.buf.write(s, this.pos, n, 'utf8')
  }

  bool (field: number, v: boolean): void {
    this.tag(field, 0)
    this.buf[this.pos++] = v ? 1 : 0
  }

  double (field: number, v: number): void {
    this.tag(field, 1)
    this.buf.writeDoubleLE(v, this.pos)
    this.pos += 8
  }
}

interface HeaderValueIn { key?: string, value?: string, raw_value?: Uint8Array }

function headerValueSize (e: HeaderValueIn): number {
  let n = 0
  if (present(e.key)) n += lenField(utf8Length(str(e.key)))
  if (present(e.value)) n += lenField(utf8Length(str(e.value)))
  if (present(e.raw_value)) n += lenField(bytesOf(e.raw_value).length)
  return n
}

function headersList (h: Msg): HeaderValueIn[] {
  const map = h.headers as Msg | undefined | null
  const list = (present(map) ? (map!.headers as HeaderValueIn[] | undefined | null) : null) ?? []
  if (!Array.isArray(list)) throw new Unsupported()
  return list
}

function headerMapSize (list: HeaderValueIn[]): number {
  let n = 0
  for (const e of list) n += lenField(headerValueSize(e))
  return n
}

function httpHeadersSize (h: Msg): number {
  let n = 0
  if (present(h.headers)) n += lenField(headerMapSize(headersList(h)))
  if (present(h.end_of_stream)) n += boolSize(h.end_of_stream)
  return n
}

function writeHttpHeaders (w: Writer, h: Msg): void {
  if (present(h.headers)) {
    const list = headersList(h)
    w.tag(1, 2)
    w.varint(headerMapSize(list))
    for (const e of list) {
      w.tag(1, 2)
      w.varint(headerValueSize(e))
      if (present(e.key)) w.string(1, e.key!, utf8Length(e.key!))
      if (present(e.value)) w.string(2, e.value!, utf8Length(e.value!))
      if (present(e.raw_value)) w.bytes(3, e.raw_value!)
    }
  }
  if (present(h.end_of_stream)) w.bool(3, h.end_of_stream as boolean)
}

function httpBodySize (b: Msg): number {
  let n = 0
  if (present(b.body)) n += lenField(bytesOf(b.body).length)
  if (present(b.end_of_stream)) n += boolSize(b.end_of_stream)
  return n
}

function writeHttpBody (w: Writer, b: Msg): void {
  if (present(b.body)) w.bytes(1, b.body as Uint8Array)
  if (present(b.end_of_stream)) w.bool(2, b.end_of_stream as boolean)
}

function structSize (s: StructMessage, depth = 0): number {
  if (depth > MAX_DEPTH || s === null || typeof s !== 'object') throw new Unsupported()
  let n = 0
  for (const k in s.fields ?? {}) {
    const v = s.fields![k]
    if (!present(v)) continue
    // A map entry: key (1), value (2).
    n += lenField(lenField(utf8Length(k)) + lenField(valueSize(v!, depth + 1)))
  }
  return n
}

/** A Value's size; one kind set at most (else protobufjs's rules decide), of the right type. */
function valueSize (v: ValueMessage, depth = 0): number {
  if (depth > MAX_DEPTH || v === null || typeof v !== 'object') throw new Unsupported()
  let kinds = 0
  let n = 0
  if (present(v.nullValue)) { kinds++; n = 2; if (v.nullValue !== 0) throw new Unsupported() }
  if (present(v.numberValue)) { kinds++; n = 9; if (typeof v.numberValue !== 'number') throw new Unsupported() }
  if (present(v.stringValue)) { kinds++; n = lenField(utf8Length(str(v.stringValue))) }
  if (present(v.boolValue)) { kinds++; n = 2; bool(v.boolValue) }
  if (present(v.structValue)) { kinds++; n = lenField(structSize(v.structValue!, depth + 1)) }
  if (present(v.listValue)) {
    kinds++
    const values = v.listValue!.values ?? []
    if (!Array.isArray(values)) throw new Unsupported()
    n = lenField(listSize(values, depth + 1))
  }
  if (kinds > 1) throw new Unsupported()
  return n
}

function listSize (values: ValueMessage[], depth = 0): number {
  let n = 0
  for (const x of values) n += lenField(valueSize(x, depth))
  return n
}

function writeStruct (w: Writer, s: StructMessage): void {
  for (const k in s.fields ?? {}) {
    const v = s.fields![k]
    if (!present(v)) continue
    const kn = utf8Length(k)
    w.tag(1, 2)
    w.varint(lenField(kn) + lenField(valueSize(v!)))
    w.string(1, k, kn)
    w.tag(2, 2)
    w.varint(valueSize(v!))
    writeValue(w, v!)
  }
}

function writeValue (w: Writer, v: ValueMessage): void {
  if (present(v.nullValue)) {
    w.tag(1, 0)
    w.varint(0)
  } else if (present(v.numberValue)) w.double(2, v.numberValue!)
  else if (present(v.stringValue)) w.string(3, v.stringValue!, utf8Length(v.stringValue!))
  else if (present(v.boolValue)) w.bool(4, v.boolValue!)
  else if (present(v.structValue)) {
    w.tag(5, 2)
    w.varint(structSize(v.structValue!))
    writeStruct(w, v.structValue!)
  } else if (present(v.listValue)) {
    const values = v.listValue!.values ?? []
    w.tag(6, 2)
    w.varint(listSize(values))
    for (const x of values) {
      w.tag(1, 2)
      w.varint(valueSize(x))
      writeValue(w, x)
    }
  }
}

function metadataSize (c: Msg): number {
  let n = 0
  const fm = (c.filter_metadata ?? {}) as Record<string, StructMessage>
  if (typeof fm !== 'object') throw new Unsupported()
  for (const ns in fm) {
    if (!present(fm[ns])) continue
    n += lenField(lenField(utf8Length(ns)) + lenField(structSize(fm[ns]!)))
  }
  return n
}

function writeMetadata (w: Writer, c: Msg): void {
  const fm = (c.filter_metadata ?? {}) as Record<string, StructMessage>
  for (const ns in fm) {
    if (!present(fm[ns])) continue
    const nn = utf8Length(ns)
    const sn = structSize(fm[ns]!)
    w.tag(1, 2)
    w.varint(lenField(nn) + lenField(sn))
    w.string(1, ns, nn)
    w.tag(2, 2)
    w.varint(sn)
    writeStruct(w, fm[ns]!)
  }
}

function protocolSize (p: Msg): number {
  let n = 0
  if (present(p.request_body_mode)) n += 1 + intSize(num(p.request_body_mode))
  if (present(p.response_body_mode)) n += 1 + intSize(num(p.response_body_mode))
  if (present(p.send_body_without_waiting_for_header_response)) n += boolSize(p.send_body_without_waiting_for_header_response)
  return n
}

function writeProtocol (w: Writer, p: Msg): void {
  if (present(p.request_body_mode)) { w.tag(1, 0); w.int(p.request_body_mode as number) }
  if (present(p.response_body_mode)) { w.tag(2, 0); w.int(p.response_body_mode as number) }
  if (present(p.send_body_without_waiting_for_header_response)) w.bool(3, p.send_body_without_waiting_for_header_response as boolean)
}

const PHASES = [['request_headers', 2, 'h'], ['response_headers', 3, 'h'], ['request_body', 4, 'b'], ['response_body', 5, 'b']] as const

/**
 * A ProcessingRequest with gRPC's 5-byte length prefix in front (one buffer, no copy), or
 * null when it has a field the hand encoder does not cover.
 */
export function encodeProcessingRequestFramed (m: Msg): Buffer | null {
  if (!encodable(m)) return null
  try {
    return encodeChecked(m)
  } catch {
    // Unsupported, or a shape the hand encoder cannot read: protobufjs encodes it (or says why not).
    return null
  }
}

function encodeChecked (m: Msg): Buffer {
  let size = 0
  const parts: Array<[number, number, Msg, 'h' | 'b']> = []
  for (const [key, field, kind] of PHASES) {
    const v = m[key] as Msg | undefined | null
    if (!present(v)) continue
    const n = kind === 'h' ? httpHeadersSize(v!) : httpBodySize(v!)
    parts.push([field, n, v!, kind])
    size += lenField(n)
  }
  const meta = present(m.metadata_context) ? metadataSize(m.metadata_context as Msg) : -1
  if (meta >= 0) size += lenField(meta)
  const protocol = present(m.protocol_config) ? protocolSize(m.protocol_config as Msg) : -1
  if (protocol >= 0) size += lenField(protocol)
  const buf = Buffer.allocUnsafe(5 + size)
  buf[0] = 0
  buf.writeUInt32BE(size, 1)
  const w = new Writer(buf, 5)
  for (const [field, n, v, kind] of parts) {
    w.tag(field, 2)
    w.varint(n)
    if (kind === 'h') writeHttpHeaders(w, v)
    else writeHttpBody(w, v)
  }
  if (meta >= 0) {
    w.tag(8, 2)
    w.varint(meta)
    writeMetadata(w, m.metadata_context as Msg)
  }
  if (protocol >= 0) {
    w.tag(11, 2)
    w.varint(protocol)
    writeProtocol(w, m.protocol_config as Msg)
  }
  // A plain Error on purpose: an assertion on the encoder's own size arithmetic, no input reaches it.
  if (w.pos !== buf.length) throw new Error(`ext_proc encoder: wrote ${w.pos - 5} of ${size} bytes`)
  return buf
}

// ───────────────────────────── decode ─────────────────────────────

/** 2^(7i): the weight of a varint's i-th byte. */
const SHIFTS = Array.from({ length: 10 }, (_, i) => 2 ** (7 * i))

class Reader {
  readonly buf: Buffer
  pos: number
  constructor (buf: Buffer, pos = 0) {
    this.buf = buf
    this.pos = pos
  }

  /** A varint as a number (exact up to 2^53; int64/uint64 beyond that lose precision, as protobufjs's longs: Number). */
  varint (): number {
    const b = this.buf
    if (this.pos >= b.length) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'truncated varint')
    const first = b[this.pos++]!
    if (first < 0x80) return first
    let result = first & 0x7f
    for (let i = 1; i < 10; i++) {
      if (this.pos >= b.length) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'truncated varint')
      const byte = b[this.pos++]!
      result += (byte & 0x7f) * SHIFTS[i]!
      if (byte < 0x80) return result
    }
    throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'malformed varint')
  }

  /** An int32 / enum field: the low 32 bits, signed. */
  int32 (): number {
    const start = this.pos
    const v = this.varint()
    // Up to four bytes the value is below 2^28: as is. Longer: the low 32 bits, signed.
    if (this.pos - start <= 4) return v
    return lowInt32(this.buf, start)
  }

  /** An int64 field as a number (negative values too). */
  int64 (): number {
    const start = this.pos
    const v = this.varint()
    if (this.pos - start < 10) return v
    // Ten bytes: a negative value in two's complement.
    let big = 0n
    for (let i = this.pos - 1; i >= start; i--) big = (big << 7n) | BigInt(this.buf[i]! & 0x7f)
    return Number(BigInt.asIntN(64, big))
  }

  bool (): boolean {
    return this.varint() !== 0
  }

  /** A length-delimited field's end offset. */
  end (): number {
    const n = this.varint()
    const end = this.pos + n
    if (end > this.buf.length) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'truncated field')
    return end
  }

  bytes (): Buffer {
    const end = this.end()
    const b = this.buf.subarray(this.pos, end)
    this.pos = end
    return b
  }

  string (): string {
    const end = this.end()
    const s = this.buf.toString('utf8', this.pos, end)
    this.pos = end
    return s
  }

  double (): number {
    if (this.pos + 8 > this.buf.length) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'truncated double')
    const v = this.buf.readDoubleLE(this.pos)
    this.pos += 8
    return v
  }

  skip (wire: number): void {
    switch (wire) {
      case 0: this.varint(); break
      case 1: this.pos += 8; break
      case 2: this.pos = this.end(); break
      case 5: this.pos += 4; break
      default: throw new PorticoError('PORTICO_EXT_PROC_DECODE', `invalid wire type ${wire}`)
    }
    if (this.pos > this.buf.length) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'truncated field')
  }
}

function lowInt32 (buf: Buffer, start: number): number {
  let v = 0
  for (let i = 0; i < 5; i++) {
    const byte = buf[start + i]!
    v |= (byte & 0x7f) << (7 * i)
    if (byte < 0x80) break
  }
  return v | 0
}

/** Reads the fields of one message up to `end`, `field` called with each tag it knows. */
function fields (r: Reader, end: number, field: (no: number, wire: number) => boolean): void {
  while (r.pos < end) {
    const tag = r.varint()
    const no = tag >>> 3
    const wire = tag & 7
    if (no === 0) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'invalid field number 0')
    if (!field(no, wire)) r.skip(wire)
  }
  if (r.pos !== end) throw new PorticoError('PORTICO_EXT_PROC_DECODE', 'field overruns its message')
}

/** A nested message: `read` over its bytes. */
function nested<T> (r: Reader, wire: number, read: (r: Reader, end: number) => T): T {
  if (wire !== 2) throw new PorticoError('PORTICO_EXT_PROC_DECODE', `wire type ${wire} for a message`)
  const end = r.end()
  const v = read(r, end)
  r.pos = end
  return v
}

function headerValue (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (wire !== 2) return false
    if (no === 1) o.key = r.string()
    else if (no === 2) o.value = r.string()
    else if (no === 3) o.raw_value = r.bytes()
    else return false
    return true
  })
  return o
}

function headerValueOption (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) o.header = nested(r, wire, headerValue)
    else if (no === 2 && wire === 2) o.append = nested(r, wire, boolValue)
    else if (no === 3 && wire === 0) o.append_action = r.int32()
    else if (no === 4 && wire === 0) o.keep_empty_value = r.bool()
    else return false
    return true
  })
  return o
}

function boolValue (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 0) o.value = r.bool()
    else return false
    return true
  })
  return o
}

function headerMutation (r: Reader, end: number): Msg {
  const o: Msg = {}
  let set: Msg[] | null = null
  let remove: string[] | null = null
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) (set ??= []).push(nested(r, wire, headerValueOption))
    else if (no === 2 && wire === 2) (remove ??= []).push(r.string())
    else return false
    return true
  })
  if (set !== null) o.set_headers = set
  if (remove !== null) o.remove_headers = remove
  return o
}

function headerMap (r: Reader, end: number): Msg {
  const o: Msg = {}
  let list: Msg[] | null = null
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) (list ??= []).push(nested(r, wire, headerValue))
    else return false
    return true
  })
  if (list !== null) o.headers = list
  return o
}

function streamedBody (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) o.body = r.bytes()
    else if (no === 2 && wire === 0) o.end_of_stream = r.bool()
    else return false
    return true
  })
  return o
}

function bodyMutation (r: Reader, end: number): Msg {
  const o: Msg = {}
  let which: string | null = null
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) { delete o.clear_body; delete o.streamed_response; o.body = r.bytes(); which = 'body' } else if (no === 2 && wire === 0) { delete o.body; delete o.streamed_response; o.clear_body = r.bool(); which = 'clear_body' } else if (no === 3 && wire === 2) {
      delete o.body
      delete o.clear_body
      o.streamed_response = nested(r, wire, streamedBody)
      which = 'streamed_response'
    } else return false
    return true
  })
  if (which !== null) o.mutation = which
  return o
}

function commonResponse (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 0) o.status = r.int32()
    else if (no === 2 && wire === 2) o.header_mutation = nested(r, wire, headerMutation)
    else if (no === 3 && wire === 2) o.body_mutation = nested(r, wire, bodyMutation)
    else if (no === 4 && wire === 2) o.trailers = nested(r, wire, headerMap)
    else if (no === 5 && wire === 0) o.clear_route_cache = r.bool()
    else return false
    return true
  })
  return o
}

/** HeadersResponse and BodyResponse: { response: CommonResponse }. */
function withCommon (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) o.response = nested(r, wire, commonResponse)
    else return false
    return true
  })
  return o
}

function trailersResponse (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) o.header_mutation = nested(r, wire, headerMutation)
    else return false
    return true
  })
  return o
}

function immediateResponse (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) o.status = nested(r, wire, (r2, e2) => intMessage(r2, e2, 'code', false))
    else if (no === 2 && wire === 2) o.headers = nested(r, wire, headerMutation)
    else if (no === 3 && wire === 2) o.body = r.bytes()
    else if (no === 4 && wire === 2) o.grpc_status = nested(r, wire, (r2, e2) => intMessage(r2, e2, 'status', true))
    else if (no === 5 && wire === 2) o.details = r.string()
    else return false
    return true
  })
  return o
}

/** A message of one int field 1 (HttpStatus's enum code, GrpcStatus's uint32 status). */
function intMessage (r: Reader, end: number, name: string, unsigned: boolean): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 0) o[name] = unsigned ? r.int32() >>> 0 : r.int32()
    else return false
    return true
  })
  return o
}

function processingMode (r: Reader, end: number): Msg {
  const names = ['', 'request_header_mode', 'response_header_mode', 'request_body_mode', 'response_body_mode', 'request_trailer_mode', 'response_trailer_mode']
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no >= 1 && no <= 6 && wire === 0) o[names[no]!] = r.int32()
    else return false
    return true
  })
  return o
}

function duration (r: Reader, end: number): Msg {
  const o: Msg = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 0) o.seconds = r.int64()
    else if (no === 2 && wire === 0) o.nanos = r.int32()
    else return false
    return true
  })
  return o
}

function struct (r: Reader, end: number, depth: number): StructMessage {
  if (depth > MAX_DEPTH) throw new PorticoError('PORTICO_EXT_PROC_DECODE', `Struct nested deeper than ${MAX_DEPTH}`)
  let map: Record<string, ValueMessage> | null = null
  fields(r, end, (no, wire) => {
    if (no !== 1 || wire !== 2) return false
    // A map entry: key 1, value 2 (either may be missing: the default).
    const entryEnd = r.end()
    let key = ''
    let value: ValueMessage | null = null
    fields(r, entryEnd, (eno, ewire) => {
      if (eno === 1 && ewire === 2) key = r.string()
      else if (eno === 2 && ewire === 2) value = nested(r, ewire, (r2, e2) => valueMessage(r2, e2, depth + 1))
      else return false
      return true
    })
    // Assigned as protobufjs's toObject does (a "__proto__" key is not an own field).
    ;(map ??= {})[key] = value ?? {}
    return true
  })
  return map === null ? {} : { fields: map }
}

function valueMessage (r: Reader, end: number, depth: number): ValueMessage {
  if (depth > MAX_DEPTH) throw new PorticoError('PORTICO_EXT_PROC_DECODE', `Value nested deeper than ${MAX_DEPTH}`)
  let o: ValueMessage = {}
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 0) o = { nullValue: r.int32(), kind: 'nullValue' }
    else if (no === 2 && wire === 1) o = { numberValue: r.double(), kind: 'numberValue' }
    else if (no === 3 && wire === 2) o = { stringValue: r.string(), kind: 'stringValue' }
    else if (no === 4 && wire === 0) o = { boolValue: r.bool(), kind: 'boolValue' }
    else if (no === 5 && wire === 2) o = { structValue: nested(r, wire, (r2, e2) => struct(r2, e2, depth + 1)), kind: 'structValue' }
    else if (no === 6 && wire === 2) o = { listValue: nested(r, wire, (r2, e2) => listValue(r2, e2, depth + 1)), kind: 'listValue' }
    else return false
    return true
  })
  return o
}

function listValue (r: Reader, end: number, depth: number): { values?: ValueMessage[] } {
  let values: ValueMessage[] | null = null
  fields(r, end, (no, wire) => {
    if (no === 1 && wire === 2) (values ??= []).push(nested(r, wire, (r2, e2) => valueMessage(r2, e2, depth + 1)))
    else return false
    return true
  })
  return values !== null ? { values } : {}
}

const RESPONSE_ONEOF = ['', 'request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers', 'immediate_response'] as const

/** A ProcessingResponse (without gRPC's prefix). Throws on malformed input. */
export function decodeProcessingResponse (buf: Buffer): ProcessingResponseMessage {
  const r = new Reader(buf)
  const o: Msg = {}
  let which: string | null = null
  fields(r, buf.length, (no, wire) => {
    if (no >= 1 && no <= 7 && wire === 2) {
      const name = RESPONSE_ONEOF[no]!
      if (which !== null && which !== name) delete o[which]
      which = name
      o[name] = nested(r, wire, no <= 4 ? withCommon : no <= 6 ? trailersResponse : immediateResponse)
    } else if (no === 8 && wire === 2) o.dynamic_metadata = nested(r, wire, (r2, e2) => struct(r2, e2, 0))
    else if (no === 9 && wire === 2) o.mode_override = nested(r, wire, processingMode)
    else if (no === 10 && wire === 2) o.override_message_timeout = nested(r, wire, duration)
    else return false
    return true
  })
  if (which !== null) o.response = which
  return o as ProcessingResponseMessage
}
