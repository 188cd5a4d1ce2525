/**
 * A small Kubernetes API client over node:https with the kubeconfig's credentials
 * (@kubernetes/client-node applies them). Status subresources, server-side apply, token
 * reviews and leases need exact control of methods and content types; one helper serves all
 * of them. Errors carry the HTTP status as `code` so callers can retry conflicts.
 */

import https from 'node:https'
import http from '@portico/engine/node-http'
import type { KubeConfig } from '@kubernetes/client-node'

// Not a PorticoError: like undici's ResponseError it carries another server's answer (the
// Kubernetes API's HTTP status as `code`, and its Status body), which callers branch on (409
// conflicts are retried, 404 is "absent").
export class KubeError extends Error {
  readonly code: number
  readonly body: unknown
  constructor (code: number, message: string, body: unknown) {
    super(message)
    this.name = 'KubeError'
    this.code = code
    this.body = body
  }
}

export interface KubeRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  path: string
  body?: unknown
  contentType?: string
  query?: Record<string, string>
}

export class KubeHttp {
  private readonly kc: KubeConfig
  private readonly server: URL

  constructor (kc: KubeConfig) {
    this.kc = kc
    const cluster = kc.getCurrentCluster()
    if (cluster === null) throw new Error('kubeconfig has no current cluster')
    this.server = new URL(cluster.server)
  }

  async request<T = unknown> (req: KubeRequest): Promise<T> {
    const url = new URL(req.path, this.server)
    for (const [k, v] of Object.entries(req.query ?? {})) url.searchParams.set(k, v)
    const body = req.body === undefined ? undefined : Buffer.from(typeof req.body === 'string' ? req.body : JSON.stringify(req.body))
    const options: https.RequestOptions = {
      method: req.method,
      hostname: url.hostname,
      port: url.port,
      path: `${url.pathname}${url.search}`,
      headers: {
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': req.contentType ?? 'application/json', 'content-length': String(body.length) } : {})
      }
    }
    await this.kc.applyToHTTPSOptions(options)
    const transport = url.protocol === 'https:' ? https : http
    return await new Promise<T>((resolve, reject) => {
      const r = transport.request(options, res => {
        const chunks: Buffer[] = []
        res.on('data', c => chunks.push(c as Buffer))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          let json: unknown = text
          try {
            json = text === '' ? null : JSON.parse(text)
          } catch {}
          const status = res.statusCode ?? 0
          if (status >= 200 && status < 300) resolve(json as T)
          else reject(new KubeError(status, `${req.method} ${req.path}: ${status} ${(json as { message?: string })?.message ?? text.slice(0, 200)}`, json))
        })
        res.on('error', reject)
      })
      r.on('error', reject)
      r.setTimeout(30_000, () => r.destroy(new Error(`${req.method} ${req.path}: timed out`)))
      if (body !== undefined) r.write(body)
      r.end()
    })
  }

  get<T = unknown> (path: string, query?: Record<string, string>): Promise<T> {
    return this.request<T>({ method: 'GET', path, ...(query !== undefined ? { query } : {}) })
  }

  /** Server-side apply of a whole object (it must carry apiVersion, kind, metadata). */
  apply<T = unknown> (path: string, object: unknown, fieldManager: string): Promise<T> {
    return this.request<T>({ method: 'PATCH', path, body: object, contentType: 'application/apply-patch+yaml', query: { fieldManager, force: 'true' } })
  }

  mergePatch<T = unknown> (path: string, patch: unknown): Promise<T> {
    return this.request<T>({ method: 'PATCH', path, body: patch, contentType: 'application/merge-patch+json' })
  }
}

/** API paths of the objects the controller reads and writes. */
export const paths = {
  gatewayClasses: '/apis/gateway.networking.k8s.io/v1/gatewayclasses',
  gateways: '/apis/gateway.networking.k8s.io/v1/gateways',
  httpRoutes: '/apis/gateway.networking.k8s.io/v1/httproutes',
  grpcRoutes: '/apis/gateway.networking.k8s.io/v1/grpcroutes',
  tlsRoutes: '/apis/gateway.networking.k8s.io/v1/tlsroutes',
  tcpRoutes: '/apis/gateway.networking.k8s.io/v1/tcproutes',
  udpRoutes: '/apis/gateway.networking.k8s.io/v1/udproutes',
  listenerSets: '/apis/gateway.networking.k8s.io/v1/listenersets',
  referenceGrants: '/apis/gateway.networking.k8s.io/v1beta1/referencegrants',
  services: '/api/v1/services',
  endpointSlices: '/apis/discovery.k8s.io/v1/endpointslices',
  secrets: '/api/v1/secrets',
  configMaps: '/api/v1/configmaps',
  /** ClusterTrustBundles: certificates.k8s.io/v1beta1 in Kubernetes 1.33–1.36, served only with the ClusterTrustBundle feature gate and runtime-config. */
  clusterTrustBundles: '/apis/certificates.k8s.io/v1beta1/clustertrustbundles',
  backendTLSPolicies: '/apis/gateway.networking.k8s.io/v1/backendtlspolicies',
  namespaces: '/api/v1/namespaces',
  porticoParametersGroupVersion: '/apis/portico.dev/v1alpha1',
  porticoParameters: '/apis/portico.dev/v1alpha1/porticoparameters',
  porticoPolicies: '/apis/portico.dev/v1alpha1/porticopolicies',
  porticoBackends: '/apis/portico.dev/v1alpha1/porticobackends',
  porticoModels: '/apis/portico.dev/v1alpha1/porticomodels',
  inferencePoolsGroupVersion: '/apis/inference.networking.k8s.io/v1',
  inferencePools: '/apis/inference.networking.k8s.io/v1/inferencepools',
  inferencePool: (ns: string, name: string) => `/apis/inference.networking.k8s.io/v1/namespaces/${ns}/inferencepools/${name}`,
  pods: '/api/v1/pods',
  porticoModel: (ns: string, name: string) => `/apis/portico.dev/v1alpha1/namespaces/${ns}/porticomodels/${name}`,
  porticoPolicy: (ns: string, name: string) => `/apis/portico.dev/v1alpha1/namespaces/${ns}/porticopolicies/${name}`,
  httpRouteCrd: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/httproutes.gateway.networking.k8s.io',
  gatewayCrd: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gateways.gateway.networking.k8s.io',
  customResourceDefinitions: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
  gatewayClass: (name: string) => `/apis/gateway.networking.k8s.io/v1/gatewayclasses/${name}`,
  gateway: (ns: string, name: string) => `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/gateways/${name}`,
  listenerSet: (ns: string, name: string) => `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/listenersets/${name}`,
  httpRoute: (ns: string, name: string) => `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproutes/${name}`,
  route: (kind: 'GRPCRoute' | 'TLSRoute' | 'TCPRoute' | 'UDPRoute', ns: string, name: string) => `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/${kind.toLowerCase()}s/${name}`,
  backendTLSPolicy: (ns: string, name: string) => `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/backendtlspolicies/${name}`,
  namespaced: (apiPrefix: string, ns: string, plural: string, name: string) => `${apiPrefix}/namespaces/${ns}/${plural}/${name}`
}
