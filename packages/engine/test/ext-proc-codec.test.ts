/**
 * The hand-written ext_proc codec (src/traffic/ext-proc-codec.ts) against protobufjs on the
 * same protos (@grpc/proto-loader's serializers, what a grpc-js processor uses): every
 * ProcessingRequest Portico sends decodes on the processor's side to what protobufjs's own
 * encoding gives, and every ProcessingResponse decodes to what protobufjs's decoding gives —
 * the shapes the rest of the ext_proc client reads. Malformed input is an error, never a hang.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { MethodDefinition } from '@grpc/proto-loader'
import { decodeProcessingResponse, encodeProcessingRequestFramed } from '../src/traffic/ext-proc-codec.ts'
import { extProcProtos, headerMapMessage, metadataContextMessage } from '../src/traffic/ext-proc-grpc.ts'

type M = Record<string, unknown>
const method = (extProcProtos()['envoy.service.ext_proc.v3.ExternalProcessor'] as Record<string, MethodDefinition<M, M, M, M>>).Process!

/** What a processor decodes from the hand encoder's bytes, and from protobufjs's. */
function bothWays (m: M): { hand: M, reference: M } {
  const framed = encodeProcessingRequestFramed(m)
  assert.ok(framed !== null, 'the hand encoder covers this message')
  assert.equal(framed[0], 0)
  assert.equal(framed.readUInt32BE(1), framed.length - 5)
  return { hand: method.requestDeserialize(framed.subarray(5)), reference: method.requestDeserialize(method.requestSerialize(m)) }
}

test('requests: what the processor decodes is what protobufjs\'s encoding gives', () => {
  const messages: M[] = [
    { request_headers: { headers: headerMapMessage({ ':method': 'POST', ':path': '/v1/chat?x=ü' }, { 'content-type': 'application/json', 'x-many': ['a', 'b'], 'x-empty': '' }), end_of_stream: false } },
    {
      request_headers: { headers: headerMapMessage({ ':authority': 'h' }, {}), end_of_stream: true },
      protocol_config: { request_body_mode: 4, response_body_mode: 0 },
      metadata_context: metadataContextMessage({ 'envoy.lb.subset_hint': { 'x-gateway-destination-endpoint-subset': ['10.0.0.1:8000', '10.0.0.2:8000'] } })
    },
    { request_body: { body: Buffer.alloc(70_000, 7), end_of_stream: true } },
    { request_body: { body: Buffer.alloc(0), end_of_stream: false } },
    { response_headers: { headers: headerMapMessage({ ':status': '200' }, { 'content-length': '5' }), end_of_stream: false }, metadata_context: metadataContextMessage({ 'envoy.lb': { 'x-gateway-destination-endpoint-served': '10.0.0.1:8000' } }) },
    { response_body: { body: Buffer.from('hello'), end_of_stream: true } },
    { metadata_context: metadataContextMessage({ ns: { s: 'é', n: -1.5, big: 2 ** 40, t: true, f: false, nil: null, list: [1, 'two', [3], { four: 4 }], obj: { deep: { deeper: {} } } } }) },
    { protocol_config: { request_body_mode: -1, response_body_mode: 2, send_body_without_waiting_for_header_response: true } },
    { request_headers: { headers: { headers: [{ key: 'k', value: 'v' }] } } },
    { request_headers: {} },
    {}
  ]
  for (const m of messages) {
    const { hand, reference } = bothWays(m)
    assert.deepEqual(hand, reference)
  }
})

test('requests with a field the hand encoder does not cover are left to protobufjs', () => {
  assert.equal(encodeProcessingRequestFramed({ request_trailers: { trailers: {} } }), null)
  assert.equal(encodeProcessingRequestFramed({ attributes: {} }), null)
  assert.equal(encodeProcessingRequestFramed({ request_headers: { headers: { headers: [{ key: 'k', raw_value: 'not bytes' }] } } }), null)
  assert.equal(encodeProcessingRequestFramed({ request_headers: {}, request_body: {} }), null)
})

test('responses: decoded as protobufjs decodes them', () => {
  const set = (key: string, value: string) => ({ header: { key, raw_value: Buffer.from(value) }, append_action: 2 })
  const responses: M[] = [
    {
      request_headers: { response: { status: 0, clear_route_cache: true, header_mutation: { set_headers: [set('x-gateway-destination-endpoint', '10.0.0.1:8000'), { header: { key: 'a', value: 'b' }, append: { value: false }, keep_empty_value: true }], remove_headers: ['x-r', 'x-s'] } } },
      dynamic_metadata: { fields: { 'envoy.lb': { structValue: { fields: { 'x-gateway-destination-endpoint': { stringValue: '10.0.0.1:8000,10.0.0.2:8000' }, n: { numberValue: 3.25 }, b: { boolValue: false }, z: { nullValue: 0 }, l: { listValue: { values: [{ stringValue: 'x' }, { listValue: {} }] } } } } } } },
      mode_override: { request_body_mode: 1, response_body_mode: 4, response_header_mode: 2 },
      override_message_timeout: { seconds: 3, nanos: 5 }
    },
    { request_body: { response: { body_mutation: { streamed_response: { body: Buffer.alloc(62_000, 1), end_of_stream: true } } } } },
    { request_body: { response: { body_mutation: { body: Buffer.from('new') } } } },
    { response_body: { response: { body_mutation: { clear_body: true } } } },
    { request_body: { response: { status: 1, trailers: { headers: [{ key: 't', value: 'v' }] } } } },
    { response_headers: {} },
    { request_trailers: { header_mutation: { remove_headers: ['x'] } } },
    { response_trailers: {} },
    { immediate_response: { status: { code: 429 }, headers: { set_headers: [set('retry-after', '1')] }, body: Buffer.from('slow down'), grpc_status: { status: 8 }, details: 'shed' } },
    { immediate_response: {} },
    { override_message_timeout: { seconds: -2 } },
    {}
  ]
  for (const m of responses) {
    const bytes = method.responseSerialize(m)
    assert.deepEqual(decodeProcessingResponse(Buffer.from(bytes)), method.responseDeserialize(bytes))
  }
})

test('responses: unknown fields skipped, malformed input an error', () => {
  const known = Buffer.from(method.responseSerialize({ request_headers: { response: {} } }))
  // Field 15 as a varint, a fixed64, a length-delimited and a fixed32 field before the known one.
  const unknown = Buffer.concat([Buffer.from([15 << 3 | 0, 0x96, 0x01, 15 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8, 15 << 3 | 2, 2, 9, 9, 15 << 3 | 5, 1, 2, 3, 4]), known])
  assert.deepEqual(decodeProcessingResponse(unknown), method.responseDeserialize(unknown))
  const full = Buffer.from(method.responseSerialize({ request_body: { response: { body_mutation: { body: Buffer.alloc(300, 1) } } } }))
  for (let n = 1; n < full.length; n += 7) assert.throws(() => decodeProcessingResponse(full.subarray(0, n)), Error, `truncated at ${n}`)
  // A Struct nested past the bound.
  const len = (field: number, b: Buffer) => Buffer.concat([Buffer.from([field << 3 | 2, ...varint(b.length)]), b])
  const entry = (v: Buffer) => len(1, Buffer.concat([len(1, Buffer.from('k')), len(2, v)]))
  let value = len(3, Buffer.from('x'))
  for (let i = 0; i < 80; i++) value = len(5, entry(value))
  const deep = len(8, entry(value))
  assert.throws(() => decodeProcessingResponse(deep), /deeper/)
  // Random bytes: decoded or refused, never stuck.
  let seed = 1
  const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
  for (let i = 0; i < 2000; i++) {
    const b = Buffer.from(Array.from({ length: Math.floor(rand() * 40) }, () => Math.floor(rand() * 256)))
    try {
      decodeProcessingResponse(b)
    } catch (err) {
      assert.ok(err instanceof Error)
    }
  }
})

function varint (n: number): number[] {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  out.push(n)
  return out
}
