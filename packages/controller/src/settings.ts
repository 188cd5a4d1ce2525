/**
 * The controller's settings, from the environment the Helm chart sets. Experimental
 * features the chart can switch on but the controller does not have yet are reported at
 * start (never ignored silently).
 */

import type { LabelSelector } from './translate/gateway-api.ts'
import type { XdsMode } from './xds/listener.ts'
import type { MeshSettings } from './translate/mesh.ts'

export interface ControllerSettings {
  namespace: string
  podName: string
  controllerName: string
  gatewayClassName: string
  /** GatewayClass name → parameters reference (chart gatewayClassParametersRefs). */
  classParameters: Record<string, { name: string, namespace: string }>
  discoveryNamespaceSelectors: LabelSelector[]
  xdsMode: XdsMode
  xdsPort: number
  healthPort: number
  metricsPort: number
  adminAddr: { host: string, port: number } | null
  /** Address proxies dial (http:// or https:// by mode). */
  xdsAddress: string
  serviceName: string
  /** Secret holding the xDS CA (or a serving certificate) in the controller's namespace. */
  xdsTlsSecret: string
  xdsAuth: boolean
  tokenAudience: string
  proxyImage: string
  proxyImagePullPolicy: string
  logLevel: string
  leaderElection: boolean
  /**
   * The model API (chart gatewayModels.enabled): PorticoModels are watched, translated and
   * given a status only then (the chart installs their CRD and RBAC only then too).
   */
  gatewayModels: boolean
  /**
   * The Gateway API Inference Extension (chart inferenceExtension.enabled): InferencePools and
   * Pods are watched, pools are HTTPRoute backends and get a status only then (the chart adds
   * the RBAC only then; the CRD is installed separately).
   */
  inferenceExtension: boolean
  /** The chart's `mesh.*`: Istio ambient mesh defaults (translate/mesh.ts, docs/mesh.md). */
  mesh: MeshSettings
  /** Features switched on that are not available yet, with why. */
  unavailable: string[]
}

export function resolveControllerSettings (env: NodeJS.ProcessEnv, version: string): ControllerSettings {
  const str = (name: string, fallback: string) => env[name] !== undefined && env[name] !== '' ? env[name]! : fallback
  const bool = (name: string, fallback: boolean) => env[name] === undefined || env[name] === '' ? fallback : ['1', 'true', 'yes'].includes(env[name]!.toLowerCase())
  const json = <T>(name: string, fallback: T): T => {
    const raw = env[name]
    if (raw === undefined || raw === '') return fallback
    try {
      return JSON.parse(raw) as T
    } catch (err) {
      throw new Error(`${name}: invalid JSON: ${(err as Error).message}`)
    }
  }
  const mode = str('XDS_MODE', 'tls')
  if (mode !== 'plaintext' && mode !== 'tls' && mode !== 'either') throw new Error(`XDS_MODE: "${mode}" is not one of plaintext, tls, either`)
  const namespace = str('POD_NAMESPACE', 'portico-system')
  const serviceName = str('SERVICE_NAME', 'portico-controller')
  const xdsPort = Number(str('XDS_PORT', '9978'))
  const admin = str('ADMIN_ADDR', '127.0.0.1:9095')
  const adminMatch = /^(.*):(\d+)$/.exec(admin)
  const classParameters = json<Record<string, { name?: string, namespace?: string }>>('GATEWAY_CLASS_PARAMETERS_REFS', {})
  for (const [cls, ref] of Object.entries(classParameters)) {
    if (ref.name === undefined || ref.namespace === undefined) throw new Error(`GATEWAY_CLASS_PARAMETERS_REFS: class ${cls} needs both name and namespace`)
  }
  const unavailable: string[] = []
  return {
    namespace,
    podName: str('POD_NAME', `portico-controller-${process.pid}`),
    controllerName: str('CONTROLLER_NAME', 'portico.dev/gateway-controller'),
    gatewayClassName: str('GATEWAY_CLASS_NAME', 'portico'),
    classParameters: classParameters as Record<string, { name: string, namespace: string }>,
    discoveryNamespaceSelectors: json<LabelSelector[]>('DISCOVERY_NAMESPACE_SELECTORS', []),
    xdsMode: mode,
    xdsPort,
    healthPort: Number(str('HEALTH_PORT', '9093')),
    metricsPort: Number(str('METRICS_PORT', '9092')),
    adminAddr: admin === 'off' || adminMatch === null ? null : { host: adminMatch[1] === '' ? '127.0.0.1' : adminMatch[1]!, port: Number(adminMatch[2]) },
    xdsAddress: str('XDS_ADDRESS', `${mode === 'plaintext' ? 'http' : 'https'}://${serviceName}.${namespace}.svc:${xdsPort}`),
    serviceName,
    xdsTlsSecret: str('XDS_TLS_SECRET', 'portico-xds-ca'),
    xdsAuth: bool('XDS_AUTH', true),
    tokenAudience: str('XDS_TOKEN_AUDIENCE', 'portico'),
    proxyImage: str('PROXY_IMAGE', `ghcr.io/portico-dev/portico:${version}`),
    proxyImagePullPolicy: str('PROXY_IMAGE_PULL_POLICY', ''),
    logLevel: str('LOG_LEVEL', 'info'),
    leaderElection: bool('LEADER_ELECTION', true),
    gatewayModels: bool('GATEWAY_MODELS_ENABLED', false),
    inferenceExtension: bool('INFERENCE_EXTENSION_ENABLED', false),
    mesh: {
      autoEnabled: bool('MESH_AUTO_ENABLED', false),
      caAddress: str('MESH_CA_ADDRESS', ''),
      clusterId: str('MESH_CLUSTER_ID', ''),
      namespace: str('MESH_NAMESPACE', ''),
      network: str('MESH_NETWORK', ''),
      revision: str('MESH_REVISION', '')
    },
    unavailable
  }
}
