/**
 * A strict HTTP/1.1 response parser (RFC 9112) for the backend client (http/h1-pool.ts).
 * It refuses what llhttp refuses in its strict mode, because a response a proxy reads one
 * way and a later hop reads another is how responses get split and caches poisoned:
 *
 *   - a status line other than `HTTP/1.0|1.1 SP 3DIGIT [SP reason]`, a status outside 100-599,
 *     lines not ended by CRLF
 *   - header names that are not tokens (so whitespace before the colon), obs-fold, control
 *     characters in values
 *   - Content-Length that is not digits, or more than one (even equal, as llhttp);
 *     Content-Length together with Transfer-Encoding
 *   - chunk sizes that are not hex, overflow a safe integer or are followed by whitespace;
 *     chunk extensions outside RFC 9112 §7.1.1's grammar (no whitespace around `;` or `=`, as
 *     llhttp); chunk data not followed by CRLF
 *   - a header section (or trailer section) larger than `maxHeaderSize`
 *
 * Bodies are delivered as slices of the socket's chunks (no copies). `execute` stops after
 * any callback that set `paused`, returning how far it got, so a paused consumer gets no
 * more bytes until it resumes (the caller keeps the rest).
 */

import { PorticoError } from '../util/errors.ts'
import { hexValue } from '../util/hex.ts'
import { TCHAR } from '../ir/http-grammar.ts'

export type ResponseHeaders = Record<string, string | string[]>

export interface ResponseHead {
  statusCode: number
  statusMessage: string
  /** Lowercase names; a repeated header is an array of its values in order. */
  headers: ResponseHeaders
  /** The connection can carry another request after this response. */
  keepAlive: boolean
  /** Seconds from the server's `Keep-Alive: timeout=N`, or null. */
  keepAliveHint: number | null
}

export interface ResponseEvents {
  onHead(head: ResponseHead): void
  onData(chunk: Buffer): void
  onEnd(trailers: ResponseHeaders): void
}

/** Parser states (plain numbers: type stripping has no enums). */
const State = { Head: 0, Length: 1, ChunkSize: 2, ChunkExt: 3, ChunkSizeLf: 4, ChunkData: 5, ChunkDataCr: 6, ChunkDataLf: 7, Trailers: 8, UntilClose: 9, Done: 10 } as const
type State = typeof State[keyof typeof State]

/** Where a chunk extension's parse is (RFC 9112 §7.1.1); Invalid and End are outcomes. */
const Ext = { NameStart: 0, Name: 1, ValueStart: 2, Token: 3, Quoted: 4, QuotedPair: 5, QuotedEnd: 6, End: 7, Invalid: 8 } as const
type Ext = typeof Ext[keyof typeof Ext]

/** The largest chunk size that can take another hex digit and stay a safe integer. */
const MAX_CHUNK_PREFIX = Math.floor((Number.MAX_SAFE_INTEGER - 15) / 16)

const STATUS_LINE = /^HTTP\/1\.([01]) ([0-9]{3})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?$/
const CRLF_CRLF = Buffer.from('\r\n\r\n')

export function protocolError (message: string): PorticoError {
  return new PorticoError('PORTICO_UPSTREAM_PROTOCOL', `invalid response from backend: ${message}`)
}

export class H1ResponseParser {
  /** Set by a consumer's callback to stop `execute` after it. */
  paused = false
  private state: State = State.Done
  private readonly events: ResponseEvents
  private readonly maxHeaderSize: number
  /** Bytes of a head (or trailer section) not complete yet. */
  private pending: Buffer | null = null
  private remaining = 0
  private sizeDigits = 0
  /** Bytes of the current chunk's extensions, and where in their grammar the parser is. */
  private extBytes = 0
  private ext: Ext = Ext.NameStart
  private trailerLine = ''
  private trailerBytes = 0
  private trailers: ResponseHeaders = {}
  private noBody = false
  private upgradeAllowed = false
  /** The last `Keep-Alive` value seen and its timeout (one connection's server repeats it). */
  private keepAliveValue = ''
  private keepAliveSeconds: number | null = null
  /** The last head's framing left the connection unusable for another request. */
  reusable = true
  /** A 101 was read: the bytes after the head belong to the upgraded protocol. */
  upgraded = false

  constructor (events: ResponseEvents, maxHeaderSize = 16 * 1024) {
    this.events = events
    this.maxHeaderSize = maxHeaderSize
  }

  /** Readies the parser for the response to one request. */
  expect (method: string, upgrade: boolean): void {
    this.state = State.Head
    this.noBody = method === 'HEAD'
    this.upgradeAllowed = upgrade
    this.pending = null
    this.reusable = true
    this.upgraded = false
    this.paused = false
  }

  get done (): boolean {
    return this.state === State.Done
  }

  /** A response that ends when the connection does (no length, not chunked). */
  get untilClose (): boolean {
    return this.state === State.UntilClose
  }

  /** Part of a head or trailer section is kept from an earlier read (a reused read buffer must not be overwritten). */
  get holdsBytes (): boolean {
    return this.pending !== null
  }

  /** The head has been read (bytes of the body may be outstanding). */
  get headRead (): boolean {
    return this.state !== State.Head
  }

  /** The connection ended: completes a close-delimited body, anything else was cut short. */
  finish (): boolean {
    if (this.state !== State.UntilClose) return false
    this.state = State.Done
    this.events.onEnd({})
    return true
  }

  /**
   * Parses `buf` from `offset`; returns the offset it stopped at: the end, where the response
   * ended (the rest is not this response's), or after a callback that paused. Throws a
   * PORTICO_UPSTREAM_PROTOCOL error on a malformed response.
   */
  execute (buf: Buffer, offset = 0): number {
    let i = offset
    const end = buf.length
    while (i < end && !this.paused) {
      switch (this.state) {
        case State.Head:
          i = this.readHead(buf, i)
          break
        case State.Length:
          i = this.deliver(buf, i, State.Done)
          if (this.remaining === 0) this.events.onEnd({})
          break
        case State.UntilClose:
          this.events.onData(i === 0 ? buf : buf.subarray(i))
          i = end
          break
        case State.ChunkSize:
        case State.ChunkExt:
        case State.ChunkSizeLf:
          i = this.readChunkSize(buf, i)
          break
        case State.ChunkData:
          i = this.deliver(buf, i, State.ChunkDataCr)
          break
        case State.ChunkDataCr:
          if (buf[i++] !== 13) throw protocolError('chunk data not followed by CRLF')
          this.state = State.ChunkDataLf
          break
        case State.ChunkDataLf:
          if (buf[i++] !== 10) throw protocolError('chunk data not followed by CRLF')
          this.state = State.ChunkSize
          this.remaining = 0
          this.sizeDigits = 0
          this.extBytes = 0
          break
        case State.Trailers:
          i = this.readTrailers(buf, i)
          break
        case State.Done:
          return i
      }
    }
    return i
  }

  /**
   * Hands on what `buf` holds of the `remaining` body bytes from `i` (the chunk itself when it
   * is all body) and moves to `then` once they are all out; returns where it stopped.
   */
  private deliver (buf: Buffer, i: number, then: State): number {
    const n = Math.min(this.remaining, buf.length - i)
    this.remaining -= n
    if (this.remaining === 0) this.state = then
    this.events.onData(i === 0 && n === buf.length ? buf : buf.subarray(i, i + n))
    return i + n
  }

  private readHead (buf: Buffer, start: number): number {
    let data = buf
    let from = start
    if (this.pending !== null) {
      data = Buffer.concat([this.pending, buf.subarray(start)])
      from = 0
    }
    const at = data.indexOf(CRLF_CRLF, from)
    if (at === -1) {
      const size = data.length - from
      // A lone LF or CR would never make a CRLF CRLF: refuse it now rather than wait for the limit.
      if (size > this.maxHeaderSize) throw protocolError(`header section larger than ${this.maxHeaderSize} bytes`)
      if (hasBareLineEnd(data, from)) throw protocolError('header line not ended by CRLF')
      this.pending = from === 0 ? data : data.subarray(from)
      return buf.length
    }
    if (at + 4 - from > this.maxHeaderSize) throw protocolError(`header section larger than ${this.maxHeaderSize} bytes`)
    const consumedOfBuf = this.pending === null ? at + 4 : at + 4 - this.pending.length + start
    this.pending = null
    this.parseHead(data.toString('latin1', from, at), data, from)
    return consumedOfBuf
  }

  /**
   * `text`: the head without its final CRLF CRLF. Lines are cut with indexOf; each name is
   * checked and its case tested in one loop, each value trimmed and checked in another (no
   * split, no RegExp per line: this runs once per proxied response). `bytes` from `base` are
   * the head's bytes, which the checks read (see readField).
   */
  private parseHead (text: string, bytes: Buffer, base: number): void {
    const firstEnd = text.indexOf('\r\n')
    const statusLine = firstEnd === -1 ? text : text.slice(0, firstEnd)
    const status = STATUS_LINE.exec(statusLine)
    if (status === null) throw protocolError(`malformed status line ${JSON.stringify(statusLine.slice(0, 80))}`)
    const minor = status[1]
    // Three digits (STATUS_LINE); digitsValue rather than Number(), which sends a fresh
    // string to V8's runtime (~380 instructions a response, bench/tracing-instructions.ts).
    const statusCode = digitsValue(status[2]!)
    // RFC 9110 §15: a status is 100-599. Below 100 is no interim answer (the client would wait
    // for a final one forever), and a client cannot know what one above 599 means.
    if (statusCode < 100 || statusCode > 599) throw protocolError(`status ${status[2]} outside 100-599`)
    const statusMessage = status[3] ?? ''
    const headers: ResponseHeaders = {}
    let contentLength = -1
    let transferEncoding: string | null = null
    let connection = ''
    let keepAliveHint: number | null = null
    const length = text.length
    let pos = firstEnd === -1 ? length : firstEnd + 2
    while (pos < length) {
      let end = text.indexOf('\r\n', pos)
      if (end === -1) end = length
      readField(text, bytes, base, pos, end, 'header')
      const name = FIELD.name
      const value = FIELD.value
      pos = end + 2
      switch (name) {
        case 'content-length': {
          // RFC 9110 §8.6 lets a recipient take identical repeats as one; llhttp refuses any
          // repeat, and so does Portico: a hop that reads it otherwise is a split.
          if (contentLength !== -1) throw protocolError('more than one content-length header')
          const length = digitsValue(value)
          if (length === -1) throw protocolError(`invalid content-length ${JSON.stringify(value.slice(0, 40))}`)
          contentLength = length
          break
        }
        case 'transfer-encoding':
          // An empty one says nothing a reader could agree on (llhttp refuses it too).
          if (value === '') throw protocolError('empty transfer-encoding')
          transferEncoding = transferEncoding === null ? value : `${transferEncoding}, ${value}`
          break
        case 'connection':
          connection = connection === '' ? value : `${connection}, ${value}`
          break
        case 'keep-alive': {
          // Servers send the same value every time: parsed once per distinct value.
          if (value !== this.keepAliveValue) {
            const m = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(value)
            this.keepAliveValue = value
            this.keepAliveSeconds = m === null ? null : Number(m[1])
          }
          keepAliveHint = this.keepAliveSeconds
          break
        }
        default:
      }
      addField(headers, name, value)
    }
    if (transferEncoding !== null && contentLength !== -1) throw protocolError('both content-length and transfer-encoding')
    let keepAlive = minor === '1' && (connection === '' || connection === 'keep-alive' || connection === 'Keep-Alive' || !/(?:^|,)\s*close\s*(?:,|$)/i.test(connection))

    if (statusCode < 200) {
      if (statusCode === 101) {
        if (!this.upgradeAllowed) throw protocolError('101 Switching Protocols to a request that asked for no upgrade')
        this.upgraded = true
        this.reusable = false
        this.state = State.Done
        this.events.onHead({ statusCode, statusMessage, headers, keepAlive: false, keepAliveHint })
        return
      }
      // 100 Continue, 103 Early Hints and other interim answers: the final one follows.
      this.state = State.Head
      return
    }
    if (this.upgradeAllowed) keepAlive = false
    let next: State
    if (this.noBody || statusCode === 204 || statusCode === 304) {
      // No body, whatever the head says; one announced on a 204/304 may follow anyway.
      if (!this.noBody && (contentLength > 0 || transferEncoding !== null)) keepAlive = false
      next = State.Done
    } else if (transferEncoding !== null) {
      if (!chunkedLast(transferEncoding)) {
        // Not chunked last: the body runs to the end of the connection (RFC 9112 §6.3).
        keepAlive = false
        next = State.UntilClose
      } else {
        next = State.ChunkSize
        this.remaining = 0
        this.sizeDigits = 0
        this.extBytes = 0
      }
    } else if (contentLength !== -1) {
      next = contentLength === 0 ? State.Done : State.Length
      this.remaining = contentLength
    } else {
      keepAlive = false
      next = State.UntilClose
    }
    this.reusable = keepAlive
    this.state = next
    this.events.onHead({ statusCode, statusMessage, headers, keepAlive, keepAliveHint })
    if (next === State.Done && this.state === State.Done) this.events.onEnd({})
  }

  private readChunkSize (buf: Buffer, start: number): number {
    let i = start
    const end = buf.length
    while (i < end) {
      const c = buf[i]!
      if (this.state === State.ChunkSize) {
        const digit = hexValue(c)
        if (digit !== -1) {
          // The size stays a safe integer (leading zeros are no overflow, as in llhttp).
          if (this.remaining > MAX_CHUNK_PREFIX) throw protocolError('chunk size too large')
          this.sizeDigits++
          this.remaining = this.remaining * 16 + digit
          i++
          continue
        }
        if (this.sizeDigits === 0) throw protocolError('chunk size is not hexadecimal')
        // No whitespace after the size (llhttp refuses it too): `5 ;x` and `5 ` are where
        // parsers that skip it and parsers that stop there part ways.
        if (c === 13) this.state = State.ChunkSizeLf
        else if (c === 59 /* ; */) {
          this.state = State.ChunkExt
          this.ext = Ext.NameStart
        } else throw protocolError('invalid character after the chunk size')
        i++
        continue
      }
      if (this.state === State.ChunkExt) {
        // Extensions are ignored, but must end within a header section's size and follow
        // RFC 9112 §7.1.1: *( ";" token [ "=" ( token / quoted-string ) ] ), no whitespace.
        if (++this.extBytes > this.maxHeaderSize) throw protocolError(`chunk extensions longer than ${this.maxHeaderSize} bytes`)
        this.ext = nextExt(this.ext, c)
        if (this.ext === Ext.Invalid) throw protocolError('invalid chunk extension')
        if (this.ext === Ext.End) this.state = State.ChunkSizeLf
        i++
        continue
      }
      // ChunkSizeLf
      if (c !== 10) throw protocolError('chunk size line not ended by CRLF')
      i++
      if (this.remaining === 0) {
        this.state = State.Trailers
        this.trailerLine = ''
        this.trailerBytes = 0
        this.trailers = {}
      } else {
        this.state = State.ChunkData
      }
      return i
    }
    return i
  }

  private readTrailers (buf: Buffer, start: number): number {
    let i = start
    const end = buf.length
    while (i < end) {
      const lf = buf.indexOf(10, i)
      const stop = lf === -1 ? end : lf
      this.trailerBytes += stop - i + 1
      if (this.trailerBytes > this.maxHeaderSize) throw protocolError(`trailer section larger than ${this.maxHeaderSize} bytes`)
      this.trailerLine += buf.toString('latin1', i, stop)
      if (lf === -1) return end
      i = lf + 1
      const line = this.trailerLine
      this.trailerLine = ''
      if (line.charCodeAt(line.length - 1) !== 13) throw protocolError('trailer line not ended by CRLF')
      if (line.length === 1) {
        this.state = State.Done
        this.events.onEnd(this.trailers)
        return i
      }
      readField(line, Buffer.from(line, 'latin1'), 0, 0, line.length - 1, 'trailer')
      addField(this.trailers, FIELD.name, FIELD.value)
    }
    return i
  }

}

/** A name byte's class, as bits: a tchar, an upper-case one (A-Z), or no tchar (every byte from 128). */
const TCHAR_BYTE = 1
const UPPER_TCHAR = 2
const NOT_TCHAR = 4
const NAME_BYTE = new Uint8Array(256).fill(NOT_TCHAR)
for (let c = 0; c < 128; c++) if (TCHAR[c] === 1) NAME_BYTE[c] = c >= 65 && c <= 90 ? UPPER_TCHAR : TCHAR_BYTE

/** 1 for the bytes a field value may not carry: control characters but HTAB, and DEL (obs-text, 128-255, is allowed). */
const VALUE_BAD = new Uint8Array(256)
for (let c = 0; c < 32; c++) if (c !== 9) VALUE_BAD[c] = 1
VALUE_BAD[127] = 1

/** The field line `readField` read last (one at a time: no object per line). */
const FIELD = { name: '', value: '' }

/**
 * The names backends send most, as the (internalized) lower-case constants, read in place
 * in whatever case they were sent: a slice and toLowerCase cost ~250 instructions a header
 * (V8's Intl lowering), and a sliced name used as a key is hashed and looked up in V8's
 * string table, where a constant is not. Compared byte by byte (`bytes[at]` is the name's
 * first byte): `startsWith` on the head's string, Title-Case then lower-case, was ~1,100
 * instructions a field (TurboFan inlines it as a character loop that dispatches on the
 * string's kind at each character).
 */
function commonName (bytes: Uint8Array, at: number, length: number): string | undefined {
  switch (length) {
    case 4: return nameAt(bytes, at, DATE)
    case 10: return nameAt(bytes, at, CONNECTION) ?? nameAt(bytes, at, KEEP_ALIVE)
    case 12: return nameAt(bytes, at, CONTENT_TYPE)
    case 14: return nameAt(bytes, at, CONTENT_LENGTH)
    case 17: return nameAt(bytes, at, TRANSFER_ENCODING)
    default: return undefined
  }
}

interface CommonName { name: string, bytes: Uint8Array }

function common (name: string): CommonName {
  return { name, bytes: Buffer.from(name, 'latin1') }
}

const DATE = common('date')
const CONNECTION = common('connection')
const KEEP_ALIVE = common('keep-alive')
const CONTENT_TYPE = common('content-type')
const CONTENT_LENGTH = common('content-length')
const TRANSFER_ENCODING = common('transfer-encoding')

/**
 * `common.name` when `bytes` hold it from `at` in any case. The name's bytes are tchars
 * (readField checked them), and on a tchar `| 0x20` maps only A-Z onto a-z: the common
 * names hold letters and '-' alone.
 */
function nameAt (bytes: Uint8Array, at: number, common: CommonName): string | undefined {
  const lower = common.bytes
  for (let k = 0; k < lower.length; k++) {
    if ((bytes[at + k]! | 0x20) !== lower[k]) return undefined
  }
  return common.name
}

/**
 * Reads the field line `text[pos, end)` of a header or trailer section into FIELD: the name
 * must be a token (so no whitespace before the colon, and a line starting with whitespace is
 * obsolete folding) and comes out lower-case; the value, without its surrounding spaces and
 * tabs, must hold no control character but HTAB, nor DEL. One loop for each, no RegExp.
 *
 * The loops read the line's bytes (`bytes[base + i]` is `text[i]`: latin1 is one char per
 * byte), each byte's class from a table, OR-ed together and tested once after the loop
 * (NAME_BYTE, VALUE_BAD): with a charCodeAt and two or three tests per character, the loops
 * were ~7,100 instructions for a five-field backend head, ~4,600 so (callgrind, the parser
 * alone in a loop). `text` gives the slices.
 */
function readField (text: string, bytes: Uint8Array, base: number, pos: number, end: number, section: 'header' | 'trailer'): void {
  const colon = text.indexOf(':', pos)
  if (colon === -1 || colon >= end || colon === pos) {
    const first = bytes[base + pos]
    throw protocolError(first === 32 || first === 9 ? 'obsolete line folding' : `${section} line without a name`)
  }
  // Each byte's class OR-ed together, one check after the loop: no branch per byte.
  let kinds = 0
  for (let i = base + pos, stop = base + colon; i < stop; i++) kinds |= NAME_BYTE[bytes[i]!]!
  if ((kinds & NOT_TCHAR) !== 0) throw protocolError(`invalid ${section} name ${JSON.stringify(text.slice(pos, Math.min(colon, pos + 80)))}`)
  const upper = (kinds & UPPER_TCHAR) !== 0
  const name = commonName(bytes, base + pos, colon - pos) ?? (upper ? text.slice(pos, colon).toLowerCase() : text.slice(pos, colon))
  let vs = base + colon + 1
  let ve = base + end
  while (vs < ve && (bytes[vs] === 32 || bytes[vs] === 9)) vs++
  while (ve > vs && (bytes[ve - 1] === 32 || bytes[ve - 1] === 9)) ve--
  let bad = 0
  for (let i = vs; i < ve; i++) bad |= VALUE_BAD[bytes[i]!]!
  if (bad !== 0) throw protocolError(`invalid character in ${section} ${name}`)
  FIELD.name = name
  FIELD.value = text.slice(vs - base, ve - base)
}

/** Adds a field to a section: a repeated name becomes an array of its values in order. */
function addField (fields: ResponseHeaders, name: string, value: string): void {
  const prior = fields[name]
  if (prior === undefined) fields[name] = value
  else if (typeof prior === 'string') fields[name] = [prior, value]
  else prior.push(value)
}


/**
 * Whether a Transfer-Encoding's codings end in chunked (the body is chunked) or not (it runs
 * to the connection's end, RFC 9112 §6.3). Chunked before another coding (chunked twice, or
 * encoded over) is refused: RFC 9112 §6.1 has chunked applied once and last. So is an empty
 * list element, which RFC 9110 §5.6.1 says to ignore but parsers read apart: llhttp takes
 * `chunked,` for a body that runs to the connection's end, another reader for chunked.
 */
function chunkedLast (te: string): boolean {
  if (te === 'chunked') return true
  const codings = te.toLowerCase().split(',').map(c => c.trim())
  if (codings.includes('')) throw protocolError('transfer-encoding with an empty list element')
  const at = codings.indexOf('chunked')
  if (at !== -1 && at !== codings.length - 1) throw protocolError('transfer-encoding with chunked before another coding')
  return at !== -1
}

/** One byte of a chunk extension: the grammar's next step. */
function nextExt (at: Ext, c: number): Ext {
  const tchar = c < 128 && TCHAR[c] === 1
  switch (at) {
    case Ext.NameStart:
      return tchar ? Ext.Name : Ext.Invalid
    case Ext.Name:
    case Ext.Token:
      if (tchar) return at
      if (c === 59 /* ; */) return Ext.NameStart
      if (c === 13) return Ext.End
      if (c === 61 /* = */ && at === Ext.Name) return Ext.ValueStart
      return Ext.Invalid
    case Ext.ValueStart:
      if (tchar) return Ext.Token
      return c === 34 /* " */ ? Ext.Quoted : Ext.Invalid
    case Ext.Quoted:
      // qdtext: HTAB, SP, VCHAR but " and \, obs-text.
      if (c === 34) return Ext.QuotedEnd
      if (c === 92 /* \ */) return Ext.QuotedPair
      return c === 9 || (c >= 32 && c !== 127) ? Ext.Quoted : Ext.Invalid
    case Ext.QuotedPair:
      return c === 9 || (c >= 32 && c !== 127) ? Ext.Quoted : Ext.Invalid
    case Ext.QuotedEnd:
      if (c === 59) return Ext.NameStart
      return c === 13 ? Ext.End : Ext.Invalid
    default:
      return Ext.Invalid
  }
}

/** A Content-Length's value: 1 to 15 digits (a safe integer), else -1. */
function digitsValue (value: string): number {
  const n = value.length
  if (n === 0 || n > 15) return -1
  let v = 0
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i) - 48
    if (c < 0 || c > 9) return -1
    v = v * 10 + c
  }
  return v
}

/** An LF without its CR, or a CR followed by something other than LF, in `buf` from `from`. */
function hasBareLineEnd (buf: Buffer, from: number): boolean {
  let i = buf.indexOf(10, from)
  while (i !== -1) {
    if (i === from || buf[i - 1] !== 13) return true
    i = buf.indexOf(10, i + 1)
  }
  i = buf.indexOf(13, from)
  while (i !== -1 && i + 1 < buf.length) {
    if (buf[i + 1] !== 10) return true
    i = buf.indexOf(13, i + 1)
  }
  return false
}
