/**
 * The mesh CA identity's defaults (istio-ca-identity.ts), in a module of their own: the
 * proxy's settings read them for any config, and the identity's code (the CA client, the CSR,
 * the certificate handling) loads only when a config has a mesh identity (issue 54).
 */

export const ISTIO_CA_DEFAULTS = {
  address: 'istiod.istio-system.svc:15012',
  trustDomain: 'cluster.local',
  clusterId: 'Kubernetes',
  tokenFile: '/var/run/secrets/tokens/istio-token',
  rootFile: '/var/run/secrets/istio/root-cert.pem',
  validitySeconds: 24 * 3600,
  renewFraction: 0.5,
  timeoutMs: 10_000,
  retryMinMs: 1000,
  retryMaxMs: 60_000,
  rootPollMs: 10_000
} as const
