/**
 * A PKCS#10 certificate signing request (RFC 2986) for a mesh workload identity: an empty
 * subject and one URI subject alternative name (`spiffe://<trust domain>/ns/<ns>/sa/<sa>`),
 * what Istio's CA expects of its agents. Node's crypto signs and exports keys but cannot make
 * a CSR, so the few DER structures it needs are encoded here (no parser: nothing here reads
 * DER from outside).
 *
 * The key stays in the caller's KeyObject; only its public half goes into the request.
 * EC P-256 (ecdsa-with-SHA256) and RSA (sha256WithRSAEncryption) keys are accepted.
 */

import { createPublicKey, sign, type KeyObject } from 'node:crypto'

// ---------------------------------------------------------------------------------------------
// DER (X.690): definite lengths only, which is all DER allows.

function length (n: number): Buffer {
  if (n < 0x80) return Buffer.from([n])
  const bytes: number[] = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

function tlv (tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), length(content.length), content])
}

const sequence = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items))
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items))
const octetString = (content: Buffer): Buffer => tlv(0x04, content)
const bitString = (content: Buffer): Buffer => tlv(0x03, Buffer.concat([Buffer.from([0]), content]))
const NULL = Buffer.from([0x05, 0x00])
const TRUE = Buffer.from([0x01, 0x01, 0xff])
const INTEGER_ZERO = Buffer.from([0x02, 0x01, 0x00])

function oid (dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number)
  const bytes: number[] = [arcs[0]! * 40 + arcs[1]!]
  for (const arc of arcs.slice(2)) {
    const base128: number[] = [arc & 0x7f]
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift(0x80 | (v & 0x7f))
    bytes.push(...base128)
  }
  return tlv(0x06, Buffer.from(bytes))
}

const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14'
const OID_SUBJECT_ALT_NAME = '2.5.29.17'
const OID_ECDSA_SHA256 = '1.2.840.10045.4.3.2'
const OID_RSA_SHA256 = '1.2.840.113549.1.1.11'

// ---------------------------------------------------------------------------------------------

export class CsrError extends Error {}

export interface CsrOptions {
  /** The key pair's private half: it signs the request and never leaves the caller. */
  privateKey: KeyObject
  /** URI SANs, e.g. `spiffe://cluster.local/ns/default/sa/portico`. */
  uris: string[]
}

/** The CSR in DER. */
export function createCsrDer (options: CsrOptions): Buffer {
  const { privateKey, uris } = options
  if (uris.length === 0) throw new CsrError('a CSR needs at least one URI SAN')
  for (const uri of uris) {
    // IA5String: 7-bit ASCII. A SPIFFE ID is ASCII by its spec; anything else is refused here
    // rather than encoded wrongly.
    if (!/^[\x21-\x7e]+$/.test(uri)) throw new CsrError(`URI SAN ${JSON.stringify(uri)} is not printable ASCII`)
  }
  let algorithm: Buffer
  if (privateKey.asymmetricKeyType === 'ec') {
    if (privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new CsrError('EC keys must be P-256')
    algorithm = sequence(oid(OID_ECDSA_SHA256))
  } else if (privateKey.asymmetricKeyType === 'rsa') {
    algorithm = sequence(oid(OID_RSA_SHA256), NULL)
  } else {
    throw new CsrError(`unsupported key type ${String(privateKey.asymmetricKeyType)} (EC P-256 or RSA)`)
  }
  if (privateKey.type !== 'private') throw new CsrError('the CSR is signed with the private key: pass it')
  // SubjectPublicKeyInfo, as Node exports it.
  const publicKeyInfo = createPublicKey(privateKey).export({ type: 'spki', format: 'der' })
  // GeneralName uniformResourceIdentifier is [6] IMPLICIT IA5String (context-specific, primitive).
  const generalNames = sequence(...uris.map((uri) => tlv(0x86, Buffer.from(uri, 'ascii'))))
  // Critical: the subject is empty, so the SAN is the only name (RFC 5280 4.2.1.6).
  const san = sequence(oid(OID_SUBJECT_ALT_NAME), TRUE, octetString(generalNames))
  const extensionRequest = sequence(oid(OID_EXTENSION_REQUEST), set(sequence(san)))
  const info = sequence(
    INTEGER_ZERO, // version v1
    sequence(), // subject: empty Name
    publicKeyInfo,
    tlv(0xa0, extensionRequest) // attributes [0] IMPLICIT SET OF Attribute
  )
  // ECDSA signatures in DER (Ecdsa-Sig-Value), as X.509 carries them.
  const signature = sign('sha256', info, { key: privateKey, dsaEncoding: 'der' })
  return sequence(info, algorithm, bitString(signature))
}

/** The CSR in PEM (`CERTIFICATE REQUEST`), as Istio's CA reads it. */
export function createCsrPem (options: CsrOptions): string {
  const b64 = createCsrDer(options).toString('base64').replace(/.{1,64}/g, '$&\n')
  return `-----BEGIN CERTIFICATE REQUEST-----\n${b64}-----END CERTIFICATE REQUEST-----\n`
}
