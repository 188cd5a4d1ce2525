/**
 * The mesh CA client (mesh/ca-client.ts) against a gRPC server on loopback serving Istio's
 * IstioCertificateService proto over TLS (a certificate for istiod.istio-system.svc from a
 * root of the test's): what it sends (the CSR, the lifetime, `authorization: Bearer`, the
 * `clusterid` metadata, the server name it checks), and what it refuses of the answer — a
 * chain without a root, elements that are not one PEM certificate, too many elements, an
 * answer over the size bound, no answer within the timeout. The real istiod is in
 * e2e/test/mesh-istiod.test.ts.
 */

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { envoyProtos } from '../src/util/envoy-grpc.ts'
import { meshCaClient, MeshCaError } from '../src/mesh/ca-client.ts'
import { createTestCa } from '../../testkit/src/test-ca.ts'

const SERVER_NAME = 'istiod.istio-system.svc'
const dir = mkdtempSync(join(tmpdir(), 'portico-mesh-ca-'))
let root = ''
let leaf = ''
let port = 0
let server: grpc.Server
let seen: { csr: string, validity: number, authorization: string[], clusterId: string[] } | null = null
let answer: (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => void = () => {}

before(async () => {
  // An Istio-like root (no CN) and a serving certificate with no subject, its name a SAN only.
  const ca = createTestCa(dir, 'root', { subject: '/O=cluster.local', extensions: ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign'] })
  root = ca.cert
  leaf = ca.issue('server', { subject: '/', sans: [`DNS:${SERVER_NAME}`], extensions: ['basicConstraints=critical,CA:FALSE'] }).cert
  const def = envoyProtos('istio/security/v1alpha1/ca.proto')
  server = new grpc.Server()
  server.addService((def['istio.v1.auth.IstioCertificateService'] as grpc.ServiceDefinition), {
    CreateCertificate: (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => {
      seen = {
        csr: call.request.csr,
        validity: Number(call.request.validity_duration),
        authorization: call.metadata.get('authorization').map(String),
        clusterId: call.metadata.get('clusterid').map(String)
      }
      answer(call, cb)
    }
  })
  const credentials = grpc.ServerCredentials.createSsl(null, [{ private_key: readFileSync(join(dir, 'server.key')), cert_chain: Buffer.from(leaf) }])
  port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => err !== null ? reject(err) : resolve(p)))
})

after(() => {
  server.forceShutdown()
  rmSync(dir, { recursive: true, force: true })
})

const request = { csrPem: 'CSR', token: 'tok', clusterId: 'Kubernetes', validitySeconds: 3600, timeoutMs: 3000 }

test('sends the CSR, lifetime, bearer token and cluster ID; returns the checked chain', async () => {
  answer = (_call, cb) => cb(null, { cert_chain: [leaf, root] })
  const ca = meshCaClient({ target: `127.0.0.1:${port}`, rootCertPem: root, serverName: SERVER_NAME })
  try {
    const chain = await ca.createCertificate(request)
    assert.deepEqual(chain, [leaf.trim() + '\n', root.trim() + '\n'])
    assert.deepEqual(seen, { csr: 'CSR', validity: 3600, authorization: ['Bearer tok'], clusterId: ['Kubernetes'] })
  } finally {
    ca.close()
  }
})

test('refuses hostile answers: no root, not one PEM certificate, too many, too large; and a status is typed', async () => {
  const ca = meshCaClient({ target: `127.0.0.1:${port}`, rootCertPem: root, serverName: SERVER_NAME })
  try {
    const cases: Array<[string, (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => void, RegExp | number]> = [
      ['leaf only', (_c, cb) => cb(null, { cert_chain: [leaf] }), /chain of 1/],
      ['empty', (_c, cb) => cb(null, {}), /chain of 0/],
      ['two certificates in one element', (_c, cb) => cb(null, { cert_chain: [leaf + root, root] }), /element 0 is not one PEM/],
      ['garbage', (_c, cb) => cb(null, { cert_chain: ['hello', root] }), /element 0 is not one PEM/],
      ['PEM that does not parse', (_c, cb) => cb(null, { cert_chain: ['-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', root] }), /element 0 does not parse/],
      ['nine elements', (_c, cb) => cb(null, { cert_chain: Array(9).fill(root) }), /at most 8/],
      ['over 256 KiB', (_c, cb) => cb(null, { cert_chain: [leaf, 'x'.repeat(300 * 1024)] }), grpc.status.RESOURCE_EXHAUSTED],
      ['UNAUTHENTICATED', (_c, cb) => cb({ code: grpc.status.UNAUTHENTICATED, details: 'request authenticate failure' }), grpc.status.UNAUTHENTICATED],
      ['no answer', () => {}, grpc.status.DEADLINE_EXCEEDED]
    ]
    for (const [what, a, expected] of cases) {
      answer = a
      await assert.rejects(ca.createCertificate({ ...request, timeoutMs: 1000 }), (err: unknown) =>
        err instanceof MeshCaError && (typeof expected === 'number' ? err.code === expected : expected.test(err.message)), what)
    }
  } finally {
    ca.close()
  }
})

test('checks the server name: a certificate for istiod.istio-system.svc does not serve another name', async () => {
  answer = (_call, cb) => cb(null, { cert_chain: [leaf, root] })
  const ca = meshCaClient({ target: `127.0.0.1:${port}`, rootCertPem: root, serverName: 'istiod-canary.istio-system.svc' })
  try {
    await assert.rejects(ca.createCertificate(request), (err: unknown) => err instanceof MeshCaError && err.code === grpc.status.UNAVAILABLE)
  } finally {
    ca.close()
  }
})
