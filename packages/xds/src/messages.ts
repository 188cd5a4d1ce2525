/** The delta discovery messages as @grpc/proto-loader presents them (camelCase fields). */

export interface XdsNode {
  id?: string
  cluster?: string
  metadata?: { fields?: Record<string, { stringValue?: string }> }
  userAgentName?: string
  userAgentVersion?: string
}

export interface DeltaDiscoveryRequest {
  node?: XdsNode | null
  typeUrl?: string
  resourceNamesSubscribe?: string[]
  resourceNamesUnsubscribe?: string[]
  initialResourceVersions?: Record<string, string>
  responseNonce?: string
  errorDetail?: { code?: number, message?: string } | null
}

export interface DeltaDiscoveryResponse {
  systemVersionInfo?: string
  resources?: Array<{ name: string, version: string, resource: { type_url: string, value: Buffer } }>
  typeUrl?: string
  removedResources?: string[]
  nonce?: string
}
