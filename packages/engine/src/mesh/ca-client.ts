/**
 * The client of the mesh CA: Istio's certificate-signing service
 * (`istio.v1.auth.IstioCertificateService/CreateCertificate`, protos/istio/security/v1alpha1),
 * called as Istio's own agent calls it (security/pkg/nodeagent/caclient/providers/citadel):
 * TLS to istiod's port 15012 trusting only the mesh root (the `istio-ca-root-cert`
 * ConfigMap's `root-cert.pem`) and checking istiod's DNS name, `authorization: Bearer <token>`
 * with a service-account token of audience `istio-ca`, and the `ClusterID` metadata, which
 * istiod uses to pick the cluster whose API server reviews the token.
 *
 * istiod answers with the chain leaf first and the root last; it takes the identity from the
 * token, not from the CSR. Every answer is checked before it is returned: at least a leaf and
 * a root, each one PEM certificate, bounded in size.
 */

import { X509Certificate } from 'node:crypto'
import type * as grpc from '@grpc/grpc-js'
import { envoyProtos, grpcJs } from '../util/envoy-grpc.ts'

const PROTO_FILE = 'istio/security/v1alpha1/ca.proto'
const SERVICE = 'istio.v1.auth.IstioCertificateService'
/** A chain is a few KiB; istiod's own answers are far below this. */
const MAX_ANSWER_BYTES = 256 * 1024
const MAX_CHAIN_LENGTH = 8

export interface MeshCaClientOptions {
  /** `host:port` of the CA (istiod: `istiod.istio-system.svc:15012`). */
  target: string
  /** The mesh root(s), PEM: the only trust for the CA's serving certificate. */
  rootCertPem: string
  /**
   * The name istiod's serving certificate is checked against, when `target`'s host is not it
   * (an address, say): istiod's certificate names `istiod.<namespace>.svc` and its aliases.
   */
  serverName?: string
}

export interface CertificateRequest {
  csrPem: string
  /** A service-account token with audience `istio-ca`. */
  token: string
  /** The mesh's cluster ID (`mesh.clusterId`; istiod's default is `Kubernetes`). */
  clusterId: string
  /** Requested lifetime; istiod caps it (its default and maximum are 24 h and 90 days). */
  validitySeconds: number
  timeoutMs: number
}

/** A refusal or failure of the CA, with the gRPC status code (16: the token was refused). */
export class MeshCaError extends Error {
  readonly code: number | null
  constructor (message: string, code: number | null = null) {
    super(message)
    this.code = code
  }
}

interface CertificateServiceClient extends grpc.Client {
  CreateCertificate: (request: object, metadata: grpc.Metadata, options: grpc.CallOptions,
    callback: (err: grpc.ServiceError | null, answer?: { cert_chain?: string[] }) => void) => grpc.ClientUnaryCall
}

export interface MeshCaClient {
  /** The PEM chain, leaf first, root last (each element one certificate). */
  createCertificate: (request: CertificateRequest) => Promise<string[]>
  close: () => void
}

export function meshCaClient (options: MeshCaClientOptions): MeshCaClient {
  const g = grpcJs()
  let node: unknown = g.loadPackageDefinition(envoyProtos(PROTO_FILE))
  for (const part of SERVICE.split('.')) node = (node as Record<string, unknown>)[part]
  const Ctor = node as grpc.ServiceClientConstructor
  const channelOptions: grpc.ChannelOptions = {
    'grpc.primary_user_agent': 'portico-mesh',
    'grpc.max_receive_message_length': MAX_ANSWER_BYTES,
    // Reconnect soon after the CA comes back (the default backoff grows to 2 minutes).
    'grpc.max_reconnect_backoff_ms': 5000
  }
  if (options.serverName !== undefined) {
    channelOptions['grpc.ssl_target_name_override'] = options.serverName
    channelOptions['grpc.default_authority'] = options.serverName
  }
  const client = new Ctor(options.target, g.credentials.createSsl(Buffer.from(options.rootCertPem)), channelOptions) as unknown as CertificateServiceClient

  async function createCertificate (request: CertificateRequest): Promise<string[]> {
    const metadata = new g.Metadata()
    metadata.set('authorization', `Bearer ${request.token}`)
    metadata.set('clusterid', request.clusterId)
    const body = {
      csr: request.csrPem,
      validity_duration: request.validitySeconds,
      // What Istio's agent sends: an empty CertSigner (the CA's own chain).
      metadata: { fields: { CertSigner: { stringValue: '' } } }
    }
    const answer = await new Promise<{ cert_chain?: string[] }>((resolve, reject) => {
      client.CreateCertificate(body, metadata, { deadline: Date.now() + request.timeoutMs }, (err, res) => {
        // The status details are istiod's text ("request authenticate failure"): no token in it.
        if (err !== null) reject(new MeshCaError(`mesh CA ${options.target}: ${err.details !== '' ? err.details : err.message}`, err.code))
        else resolve(res ?? {})
      })
    })
    return checkChain(answer.cert_chain ?? [], options.target)
  }

  return { createCertificate, close: () => client.close() }
}

const PEM_CERT = /^\s*-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\s*$/

/** Leaf first, root last, each element exactly one parsable certificate. */
function checkChain (chain: string[], target: string): string[] {
  if (chain.length < 2) throw new MeshCaError(`mesh CA ${target}: answered a chain of ${chain.length} certificate(s), expected a leaf and a root`)
  if (chain.length > MAX_CHAIN_LENGTH) throw new MeshCaError(`mesh CA ${target}: answered ${chain.length} certificates (at most ${MAX_CHAIN_LENGTH})`)
  return chain.map((pem, i) => {
    if (!PEM_CERT.test(pem)) throw new MeshCaError(`mesh CA ${target}: chain element ${i} is not one PEM certificate`)
    try {
      void new X509Certificate(pem)
    } catch (err) {
      throw new MeshCaError(`mesh CA ${target}: chain element ${i} does not parse: ${(err as Error).message}`)
    }
    return pem.trim() + '\n'
  })
}
