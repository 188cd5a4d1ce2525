/**
 * A real Envoy external authorization server for tests: @grpc/grpc-js serving
 * `envoy.service.auth.v3.Authorization/Check` from the repository's protos. Every call is
 * recorded twice — decoded, and as the raw protobuf bytes that came over the wire — so tests
 * can also check the encoding independently of our proto files. A handler may answer with a
 * CheckResponse object, with raw bytes (encoded by the test itself), or never (`'hang'`).
 *
 * Also a small protobuf wire reader (field number → values), built on protobufjs's Reader
 * alone: no schema, so what it finds is what was on the wire.
 */

import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '@portico/engine'
import protobuf from 'protobufjs'

export type CheckRequest = {
  attributes: {
    source?: { address?: { socket_address?: { address?: string, port_value?: number } } }
    destination?: { address?: { socket_address?: { address?: string, port_value?: number } } }
    request?: {
      time?: { seconds?: number, nanos?: number }
      http?: { id?: string, method?: string, headers?: Record<string, string>, path?: string, host?: string, scheme?: string, size?: number, protocol?: string, body?: string, raw_body?: Buffer }
    }
    context_extensions?: Record<string, string>
  }
}

export type CheckReply = Record<string, unknown> | Buffer | 'hang'

export interface AuthzServer {
  port: number
  host: string
  /** Each call: decoded, raw bytes, the client's address (`ipv4:127.0.0.1:PORT`) — one per connection — and its metadata. */
  calls: Array<{ request: CheckRequest, raw: Buffer, peer: string, metadata: Record<string, unknown> }>
  /** Replace the answer for the next calls. */
  handler: (request: CheckRequest) => CheckReply | Promise<CheckReply>
  close(): Promise<void>
}

// The same protos, loaded the same way, as the proxy's client.
const packageDefinition = envoyProtos('envoy/service/auth/v3/external_auth.proto')

/** An OK CheckResponse (gRPC status 0). */
export const OK: Record<string, unknown> = { status: { code: 0 } }

export async function startAuthzServer (handler: AuthzServer['handler'] = () => OK, port = 0): Promise<AuthzServer> {
  const pkg = grpc.loadPackageDefinition(packageDefinition) as unknown as { envoy: { service: { auth: { v3: { Authorization: grpc.ServiceClientConstructor } } } } }
  const check = pkg.envoy.service.auth.v3.Authorization.service.Check!
  const server = new grpc.Server()
  const state: AuthzServer = {
    port: 0,
    host: '',
    calls: [],
    handler,
    close: async () => { server.forceShutdown() }
  }
  let lastRaw = Buffer.alloc(0)
  const definition: grpc.ServiceDefinition = {
    Check: {
      ...check,
      requestDeserialize: (bytes: Buffer) => {
        lastRaw = Buffer.from(bytes)
        return check.requestDeserialize(bytes)
      },
      responseSerialize: (value: unknown) => Buffer.isBuffer(value) ? value : check.responseSerialize(value)
    }
  }
  server.addService(definition, {
    Check: (call: grpc.ServerUnaryCall<CheckRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      state.calls.push({ request: call.request, raw: lastRaw, peer: call.getPeer(), metadata: call.metadata.getMap() })
      Promise.resolve(state.handler(call.request)).then(reply => {
        if (reply !== 'hang') callback(null, reply)
      }, err => callback(err as Error))
    }
  })
  state.port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => err !== null ? reject(err) : resolve(p))
  })
  state.host = `127.0.0.1:${state.port}`
  return state
}

/** Protobuf wire fields: field number → every value (numbers for varints, Buffers for bytes). */
export type WireFields = Map<number, Array<number | Buffer>>

export function wireFields (bytes: Buffer): WireFields {
  const reader = protobuf.Reader.create(bytes)
  const out: WireFields = new Map()
  while (reader.pos < reader.len) {
    const tag = reader.uint32()
    const field = tag >>> 3
    const wireType = tag & 7
    let value: number | Buffer
    switch (wireType) {
      case 0: value = Number(String(reader.int64())); break
      case 1: value = Number(String(reader.sfixed64())); break
      case 2: value = Buffer.from(reader.bytes()); break
      case 5: value = reader.fixed32(); break
      default: throw new Error(`unexpected wire type ${wireType} for field ${field}`)
    }
    out.set(field, [...(out.get(field) ?? []), value])
  }
  return out
}

/** The message at a path of field numbers (first occurrence of each). */
export function wirePath (bytes: Buffer, ...fields: number[]): Buffer {
  let current = bytes
  for (const f of fields) {
    const v = wireFields(current).get(f)?.[0]
    if (!Buffer.isBuffer(v)) throw new Error(`no message at field ${f} (path ${fields.join('.')})`)
    current = v
  }
  return current
}

export function wireString (bytes: Buffer, field: number): string | undefined {
  const v = wireFields(bytes).get(field)?.[0]
  return Buffer.isBuffer(v) ? v.toString('utf8') : undefined
}

export function wireNumber (bytes: Buffer, field: number): number | undefined {
  const v = wireFields(bytes).get(field)?.[0]
  return typeof v === 'number' ? v : undefined
}

/** A proto3 map<string,string> field: its entries (key = 1, value = 2). */
export function wireMap (bytes: Buffer, field: number): Record<string, string> {
  const out: Record<string, string> = {}
  for (const entry of wireFields(bytes).get(field) ?? []) {
    if (!Buffer.isBuffer(entry)) continue
    out[wireString(entry, 1) ?? ''] = wireString(entry, 2) ?? ''
  }
  return out
}

/** Encodes a message by hand: [field, value] pairs; strings/Buffers length-delimited, numbers varints. */
export function encodeWire (fields: Array<[number, string | number | Buffer | boolean]>): Buffer {
  const writer = protobuf.Writer.create()
  for (const [field, value] of fields) {
    if (typeof value === 'number' || typeof value === 'boolean') writer.uint32((field << 3) | 0).int64(Number(value))
    else writer.uint32((field << 3) | 2).bytes(typeof value === 'string' ? Buffer.from(value) : value)
  }
  return Buffer.from(writer.finish())
}
