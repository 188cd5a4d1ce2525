/**
 * TLS material for the xDS port when none is supplied: a self-made CA and a serving
 * certificate for the controller's Service names, minted with @peculiar/x509 (WebCrypto,
 * no native code). The CA is long-lived and shared through a Secret so every replica signs
 * with it; serving certificates are short-lived and renewed before they expire.
 */

import { webcrypto, X509Certificate as NodeX509 } from 'node:crypto'
// @peculiar/x509 resolves its services through tsyringe, which needs this polyfill first.
import 'reflect-metadata'
import * as x509 from '@peculiar/x509'

x509.cryptoProvider.set(webcrypto as never)

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const

export interface Pem {
  cert: string
  key: string
}

async function exportKey (key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key as never)
  return x509.PemConverter.encode(der, 'PRIVATE KEY')
}

async function importKey (pem: string): Promise<webcrypto.CryptoKey> {
  return await webcrypto.subtle.importKey('pkcs8', x509.PemConverter.decodeFirst(pem), ALG, true, ['sign'])
}

export async function createCa (commonName = 'portico-xds-ca', years = 10): Promise<Pem> {
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as webcrypto.CryptoKeyPair
  const notBefore = new Date(Date.now() - 60_000)
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${commonName}`,
    notBefore,
    notAfter: new Date(notBefore.getTime() + years * 365 * 86_400_000),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true)
    ]
  })
  return { cert: cert.toString('pem'), key: await exportKey(keys.privateKey) }
}

/** A serving certificate signed by `ca` for `dnsNames` (and 127.0.0.1), valid `hours`. */
export async function createServingCert (ca: Pem, dnsNames: string[], hours = 24): Promise<Pem> {
  const caCert = new x509.X509Certificate(ca.cert)
  const caKey = await importKey(ca.key)
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as webcrypto.CryptoKeyPair
  const notBefore = new Date(Date.now() - 60_000)
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${dnsNames[0] ?? 'portico-controller'}`,
    issuer: caCert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + hours * 3_600_000),
    signingKey: caKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...dnsNames.map(value => ({ type: 'dns' as const, value })),
        { type: 'ip' as const, value: '127.0.0.1' }
      ])
    ]
  })
  return { cert: cert.toString('pem'), key: await exportKey(keys.privateKey) }
}

/** Milliseconds until a certificate expires. */
export function expiresInMs (certPem: string): number {
  return new Date(new NodeX509(certPem).validTo).getTime() - Date.now()
}

function randomSerial (): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16))
  bytes[0] = bytes[0]! & 0x7f
  return Buffer.from(bytes).toString('hex')
}
