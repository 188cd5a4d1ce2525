/**
 * The proxy of a Gateway, as Kubernetes objects (pure; the deployer applies them with
 * server-side apply): a ServiceAccount named after the Gateway (the xDS server checks the
 * proxy's token against it), a ConfigMap with the xDS CA, a Service exposing the listener
 * ports, and a Deployment running `portico` in cluster mode. Everything is owned by the
 * Gateway, so deleting the Gateway deletes its proxy. The Gateway's spec.infrastructure labels
 * and annotations go on every object and on the pods (the selector labels cannot be overridden).
 *
 * Pods carry `gateway.networking.k8s.io/gateway-name=<gateway>` (how `porticoctl` finds
 * them); admin stays on localhost:15000 in the pod, metrics on 15020, readiness on 15021.
 */

import { createHash } from 'node:crypto'
import { proxyWorkers } from './workers.ts'
import type { GatewayMesh } from '../translate/mesh.ts'

export interface ProxyDeploymentOptions {
  namespace: string
  gateway: { name: string, uid: string, className: string, labels?: Record<string, string>, annotations?: Record<string, string> }
  ports: Array<{ name: string, port: number, protocol: string }>
  image: string
  imagePullPolicy?: string
  /** What proxies dial: http(s)://<controller service>:9978 */
  xdsAddress: string
  /** PEM of the CA that signs the xDS server certificate (tls / either modes). */
  xdsCa?: string
  replicas?: number
  serviceType?: string
  /**
   * Static IPs the Gateway asks for (spec.addresses). The first becomes the Service's
   * spec.loadBalancerIP, the one request field load balancers (cloud providers, MetalLB,
   * kube-vip, Cilium) commonly honour; a Service cannot ask for more than one, so any further
   * address is never assigned and the Gateway reports it not usable (status/addresses.ts).
   */
  addresses?: string[]
  /**
   * `Cluster`: the Gateway's addresses are cluster IPs (spec.addresses routability Cluster):
   * the Service is a ClusterIP one whatever serviceType says, and the first address its
   * spec.clusterIP.
   */
  addressRoutability?: 'Cluster'
  logLevel?: string
  resources?: Record<string, unknown>
  /** PorticoParameters `workers`; unset: chosen from `resources` (proxyWorkers). */
  workers?: number
  env?: Array<Record<string, unknown>>
  /** Audience of the projected token the xDS server's TokenReview expects. */
  tokenAudience: string
  /** The Gateway is in the Istio mesh (translate/mesh.ts): the proxy gets a mesh identity. */
  mesh?: GatewayMesh
  managedBy: string
}

export const GATEWAY_NAME_LABEL = 'gateway.networking.k8s.io/gateway-name'
export const GATEWAY_CLASS_LABEL = 'gateway.networking.k8s.io/gateway-class-name'
export const TOKEN_DIR = '/var/run/secrets/portico'
export const CA_DIR = '/etc/portico/xds'
/** Where Istio's own proxies find their CA token and the mesh root: the proxy's defaults too. */
export const MESH_TOKEN_DIR = '/var/run/secrets/tokens'
export const MESH_ROOT_DIR = '/var/run/secrets/istio'

/** Kubernetes names are at most 63 characters for labels and Services. */
export function safeName (name: string): string {
  if (name.length <= 63) return name
  return `${name.slice(0, 50)}-${createHash('sha256').update(name).digest('hex').slice(0, 12)}`
}

/** A proxy container's resources when PorticoParameters give none. */
const DEFAULT_RESOURCES = { requests: { cpu: '100m', memory: '128Mi' } }

export function renderProxy (o: ProxyDeploymentOptions): Array<Record<string, unknown>> {
  const name = safeName(o.gateway.name)
  const selector = {
    'app.kubernetes.io/name': name,
    'app.kubernetes.io/instance': name,
    [GATEWAY_NAME_LABEL]: name
  }
  const labels = {
    ...o.gateway.labels,
    ...selector,
    [GATEWAY_CLASS_LABEL]: o.gateway.className,
    'app.kubernetes.io/managed-by': o.managedBy
  }
  const metadata = (kind: string) => ({
    name: kind === 'ConfigMap' ? `${name}-xds-ca` : name,
    namespace: o.namespace,
    labels,
    ...(o.gateway.annotations !== undefined ? { annotations: o.gateway.annotations } : {}),
    ownerReferences: [{ apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', name: o.gateway.name, uid: o.gateway.uid, controller: true }]
  })
  const tls = o.xdsAddress.startsWith('https://')
  const objects: Array<Record<string, unknown>> = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: metadata('ServiceAccount') }
  ]
  if (tls && o.xdsCa !== undefined) {
    objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: metadata('ConfigMap'), data: { 'ca.crt': o.xdsCa } })
  }
  const serviceType = o.addressRoutability === 'Cluster' ? 'ClusterIP' : o.serviceType ?? 'LoadBalancer'
  const servicePorts = (o.ports.length > 0 ? o.ports : [{ name: 'none', port: 65535, protocol: 'TCP' }]).map(p => ({ name: p.name, port: p.port, targetPort: p.port, protocol: p.protocol }))
  objects.push({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata('Service'),
    spec: {
      type: serviceType,
      ...(serviceType === 'LoadBalancer' && o.addresses !== undefined && o.addresses.length > 0 ? { loadBalancerIP: o.addresses[0] } : {}),
      ...(o.addressRoutability === 'Cluster' && o.addresses !== undefined && o.addresses.length > 0 ? { clusterIP: o.addresses[0] } : {}),
      selector,
      ports: servicePorts
    }
  })
  // Extra variables replace built-in ones of the same name: a list with a name twice is
  // refused by server-side apply.
  const extra = o.env ?? []
  const resources = o.resources ?? DEFAULT_RESOURCES
  const workers = proxyWorkers(o.workers, resources)
  const replaced = new Set(extra.map(e => e.name))
  const builtin: Array<Record<string, unknown>> = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'GATEWAY', value: o.gateway.name },
    { name: 'XDS_ADDRESS', value: o.xdsAddress },
    { name: 'XDS_TOKEN_FILE', value: `${TOKEN_DIR}/xds-token` },
    ...(tls ? [{ name: 'XDS_ROOT_CA', value: `${CA_DIR}/ca.crt` }] : []),
    { name: 'LOG_FORMAT', value: 'json' },
    ...(o.logLevel !== undefined ? [{ name: 'LOG_LEVEL', value: o.logLevel }] : []),
    ...(workers !== null ? [{ name: 'WORKERS', value: String(workers) }] : []),
    ...(o.mesh !== undefined ? meshEnv(o.mesh) : [])
  ]
  const env = [...builtin.filter(e => !replaced.has(e.name)), ...extra]
  const volumes: Array<Record<string, unknown>> = [
    { name: 'xds-token', projected: { sources: [{ serviceAccountToken: { audience: o.tokenAudience, expirationSeconds: 43200, path: 'xds-token' } }] } }
  ]
  const mounts: Array<Record<string, unknown>> = [{ name: 'xds-token', mountPath: TOKEN_DIR, readOnly: true }]
  if (tls && o.xdsCa !== undefined) {
    volumes.push({ name: 'xds-ca', configMap: { name: `${name}-xds-ca` } })
    mounts.push({ name: 'xds-ca', mountPath: CA_DIR, readOnly: true })
  }
  if (o.mesh !== undefined) {
    // The token istiod's CA accepts (audience istio-ca, as Istio's proxies use), and the mesh
    // root istiod writes into every namespace. The ConfigMap is optional: without istiod the
    // pod still starts, serves non-mesh traffic and reports the mesh as not ready.
    volumes.push(
      { name: 'istio-token', projected: { sources: [{ serviceAccountToken: { audience: 'istio-ca', expirationSeconds: 43200, path: 'istio-token' } }] } },
      { name: 'istio-ca-root-cert', configMap: { name: 'istio-ca-root-cert', optional: true, items: [{ key: 'root-cert.pem', path: 'root-cert.pem' }] } }
    )
    mounts.push(
      { name: 'istio-token', mountPath: MESH_TOKEN_DIR, readOnly: true },
      { name: 'istio-ca-root-cert', mountPath: MESH_ROOT_DIR, readOnly: true }
    )
  }
  objects.push({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata('Deployment'),
    spec: {
      replicas: o.replicas ?? 1,
      selector: { matchLabels: selector },
      template: {
        // The Gateway's infrastructure annotations reach the pods too (over the scrape defaults).
        metadata: { labels, annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '15020', 'prometheus.io/path': '/metrics', ...o.gateway.annotations } },
        spec: {
          serviceAccountName: name,
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 10101, runAsGroup: 10101, sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '0' }] },
          terminationGracePeriodSeconds: 30,
          containers: [{
            name: 'portico',
            image: o.image,
            ...(o.imagePullPolicy !== undefined && o.imagePullPolicy !== '' ? { imagePullPolicy: o.imagePullPolicy } : {}),
            env,
            ports: [
              ...o.ports.map(p => ({ name: p.name, containerPort: p.port, protocol: p.protocol })),
              { name: 'metrics', containerPort: 15020, protocol: 'TCP' },
              { name: 'readiness', containerPort: 15021, protocol: 'TCP' }
            ],
            readinessProbe: { httpGet: { path: '/healthz/ready', port: 15021 }, periodSeconds: 5 },
            startupProbe: { httpGet: { path: '/healthz/ready', port: 15021 }, periodSeconds: 1, failureThreshold: 60 },
            resources,
            securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
            volumeMounts: mounts
          }],
          volumes
        }
      }
    }
  })
  return objects
}

/** The proxy's mesh settings (its identity source reads them: agentgateway's names). */
function meshEnv (mesh: GatewayMesh): Array<Record<string, unknown>> {
  return [
    { name: 'MESH_ENABLED', value: 'true' },
    { name: 'CA_ADDRESS', value: mesh.caAddress },
    { name: 'TRUST_DOMAIN', value: mesh.trustDomain },
    { name: 'CLUSTER_ID', value: mesh.clusterId },
    ...(mesh.network !== '' ? [{ name: 'NETWORK', value: mesh.network }] : []),
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'SERVICE_ACCOUNT', valueFrom: { fieldRef: { fieldPath: 'spec.serviceAccountName' } } },
    { name: 'MESH_TOKEN_FILE', value: `${MESH_TOKEN_DIR}/istio-token` },
    { name: 'MESH_ROOT_FILE', value: `${MESH_ROOT_DIR}/root-cert.pem` }
  ]
}
