/**
 * Engine IR ⇄ named, versioned discovery resources. A proxy's IR is split into one
 * resource per bind (listeners and routes inside) and one per backend, so a route change
 * re-sends one bind and a new endpoint re-sends one backend. A resource's version is a
 * hash of its content: equal on every controller replica.
 */

import { createHash } from 'node:crypto'
import { contentVersion, type BackendIR, type BindIR, type ProxyIR } from '@portico/engine/ir'
import { RESOURCE_TYPE_URL } from './protos.ts'
import { Reader, Writer, readStruct, writeStruct, type JsonObject } from './struct.ts'

// portico.config.v1.Resource: oneof kind { Struct bind = 1; Struct backend = 2 }
const FIELD = { bind: 1, backend: 2 } as const

export interface EncodedResource {
  name: string
  version: string
  /** google.protobuf.Any (protobufjs keeps its field name `type_url` as written). */
  resource: { type_url: string, value: Buffer }
}

export function bindName (bind: BindIR): string {
  return `bind/${bind.key}`
}

export function backendName (backend: BackendIR): string {
  return `backend/${backend.key}`
}

export function encodeResources (ir: ProxyIR): Map<string, EncodedResource> {
  const out = new Map<string, EncodedResource>()
  const add = (name: string, kind: 'bind' | 'backend', value: object) => {
    const w = Writer.create()
    w.uint32((FIELD[kind] << 3) | 2).fork()
    writeStruct(w, value as JsonObject)
    w.ldelim()
    const bytes = Buffer.from(w.finish())
    out.set(name, { name, version: createHash('sha256').update(bytes).digest('hex').slice(0, 16), resource: { type_url: RESOURCE_TYPE_URL, value: bytes } })
  }
  for (const b of ir.binds) add(bindName(b), 'bind', b)
  for (const b of ir.backends) add(backendName(b), 'backend', b)
  return out
}

export type DecodedResource = { kind: 'bind', value: BindIR } | { kind: 'backend', value: BackendIR }

export function decodeResource (any: { type_url?: string, value?: Uint8Array }): DecodedResource {
  if (any.type_url !== RESOURCE_TYPE_URL) throw new Error(`unexpected resource type ${any.type_url === undefined || any.type_url === '' ? '(none)' : any.type_url}`)
  const r = Reader.create(any.value ?? new Uint8Array())
  let decoded: DecodedResource | undefined
  // A oneof: the last field present wins, as protobuf specifies.
  while (r.pos < r.len) {
    const tag = r.uint32()
    if (tag === ((FIELD.bind << 3) | 2)) decoded = { kind: 'bind', value: readStruct(r, r.uint32() + r.pos) as unknown as BindIR }
    else if (tag === ((FIELD.backend << 3) | 2)) decoded = { kind: 'backend', value: readStruct(r, r.uint32() + r.pos) as unknown as BackendIR }
    else r.skipType(tag & 7)
  }
  if (decoded === undefined) throw new Error('empty resource')
  return decoded
}

/**
 * Assembles a ProxyIR from the resources a proxy holds. `version` is the controller's
 * version of that config (the response's system_version_info), so the proxy reports the
 * version the Gateway's status names; without it the content is hashed.
 */
export function assembleIR (resources: Iterable<DecodedResource>, version?: string): ProxyIR {
  const binds: BindIR[] = []
  const backends: BackendIR[] = []
  for (const r of resources) {
    if (r.kind === 'bind') binds.push(r.value)
    else backends.push(r.value)
  }
  const ir: ProxyIR = { version: '', binds: binds.sort((a, b) => a.port - b.port || a.key.localeCompare(b.key)), backends: backends.sort((a, b) => a.key.localeCompare(b.key)) }
  ir.version = version !== undefined && version !== '' ? version : contentVersion(ir)
  return ir
}
