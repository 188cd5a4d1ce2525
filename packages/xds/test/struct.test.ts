import { test } from 'node:test'
import assert from 'node:assert/strict'
import protobuf from 'protobufjs'
import { decodeStruct, encodeStruct } from '../src/struct.ts'
import { decodeResource, encodeResources, protocol, RESOURCE_TYPE_URL } from '../src/index.ts'

// protobufjs's reflection types for google.protobuf.Struct: the reference encoding.
const root = new protobuf.Root()
root.resolvePath = (_origin, target) => target
root.loadSync('google/protobuf/struct.proto')
const Struct = root.lookupType('google.protobuf.Struct')

const sample = {
  name: 'bind/0.0.0.0:8080',
  port: 8080,
  ratio: -0.25,
  big: 2 ** 53 - 1,
  on: true,
  off: false,
  none: null,
  skipped: undefined,
  empty: {},
  list: [],
  unicode: 'héllo ✓ 𝄞',
  nested: { routes: [{ path: { kind: 'prefix', value: '/a' }, weights: [1, 2.5, null], tags: ['x', 'y'] }, [['deep']]] }
}
const expected = JSON.parse(JSON.stringify(sample))

test('round trip: what JSON would keep', () => {
  assert.deepEqual(decodeStruct(encodeStruct(sample)), expected)
})

test('the bytes are a standard Struct: protobufjs reflection reads ours and we read its', () => {
  const theirs = Struct.toObject(Struct.decode(encodeStruct(sample)), { defaults: false, oneofs: false }) as { fields: Record<string, unknown> }
  assert.deepEqual(Object.keys(theirs.fields).sort(), Object.keys(expected).sort())
  assert.deepEqual(theirs.fields.port, { numberValue: 8080 })
  assert.deepEqual(theirs.fields.none, { nullValue: 0 })
  assert.deepEqual(theirs.fields.list, { listValue: {} })
  // The reference encoder's bytes, read back by ours.
  const reference = Struct.encode(Struct.fromObject(toProto(expected))).finish()
  assert.deepEqual(decodeStruct(reference), expected)
})

test('unknown fields are skipped, not misread', () => {
  const w = protobuf.Writer.create()
  w.uint32((9 << 3) | 0).uint32(42) // an unknown varint field
  w.uint32((1 << 3) | 2).fork().uint32((1 << 3) | 2).string('k').uint32((2 << 3) | 2).fork().uint32((3 << 3) | 2).string('v').ldelim().ldelim()
  assert.deepEqual(decodeStruct(w.finish()), { k: 'v' })
})

test('resources: encode and decode a bind and a backend; bad input throws', () => {
  const ir = {
    version: 'v1',
    binds: [{ key: '0.0.0.0:8080', address: '0.0.0.0', port: 8080, listeners: [] }],
    backends: [{ key: 'svc/a', kind: 'host', target: '10.0.0.1:80' }]
  } as never
  const encoded = encodeResources(ir)
  assert.deepEqual([...encoded.keys()], ['bind/0.0.0.0:8080', 'backend/svc/a'])
  const bind = decodeResource(encoded.get('bind/0.0.0.0:8080')!.resource)
  assert.equal(bind.kind, 'bind')
  assert.equal((bind.value as { port: number }).port, 8080)
  // The message decodes with the Resource type from protos/ too.
  const viaProto = protocol().resource.decode(encoded.get('backend/svc/a')!.resource.value) as unknown as { backend?: unknown }
  assert.ok(viaProto.backend !== undefined)
  assert.throws(() => decodeResource({ type_url: 'type.googleapis.com/other', value: new Uint8Array() }), /unexpected resource type/)
  assert.throws(() => decodeResource({ type_url: RESOURCE_TYPE_URL, value: new Uint8Array() }), /empty resource/)
  assert.throws(() => decodeResource({ type_url: RESOURCE_TYPE_URL, value: Uint8Array.of(0x0a, 0x50, 0x01) }))
})

function toProto (v: unknown): any {
  const value = (x: unknown): any => {
    if (x === null) return { nullValue: 0 }
    if (typeof x === 'number') return { numberValue: x }
    if (typeof x === 'string') return { stringValue: x }
    if (typeof x === 'boolean') return { boolValue: x }
    if (Array.isArray(x)) return { listValue: { values: x.map(value) } }
    return { structValue: toProto(x) }
  }
  return { fields: Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, value(x)])) }
}
