/**
 * An HBONE peer for tests, as ztunnel is on a pod's port 15008: a real node:http2 secure
 * server (mTLS, client certificate required and verified against the test mesh CA) that
 * accepts CONNECT, records the client's SPIFFE ID, and pipes the stream to a TCP connection
 * to the `:authority` it names. Certificates with SPIFFE URI SANs come from openssl (./test-ca.ts).
 */

import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http2 from 'node:http2'
import net from 'node:net'
import type { TLSSocket } from 'node:tls'
import { createTestCa } from './test-ca.ts'

export interface TestCa {
  dir: string
  root: string
  /** Issues a leaf with this SPIFFE ID as URI SAN; returns the paths and PEM texts. */
  issue (name: string, spiffeId: string): { certFile: string, keyFile: string, cert: string, key: string }
}

export function makeTestCa (cn = 'mesh-test-ca'): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'portico-mesh-'))
  const ca = createTestCa(dir, 'ca', { subject: `/CN=${cn}` })
  return {
    dir,
    root: ca.cert,
    issue (name, spiffeId) {
      // Istio's workload certificates: no subject name, the SPIFFE ID as the only (URI) SAN.
      return ca.issue(name, {
        subject: '/O=cluster.local',
        extensions: [`subjectAltName=critical,URI:${spiffeId}`, 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth,clientAuth']
      })
    }
  }
}

export interface HbonePeer {
  port: number
  /** HTTP/2 connections accepted (TLS done). */
  sessions: number
  /** Client SPIFFE IDs seen, one per CONNECT. */
  clients: string[]
  /** Client certificate SHA-256 fingerprints, one per CONNECT. */
  fingerprints: string[]
  /** `:authority` of each CONNECT. */
  authorities: string[]
  /** Streams open now / the most at once. */
  open: number
  maxOpen: number
  /** Answer CONNECT with this status instead of 200 (null: 200 and pipe). */
  refuse: number | null
  /** Take CONNECT streams and never answer them. */
  silent: boolean
  /** Sends GOAWAY on every connection (as a ztunnel draining does). */
  goaway (): void
  close (): Promise<void>
}

export async function startHbonePeer (options: { cert: string, key: string, root: string, maxConcurrentStreams?: number }): Promise<HbonePeer> {
  const sessions = new Set<http2.ServerHttp2Session>()
  const server = http2.createSecureServer({
    cert: options.cert,
    key: options.key,
    ca: options.root,
    requestCert: true,
    rejectUnauthorized: true,
    settings: options.maxConcurrentStreams !== undefined ? { maxConcurrentStreams: options.maxConcurrentStreams } : {}
  })
  const peer: HbonePeer = {
    port: 0,
    sessions: 0,
    clients: [],
    fingerprints: [],
    authorities: [],
    open: 0,
    maxOpen: 0,
    refuse: null,
    silent: false,
    goaway: () => { for (const s of sessions) s.goaway() },
    close: async () => {
      for (const s of sessions) s.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    }
  }
  server.on('session', session => {
    peer.sessions++
    sessions.add(session)
    session.on('close', () => sessions.delete(session))
  })
  server.on('stream', (stream, headers) => {
    const socket = stream.session?.socket as TLSSocket
    const cert = socket.getPeerCertificate()
    const alt = cert.subjectaltname ?? ''
    peer.fingerprints.push(cert.fingerprint256)
    peer.clients.push(/URI:([^,]*)/.exec(alt)?.[1] ?? '')
    const authority = String(headers[':authority'])
    peer.authorities.push(authority)
    if (headers[':method'] !== 'CONNECT') {
      stream.respond({ ':status': 405 }, { endStream: true })
      return
    }
    if (peer.silent) return
    if (peer.refuse !== null) {
      stream.respond({ ':status': peer.refuse }, { endStream: true })
      return
    }
    const m = /^(.*):(\d+)$/.exec(authority)!
    peer.open++
    peer.maxOpen = Math.max(peer.maxOpen, peer.open)
    stream.once('close', () => { peer.open-- })
    const upstream = net.connect({ host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) }, () => {
      stream.respond({ ':status': 200 })
      stream.pipe(upstream)
      upstream.pipe(stream)
    })
    upstream.on('error', () => stream.close(http2.constants.NGHTTP2_CONNECT_ERROR))
    stream.on('error', () => upstream.destroy())
    stream.on('close', () => upstream.destroy())
  })
  server.on('error', () => {})
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  peer.port = (server.address() as { port: number }).port
  return peer
}
