/**
 * The gateway's own mesh identity: the workload certificate (SPIFFE ID in a URI SAN), its
 * key and the mesh root(s) it trusts. The HBONE tunnels (mesh/hbone-pool.ts) take
 * `current()` for each new connection and listen to 'rotated' so new connections use the new
 * certificate while open ones run on until idle.
 *
 * Two sources: the mesh CA client (CSR to istiod, another module) and FileMeshIdentity
 * below, which reads PEM files (standalone use, tests). Keys stay in process memory; this
 * module never logs or dumps them.
 */

import { EventEmitter } from 'node:events'
import { readFileSync, unwatchFile, watchFile } from 'node:fs'
import { X509Certificate, createPrivateKey } from 'node:crypto'
import { PorticoError } from '../util/errors.ts'

export interface MeshCertificate {
  /** PEM private key of the leaf. */
  key: string
  /** PEM leaf certificate, then any intermediates. */
  certChain: string
  /** PEM mesh root certificate(s) a peer's chain must end in. */
  roots: string
  /** The SPIFFE trust domain of the leaf's ID (`cluster.local`). */
  trustDomain: string
  /** The leaf's SPIFFE ID (`spiffe://cluster.local/ns/gw/sa/portico`). */
  spiffeId: string
  /** Changes with each certificate: part of the tunnel pool's connection key. */
  generation: number
}

export interface MeshIdentity {
  /** The certificate for new connections; null until one was issued (tunnels then fail with a clear error). */
  current (): MeshCertificate | null
  on (event: 'rotated', listener: (cert: MeshCertificate) => void): this
  off (event: 'rotated', listener: (cert: MeshCertificate) => void): this
}

/** A leaf certificate's SPIFFE ID (its first `spiffe://` URI SAN), or null. */
export function spiffeIdOf (certPem: string | Buffer): string | null {
  const alt = new X509Certificate(certPem).subjectAltName ?? ''
  return spiffeIdIn(alt)
}

/** The first `spiffe://` URI in Node's subjectaltname string (`URI:spiffe://td/ns/a/sa/b, DNS:x`). */
export function spiffeIdIn (altNames: string): string | null {
  for (const m of altNames.matchAll(/(?:^|, )URI:("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    let v = m[1]!
    try {
      if (v.startsWith('"')) v = JSON.parse(v) as string
    } catch {
      continue
    }
    if (v.startsWith('spiffe://')) return v
  }
  return null
}

/** `spiffe://td/ns/ns/sa/sa` → its parts, or null when it is not of that shape. */
export function parseSpiffeId (id: string): { trustDomain: string, namespace: string, serviceAccount: string } | null {
  const m = /^spiffe:\/\/([a-z0-9._-]+)\/ns\/([^/]+)\/sa\/([^/]+)$/.exec(id)
  return m === null ? null : { trustDomain: m[1]!, namespace: m[2]!, serviceAccount: m[3]! }
}

let generations = 0

/** Builds a MeshCertificate from PEM texts, checking that the key and leaf belong together and the leaf names a SPIFFE ID. */
export function meshCertificate (pem: { cert: string, key: string, root: string }): MeshCertificate {
  const leaf = new X509Certificate(pem.cert)
  const spiffeId = spiffeIdIn(leaf.subjectAltName ?? '')
  if (spiffeId === null) throw new PorticoError('PORTICO_MESH_BAD_CERTIFICATE', 'the mesh certificate has no spiffe:// URI SAN')
  const parsed = /^spiffe:\/\/([^/]+)/.exec(spiffeId)
  // tls.createSecureContext would refuse a mismatched key only at the first connection.
  let matches = false
  try {
    matches = leaf.checkPrivateKey(createPrivateKey(pem.key))
  } catch {}
  if (!matches) throw new PorticoError('PORTICO_MESH_BAD_CERTIFICATE', 'the mesh key does not match the mesh certificate')
  return { key: pem.key, certChain: pem.cert, roots: pem.root, trustDomain: parsed![1]!, spiffeId, generation: ++generations }
}

/** A fixed identity (tests, or a caller that manages rotation itself through `rotate`). */
export class StaticMeshIdentity extends EventEmitter implements MeshIdentity {
  private cert: MeshCertificate | null

  constructor (cert: MeshCertificate | null) {
    super()
    this.cert = cert
  }

  current (): MeshCertificate | null {
    return this.cert
  }

  /** Puts a new certificate in force for new connections. */
  rotate (cert: MeshCertificate): void {
    this.cert = cert
    this.emit('rotated', cert)
  }
}

export interface MeshCertificateFiles {
  /** PEM file: the gateway's workload certificate (leaf first, then intermediates). */
  cert: string
  /** PEM file: its private key. */
  key: string
  /** PEM file: the mesh root certificate(s). */
  root: string
}

/**
 * The identity in three PEM files (config `mesh.certificate`). `reload()` reads them again;
 * `watch()` does it whenever one of them changes (cert-manager, a CSI driver or a sidecar
 * writing new files: each thread of the proxy watches for itself). A failed read keeps the
 * certificate in force.
 */
export class FileMeshIdentity extends StaticMeshIdentity {
  files: MeshCertificateFiles

  constructor (files: MeshCertificateFiles) {
    super(FileMeshIdentity.read(files))
    this.files = files
  }

  static read (files: MeshCertificateFiles): MeshCertificate {
    return meshCertificate({ cert: readFileSync(files.cert, 'utf8'), key: readFileSync(files.key, 'utf8'), root: readFileSync(files.root, 'utf8') })
  }

  private watching: (() => void) | null = null

  /**
   * Reloads when a file changes (polled every `intervalMs`, so a symlink swap as Kubernetes
   * does it for Secret volumes is seen); `onResult` hears each attempt. Unref'd.
   */
  watch (intervalMs: number, onResult: (err: Error | null, rotated: boolean) => void): void {
    if (this.watching !== null) return
    let timer: NodeJS.Timeout | null = null
    const changed = (): void => {
      // The three files are written one after the other: read once they settle.
      if (timer !== null) clearTimeout(timer)
      timer = setTimeout(() => {
        timer = null
        try {
          onResult(null, this.reload())
        } catch (err) {
          onResult(err as Error, false)
        }
      }, Math.min(intervalMs, 200)).unref()
    }
    const files = [this.files.cert, this.files.key, this.files.root]
    for (const f of files) watchFile(f, { interval: intervalMs, persistent: false }, changed)
    this.watching = () => {
      for (const f of files) unwatchFile(f, changed)
      if (timer !== null) clearTimeout(timer)
    }
  }

  unwatch (): void {
    this.watching?.()
    this.watching = null
  }

  /** Reads the files again; puts the certificate in force when it changed. Returns whether it did. */
  reload (): boolean {
    const next = FileMeshIdentity.read(this.files)
    const cur = this.current()
    if (cur !== null && cur.certChain === next.certChain && cur.key === next.key && cur.roots === next.roots) return false
    this.rotate(next)
    return true
  }
}
