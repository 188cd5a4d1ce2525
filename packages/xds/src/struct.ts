/**
 * google.protobuf.Struct on the wire ⇄ plain JSON values, written and read directly with
 * protobufjs's Writer and Reader. Going through protobufjs's reflection instead (plain value
 * → `{fields: {k: {stringValue}}}` → fromObject → encode, and back) costs several times more:
 * with 1,000 routes it was most of the time from an HTTPRoute change to the proxy serving it
 * (bench/translation.ts). The bytes are the standard encoding, so any protobuf library
 * decodes them as a Struct (packages/xds/test/struct.test.ts checks against reflection).
 *
 *   Struct    { map<string, Value> fields = 1 }       map entry: { string key = 1; Value value = 2 }
 *   Value     { oneof kind { NullValue null_value = 1; double number_value = 2; string string_value = 3;
 *                            bool bool_value = 4; Struct struct_value = 5; ListValue list_value = 6 } }
 *   ListValue { repeated Value values = 1 }
 *
 * Numbers travel as doubles, as in JSON; `undefined` members are left out, like JSON.stringify.
 */

import protobuf from 'protobufjs'

const { Reader, Writer } = protobuf

// Tags: (field number << 3) | wire type (0 varint, 1 64-bit, 2 length-delimited).
const STRUCT_FIELDS = (1 << 3) | 2
const ENTRY_KEY = (1 << 3) | 2
const ENTRY_VALUE = (2 << 3) | 2
const VALUE_NULL = (1 << 3) | 0
const VALUE_NUMBER = (2 << 3) | 1
const VALUE_STRING = (3 << 3) | 2
const VALUE_BOOL = (4 << 3) | 0
const VALUE_STRUCT = (5 << 3) | 2
const VALUE_LIST = (6 << 3) | 2
const LIST_VALUES = (1 << 3) | 2

export type JsonObject = Record<string, unknown>

/** Appends the fields of a Struct (the message body, without its own tag and length). */
export function writeStruct (w: protobuf.Writer, o: JsonObject): void {
  for (const key in o) {
    const v = o[key]
    if (v === undefined) continue
    w.uint32(STRUCT_FIELDS).fork()
    w.uint32(ENTRY_KEY).string(key)
    w.uint32(ENTRY_VALUE).fork()
    writeValue(w, v)
    w.ldelim()
    w.ldelim()
  }
}

function writeValue (w: protobuf.Writer, v: unknown): void {
  switch (typeof v) {
    case 'string':
      w.uint32(VALUE_STRING).string(v)
      return
    case 'number':
      w.uint32(VALUE_NUMBER).double(v)
      return
    case 'boolean':
      w.uint32(VALUE_BOOL).bool(v)
      return
    case 'object':
      if (v === null) break
      if (Array.isArray(v)) {
        w.uint32(VALUE_LIST).fork()
        for (const item of v) {
          w.uint32(LIST_VALUES).fork()
          writeValue(w, item === undefined ? null : item)
          w.ldelim()
        }
        w.ldelim()
        return
      }
      w.uint32(VALUE_STRUCT).fork()
      writeStruct(w, v as JsonObject)
      w.ldelim()
      return
    case 'undefined':
      break
    default:
      throw new TypeError(`cannot encode a ${typeof v} in a Struct`)
  }
  w.uint32(VALUE_NULL).int32(0)
}

/** Encodes a plain object as a standalone Struct message. */
export function encodeStruct (o: JsonObject): Uint8Array {
  const w = Writer.create()
  writeStruct(w, o)
  return w.finish()
}

/** Reads a Struct body that ends at `end`. */
export function readStruct (r: protobuf.Reader, end: number): JsonObject {
  const out: JsonObject = {}
  while (r.pos < end) {
    const tag = r.uint32()
    if (tag !== STRUCT_FIELDS) {
      r.skipType(tag & 7)
      continue
    }
    const entryEnd = r.uint32() + r.pos
    let key = ''
    let value: unknown = null
    while (r.pos < entryEnd) {
      const t = r.uint32()
      if (t === ENTRY_KEY) key = r.string()
      else if (t === ENTRY_VALUE) value = readValue(r, r.uint32() + r.pos)
      else r.skipType(t & 7)
    }
    out[key] = value
  }
  return out
}

function readValue (r: protobuf.Reader, end: number): unknown {
  let value: unknown = null
  while (r.pos < end) {
    const tag = r.uint32()
    switch (tag) {
      case VALUE_STRING: value = r.string(); break
      case VALUE_NUMBER: value = r.double(); break
      case VALUE_BOOL: value = r.bool(); break
      case VALUE_NULL: r.int32(); value = null; break
      case VALUE_STRUCT: value = readStruct(r, r.uint32() + r.pos); break
      case VALUE_LIST: value = readList(r, r.uint32() + r.pos); break
      default: r.skipType(tag & 7)
    }
  }
  return value
}

function readList (r: protobuf.Reader, end: number): unknown[] {
  const out: unknown[] = []
  while (r.pos < end) {
    const tag = r.uint32()
    if (tag === LIST_VALUES) out.push(readValue(r, r.uint32() + r.pos))
    else r.skipType(tag & 7)
  }
  return out
}

/** Decodes a standalone Struct message. */
export function decodeStruct (bytes: Uint8Array): JsonObject {
  const r = Reader.create(bytes)
  return readStruct(r, r.len)
}

export { Reader, Writer }
