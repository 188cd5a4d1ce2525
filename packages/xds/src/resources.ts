/**
 * Engine IR ⇄ named, versioned discovery resources. A proxy's IR is split into one
 * resource per bind (listeners and routes inside) and one per backend, so a route change
 * re-sends one bind and a new endpoint re-sends one backend. A resource's version is a
 * hash of its content: equal on every controller replica.
 */

import { createHash } from 'node:crypto'
import type { BackendIR, BindIR, ProxyIR } from '@portico/engine'
import { contentVersion } from '@portico/engine'
import { protocol, RESOURCE_TYPE_URL } from './protos.ts'
import { fromStruct, toStruct, type ProtoStruct } from './struct.ts'

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
  const { resource } = protocol()
  const out = new Map<string, EncodedResource>()
  const add = (name: string, kind: 'bind' | 'backend', value: object) => {
    const bytes = Buffer.from(resource.encode(resource.fromObject({ [kind]: toStruct(value as Record<string, unknown>) })).finish())
    out.set(name, { name, version: createHash('sha256').update(bytes).digest('hex').slice(0, 16), resource: { type_url: RESOURCE_TYPE_URL, value: bytes } })
  }
  for (const b of ir.binds) add(bindName(b), 'bind', b)
  for (const b of ir.backends) add(backendName(b), 'backend', b)
  return out
}

export type DecodedResource = { kind: 'bind', value: BindIR } | { kind: 'backend', value: BackendIR }

export function decodeResource (any: { type_url?: string, value?: Uint8Array }): DecodedResource {
  if (any.type_url !== RESOURCE_TYPE_URL) throw new Error(`unexpected resource type ${any.type_url === undefined || any.type_url === '' ? '(none)' : any.type_url}`)
  const { resource } = protocol()
  const message = resource.toObject(resource.decode(any.value ?? new Uint8Array()), { defaults: false, oneofs: true }) as { kind?: string, bind?: ProtoStruct, backend?: ProtoStruct }
  if (message.bind != null) return { kind: 'bind', value: fromStruct(message.bind) as unknown as BindIR }
  if (message.backend != null) return { kind: 'backend', value: fromStruct(message.backend) as unknown as BackendIR }
  throw new Error('empty resource')
}

/** Assembles a ProxyIR from the resources a proxy holds. */
export function assembleIR (resources: Iterable<DecodedResource>): ProxyIR {
  const binds: BindIR[] = []
  const backends: BackendIR[] = []
  for (const r of resources) {
    if (r.kind === 'bind') binds.push(r.value)
    else backends.push(r.value)
  }
  const ir: ProxyIR = { version: '', binds: binds.sort((a, b) => a.port - b.port || a.key.localeCompare(b.key)), backends: backends.sort((a, b) => a.key.localeCompare(b.key)) }
  ir.version = contentVersion(ir)
  return ir
}
