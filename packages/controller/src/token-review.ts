/**
 * Who is on an xDS stream: the proxy sends its projected service-account token (audience
 * `portico`), a TokenReview says whose it is, and it must be the ServiceAccount the deployer
 * made for the Gateway the proxy claims — a proxy cannot ask for another Gateway's config.
 * Positive answers are remembered for a minute (reconnect storms).
 */

import { createHash } from 'node:crypto'
import type { Metadata } from '@grpc/grpc-js'
import type { KubeHttp } from './kube/http.ts'
import { safeName } from './deployer/render.ts'

export function tokenReviewAuthenticator (api: KubeHttp, audience: string): (claimed: { namespace: string, gateway: string }, metadata: Metadata) => Promise<string | null> {
  const cache = new Map<string, { user: string, until: number }>()
  return async (claimed, metadata) => {
    const header = String(metadata.get('authorization')[0] ?? '')
    const token = header.replace(/^Bearer\s+/i, '')
    if (token === '') return 'no service-account token (authorization: Bearer ...)'
    const key = createHash('sha256').update(token).digest('base64')
    const hit = cache.get(key)
    let user = hit !== undefined && hit.until > Date.now() ? hit.user : undefined
    if (user === undefined) {
      let review: { status?: { authenticated?: boolean, error?: string, user?: { username?: string } } }
      try {
        review = await api.request({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [audience] } } })
      } catch (err) {
        return `token review failed: ${(err as Error).message}`
      }
      if (review.status?.authenticated !== true) return `token rejected: ${review.status?.error ?? 'not authenticated'}`
      user = review.status.user?.username ?? ''
      if (cache.size > 1000) cache.clear()
      cache.set(key, { user, until: Date.now() + 60_000 })
    }
    const expected = `system:serviceaccount:${claimed.namespace}:${safeName(claimed.gateway)}`
    return user === expected ? null : `requested gateway ${claimed.namespace}/${claimed.gateway} but authenticated as ${user}`
  }
}
