/**
 * Gateway API v1.7.0's experimental-channel CRDs for cluster tests whose fields only that
 * channel has (spec.addresses[].routability, spec.listeners[].filters): from
 * GATEWAY_API_V170_CRDS_EXPERIMENTAL, else the gateway-api v1.7.0 module in the Go module
 * cache. Copied to a temporary directory without the kustomization and the
 * ValidatingAdmissionPolicy the module's directory also holds.
 */

import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const V170_CRDS_MISSING = 'no gateway-api v1.7.0 experimental CRDs (go mod download sigs.k8s.io/gateway-api@v1.7.0, or GATEWAY_API_V170_CRDS_EXPERIMENTAL)'

/** v1.7.0's experimental CRD manifests (config/crd/experimental), or null. */
function v170Source (): string | null {
  if (process.env.GATEWAY_API_V170_CRDS_EXPERIMENTAL !== undefined) return process.env.GATEWAY_API_V170_CRDS_EXPERIMENTAL
  try {
    const cache = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const dir = join(cache, 'sigs.k8s.io/gateway-api@v1.7.0/config/crd/experimental')
    return existsSync(dir) ? dir : null
  } catch {
    return null
  }
}

/** A directory of the CRDs alone (for startCluster's gatewayApiCrds) and its removal; null when none are found. */
export function v170ExperimentalCrds (): { dir: string, remove: () => void } | null {
  const source = v170Source()
  if (source === null) return null
  const dir = mkdtempSync(join(tmpdir(), 'portico-crds-v170-'))
  for (const f of readdirSync(source)) if (/^gateway\.networking\.(x-)?k8s\.io_.*\.yaml$/.test(f) && !f.includes('vap')) copyFileSync(join(source, f), join(dir, f))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
