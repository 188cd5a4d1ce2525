/**
 * The xDS server's TLS material in cluster mode, kept in a Secret of the controller's
 * namespace (default `portico-xds-ca`) so every replica serves with the same CA:
 *  - `tls.crt`/`tls.key` present: used as the serving certificate as they are (`ca.crt`, if
 *    present, is what proxies trust);
 *  - else `ca.crt`/`ca.key`: each replica mints its own short-lived serving certificate;
 *  - else the controller creates a CA and stores it (the first replica wins a create race).
 */

import { KubeError, type KubeHttp } from '../kube/http.ts'
import { createCa, createServingCert, type Pem } from './certs.ts'

interface SecretData {
  metadata?: { resourceVersion?: string }
  data?: Record<string, string>
}

const b64 = (s: string) => Buffer.from(s).toString('base64')
const unb64 = (s: string | undefined) => s === undefined ? undefined : Buffer.from(s, 'base64').toString('utf8')

export interface XdsTls {
  /** What proxies trust. */
  caPem: string
  /** Current serving certificate; `renew()` mints a new one when the CA is ours. */
  serving: Pem
  renew: (() => Promise<Pem>) | null
}

export async function loadXdsTls (api: KubeHttp, namespace: string, secretName: string, dnsNames: string[]): Promise<XdsTls> {
  const path = `/api/v1/namespaces/${namespace}/secrets/${secretName}`
  let secret: SecretData | null = null
  try {
    secret = await api.get<SecretData>(path)
  } catch (err) {
    if ((err as KubeError).code !== 404) throw err
  }
  const data = secret?.data ?? {}
  const cert = unb64(data['tls.crt'])
  const key = unb64(data['tls.key'])
  if (cert !== undefined && key !== undefined) {
    return { caPem: unb64(data['ca.crt']) ?? cert, serving: { cert, key }, renew: null }
  }
  let ca: Pem | undefined = data['ca.crt'] !== undefined && data['ca.key'] !== undefined ? { cert: unb64(data['ca.crt'])!, key: unb64(data['ca.key'])! } : undefined
  if (ca === undefined) {
    const fresh = await createCa()
    try {
      await api.request({
        method: 'POST',
        path: `/api/v1/namespaces/${namespace}/secrets`,
        body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName, namespace }, type: 'Opaque', data: { 'ca.crt': b64(fresh.cert), 'ca.key': b64(fresh.key) } }
      })
      ca = fresh
    } catch (err) {
      if ((err as KubeError).code !== 409) throw err
      const other = await api.get<SecretData>(path)
      ca = { cert: unb64(other.data?.['ca.crt'])!, key: unb64(other.data?.['ca.key'])! }
    }
  }
  const issuer = ca
  const renew = () => createServingCert(issuer, dnsNames)
  return { caPem: issuer.cert, serving: await renew(), renew }
}
