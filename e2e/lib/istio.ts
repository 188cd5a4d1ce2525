/**
 * The real istiod (`pilot-discovery`, built from istio.io/istio by scripts/test-tools) run
 * against the kube-apiserver harness, outside a cluster: what it needs there, learned from
 * its bootstrap (pilot/pkg/bootstrap) and written down in docs/mesh.md "Test tools".
 *
 *   const istio = requireIstio(t)                 // ISTIOD, ISTIO_CRDS (and ISTIO_ECHO)
 *   await installIstioCrds(cluster, istio.crds)
 *   const istiod = await startIstiod(cluster, istio.istiod, { clusterId: 'Kubernetes' })
 *   const root = await istiod.rootCert('my-namespace')   // the istio-ca-root-cert ConfigMap
 *   // CA: TLS to 127.0.0.1:istiod.secureGrpcPort, server name istiod.SERVER_NAME
 *
 * Or all of that at once, with a namespace of service accounts, for the tests of a gateway in
 * the mesh:
 *
 *   const mesh = await startMesh(kube, istio, { namespace: 'ns', serviceAccounts: ['gw', 'echo'], clusterId: 'c' })
 *   const echoCert = await mesh.issue('echo')                  // what Istio's agent gets for a pod
 *   const env = meshGatewayEnv(mesh, 'gw', await mesh.tokenFile('gw', 'token'))  // a proxy pod's env
 */

import { generateKeyPairSync } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { dirname, join } from 'node:path'
import type { TestContext } from 'node:test'
import { startCluster, startProcess, type Cluster, type KubeTools, type Proc } from '../cluster/harness.ts'
import { freePort, makeTempDir } from '@portico/testkit/portico'
import { createCsrPem } from '@portico/engine/mesh-csr'
import { meshCaClient, type MeshCaClient } from '@portico/engine/mesh-ca-client'

export interface IstioTools {
  istiod: string
  /** Istio's echo server (the mesh workload), when built. */
  echo: string | null
  /** Directory holding crd-all.gen.yaml. */
  crds: string
}

/**
 * The tools scripts/test-tools prints (ISTIOD, ISTIO_ECHO, ISTIO_CRDS), or null after
 * skipping the test; in CI (CI=true) a missing tool fails it instead.
 */
export function requireIstio (t: TestContext): IstioTools | null {
  const istiod = process.env.ISTIOD ?? ''
  const crds = process.env.ISTIO_CRDS ?? (istiod !== '' ? join(dirname(istiod), 'crds') : '')
  const echo = process.env.ISTIO_ECHO ?? (istiod !== '' ? join(dirname(istiod), 'istio-echo') : '')
  if (istiod !== '' && existsSync(istiod) && existsSync(join(crds, 'crd-all.gen.yaml'))) {
    return { istiod, crds, echo: existsSync(echo) ? echo : null }
  }
  const why = `istiod is missing (ISTIOD=${JSON.stringify(istiod)}, ISTIO_CRDS=${JSON.stringify(crds)}): run ./scripts/test-tools (./scripts/test does) and export the lines it prints`
  if (process.env.CI === 'true') throw new Error(why)
  t.skip(why)
  return null
}

/** Istio's CRDs (networking, security, telemetry, extensions), Established. */
export async function installIstioCrds (cluster: Cluster, crdsDir: string): Promise<void> {
  await cluster.kubectl(['apply', '--server-side', '--field-manager=portico-e2e', '-f', join(crdsDir, 'crd-all.gen.yaml')])
  await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '-l', 'app=istio-pilot'])
}

export interface Istiod {
  proc: Proc
  /** istiod's namespace (POD_NAMESPACE). */
  namespace: string
  clusterId: string
  /** The CA and secure xDS (TLS, istiod's certificate from its own CA): 127.0.0.1:PORT. */
  secureGrpcPort: number
  /** Plaintext xDS. */
  grpcPort: number
  /** /ready, /debug. */
  httpPort: number
  /** The DNS name istiod's serving certificate carries (checked by clients). */
  serverName: string
  output: () => string
  /** The mesh root (PEM) istiod writes to `namespace`'s istio-ca-root-cert ConfigMap, once there. */
  rootCert: (namespace: string, timeoutMs?: number) => Promise<string>
  stop: () => Promise<void>
}

export interface IstiodOptions {
  /** istiod's namespace (created here). Default istio-system. */
  namespace?: string
  /** `--clusterID`; istiod's default is `Kubernetes`. */
  clusterId?: string
  env?: Record<string, string>
  startTimeoutMs?: number
}

const sleep = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

function httpStatus (port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0) })
    req.on('error', () => resolve(0))
    req.setTimeout(2000, () => req.destroy())
    req.end()
  })
}

/**
 * istiod as an out-of-cluster process: the harness's admin kubeconfig, every port on
 * loopback and free, its self-signed CA (the `istio-ca-secret` Secret it creates in
 * `namespace`), relative paths (./etc/cacerts, ./var/lib/istio/inject, ./etc/istio/config)
 * in a directory of its own, no KUBERNETES_SERVICE_HOST (so it reviews tokens with the API
 * server's TokenReview and adds no OIDC authenticator). Resolves once /ready answers 200.
 */
export async function startIstiod (cluster: Cluster, istiodPath: string, options: IstiodOptions = {}): Promise<Istiod> {
  const namespace = options.namespace ?? 'istio-system'
  const clusterId = options.clusterId ?? 'Kubernetes'
  await cluster.createNamespace(namespace)
  const [httpPort, grpcPort, secureGrpcPort, httpsPort, monitoringPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()])
  const cwd = join(cluster.dir, 'istiod')
  mkdirSync(cwd, { recursive: true })
  const env: NodeJS.ProcessEnv = { ...process.env, POD_NAMESPACE: namespace, ...options.env }
  delete env.KUBERNETES_SERVICE_HOST
  delete env.KUBERNETES_SERVICE_PORT
  const proc = startProcess('istiod', istiodPath, [
    'discovery',
    `--kubeconfig=${cluster.kubeconfig}`,
    `--clusterID=${clusterId}`,
    `--httpAddr=127.0.0.1:${httpPort}`,
    `--grpcAddr=127.0.0.1:${grpcPort}`,
    `--secureGRPCAddr=127.0.0.1:${secureGrpcPort}`,
    `--httpsAddr=127.0.0.1:${httpsPort}`,
    `--monitoringAddr=127.0.0.1:${monitoringPort}`,
    // ControlZ: an ephemeral port (the default 9876 would clash between test files).
    '--ctrlz_port=0',
    // As Istio's chart sets it: xDS clients reconnect and rebalance every 30 min.
    '--keepaliveMaxServerConnectionAge=30m',
    '--log_output_level=default:info'
  ], cluster.dir, env, cwd)
  const output = (): string => { try { return readFileSync(proc.log, 'utf8') } catch { return '' } }
  const deadline = Date.now() + (options.startTimeoutMs ?? 90_000)
  for (;;) {
    if (proc.exitCode() !== undefined) throw new Error(`istiod exited (${String(proc.exitCode())}):\n${output().split('\n').slice(-30).join('\n')}`)
    if (await httpStatus(httpPort, '/ready') === 200) break
    if (Date.now() > deadline) {
      proc.child.kill('SIGKILL')
      throw new Error(`istiod not ready on :${httpPort}/ready:\n${output().split('\n').slice(-30).join('\n')}`)
    }
    await sleep(250)
  }
  return {
    proc,
    namespace,
    clusterId,
    secureGrpcPort,
    grpcPort,
    httpPort,
    serverName: `istiod.${namespace}.svc`,
    output,
    rootCert: async (ns, timeoutMs = 30_000) => {
      const until = Date.now() + timeoutMs
      for (;;) {
        try {
          const cm = await cluster.api<{ data?: Record<string, string> }>('GET', `/api/v1/namespaces/${ns}/configmaps/istio-ca-root-cert`)
          const pem = cm.data?.['root-cert.pem']
          if (pem !== undefined && pem !== '') return pem
        } catch {}
        if (Date.now() > until) throw new Error(`no istio-ca-root-cert ConfigMap in ${ns} after ${timeoutMs} ms:\n${output().split('\n').slice(-20).join('\n')}`)
        await sleep(200)
      }
    },
    stop: async () => {
      if (proc.exitCode() !== undefined) return
      proc.child.kill('SIGTERM')
      // istiod drains for --shutdownDuration (10 s) on SIGTERM; a test does not wait for that.
      const killed = setTimeout(() => proc.child.kill('SIGKILL'), 3000)
      await proc.exited
      clearTimeout(killed)
    }
  }
}

export interface IstioEcho {
  proc: Proc
  /** The pod IP every port is bound to (a loopback address of its own). */
  ip: string
  /** HBONE (TLS with the workload certificate, HTTP/2 CONNECT). */
  hbonePort: number
  /** The application's HTTP/1.1 port (free unless given): what a CONNECT's `:authority` names. */
  httpPort: number
  output: () => string
  stop: () => Promise<void>
}

export interface IstioEchoOptions {
  /** The pod IP (a 127/8 address: Linux routes all of it to lo). */
  ip: string
  /** The workload certificate chain (leaf first, without the root) and its key, PEM. */
  certChainPem: string
  keyPem: string
  /** The mesh root, PEM (the echo server reads it only for `--mtls` HTTP ports). */
  rootCertPem: string
  namespace: string
  /** Default 15008, the mesh's HBONE port. */
  hbonePort?: number
  httpPort?: number
}

/**
 * Istio's echo server as a mesh workload: every port bound to `ip` alone (`--bind-ip` with
 * INSTANCE_IP, as in a pod), HBONE on `hbonePort` (default 15008, the mesh's) with TLS from
 * the given certificate, an HTTP/1.1 port behind it (and the gRPC and TCP ports it always opens). Resolves when it
 * says it is ready (it first calls each of its own ports). Its files go in `dir`.
 */
export async function startIstioEcho (echoPath: string, dir: string, options: IstioEchoOptions): Promise<IstioEcho> {
  const hbonePort = options.hbonePort ?? 15008
  // Free ports rather than the defaults (8080, 7070, 9090): another program listening on
  // 0.0.0.0 at one of those would keep this one from binding the pod IP.
  const [httpPort, grpcPort, tcpPort] = await Promise.all([options.httpPort ?? freePort(), freePort(), freePort()])
  const name = `istio-echo-${options.ip}`
  const files = join(dir, name)
  mkdirSync(files, { recursive: true })
  writeFileSync(join(files, 'cert-chain.pem'), options.certChainPem)
  writeFileSync(join(files, 'key.pem'), options.keyPem, { mode: 0o600 })
  writeFileSync(join(files, 'root-cert.pem'), options.rootCertPem)
  const ports = [httpPort, grpcPort, tcpPort, hbonePort]
  const proc = startProcess(name, echoPath, [
    `--port=${httpPort}`, `--grpc=${grpcPort}`, `--tcp=${tcpPort}`,
    `--hbone=${hbonePort}`, `--tls=${hbonePort}`,
    `--bind-ip=${ports.join(',')}`,
    `--crt=${join(files, 'cert-chain.pem')}`, `--key=${join(files, 'key.pem')}`, `--ca=${join(files, 'root-cert.pem')}`,
    '--version=v1', '--cluster=Kubernetes'
  ], dir, { ...process.env, INSTANCE_IP: options.ip, NAMESPACE: options.namespace })
  const output = (): string => { try { return readFileSync(proc.log, 'utf8') } catch { return '' } }
  const deadline = Date.now() + 20_000
  while (!output().includes('Echo server is now ready')) {
    if (proc.exitCode() !== undefined || Date.now() > deadline) {
      proc.child.kill('SIGKILL')
      throw new Error(`Istio's echo server did not start on ${options.ip}:\n${output().split('\n').slice(-20).join('\n')}`)
    }
    await sleep(100)
  }
  return {
    proc,
    ip: options.ip,
    hbonePort,
    httpPort,
    output,
    stop: async () => {
      if (proc.exitCode() !== undefined) return
      // It drains for up to 10 s on SIGTERM while requests come in; a test does not wait.
      proc.child.kill('SIGKILL')
      await proc.exited
    }
  }
}

/** istiod on a fresh apiserver harness (or the test's own), a namespace of service accounts, the mesh root. */
export interface Mesh {
  cluster: Cluster
  istiod: Istiod
  namespace: string
  clusterId: string
  /** The mesh root (PEM), also written to `rootFile`. */
  root: string
  rootFile: string
  /** A temporary directory for the test's files (tokens, roots). */
  dir: string
  /** A client of istiod's CA trusting the mesh root (closed by `stop`). */
  ca: MeshCaClient
  /** `spiffe://cluster.local/ns/<namespace>/sa/<sa>`. */
  spiffeId: (serviceAccount: string) => string
  /**
   * What Istio's agent does for a pod: a P-256 key, a CSR, a certificate from istiod for
   * the service account (a TokenRequest token of audience istio-ca).
   */
  issue: (serviceAccount: string, validitySeconds?: number) => Promise<{ spiffeId: string, certChainPem: string, keyPem: string }>
  /** A TokenRequest token for the service account written to `dir/name` (the projected volume). */
  tokenFile: (serviceAccount: string, name: string, audience?: string) => Promise<{ file: string, token: string }>
  stop: () => Promise<void>
}

export interface MeshOptions {
  namespace: string
  serviceAccounts: string[]
  clusterId: string
  /**
   * An apiserver harness the test already runs (it keeps it: `stop` leaves it running);
   * by default a fresh one of its own.
   */
  cluster?: Cluster
}

export async function startMesh (kube: KubeTools, istio: IstioTools, options: MeshOptions): Promise<Mesh> {
  // No kubelet, no controllers: istiod's CA needs the API server (TokenReview, its Secret
  // and the root ConfigMaps), nothing that runs pods.
  const own = options.cluster === undefined
  const cluster = options.cluster ?? await startCluster({ tools: kube, controllerManager: false, fakeKubelet: false, gatewayApiCrds: false })
  let istiod: Istiod | null = null
  let ca: MeshCaClient | null = null
  try {
    await installIstioCrds(cluster, istio.crds)
    await cluster.createNamespace(options.namespace)
    for (const name of options.serviceAccounts) {
      await cluster.api('POST', `/api/v1/namespaces/${options.namespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } })
    }
    istiod = await startIstiod(cluster, istio.istiod, { clusterId: options.clusterId })
    const root = await istiod.rootCert(options.namespace)
    const dir = makeTempDir('portico-mesh-')
    const rootFile = join(dir, 'root-cert.pem')
    writeFileSync(rootFile, root)
    ca = meshCaClient({ target: `127.0.0.1:${istiod.secureGrpcPort}`, rootCertPem: root, serverName: istiod.serverName })
    const client = ca
    const spiffeId = (sa: string): string => `spiffe://cluster.local/ns/${options.namespace}/sa/${sa}`
    const started = istiod
    return {
      cluster,
      istiod,
      namespace: options.namespace,
      clusterId: options.clusterId,
      root,
      rootFile,
      dir,
      ca: client,
      spiffeId,
      issue: async (sa, validitySeconds = 3600) => {
        const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey
        const token = await cluster.createToken(options.namespace, sa, { audiences: ['istio-ca'], expirationSeconds: 600 })
        const chain = await client.createCertificate({ csrPem: createCsrPem({ privateKey: key, uris: [spiffeId(sa)] }), token, clusterId: options.clusterId, validitySeconds, timeoutMs: 15_000 })
        // The chain ends in the root; a workload serves the rest.
        return { spiffeId: spiffeId(sa), certChainPem: chain.slice(0, -1).join(''), keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string }
      },
      tokenFile: async (sa, name, audience = 'istio-ca') => {
        const token = await cluster.createToken(options.namespace, sa, { audiences: [audience], expirationSeconds: 600 })
        const file = join(dir, name)
        writeFileSync(file, token)
        return { file, token }
      },
      stop: async () => {
        client.close()
        await started.stop()
        if (own) await cluster.stop()
      }
    }
  } catch (err) {
    ca?.close()
    await istiod?.stop()
    if (own) await cluster.stop()
    throw err
  }
}

/**
 * The env a proxy pod in the mesh gets (MESH_ENABLED, POD_NAMESPACE, SERVICE_ACCOUNT,
 * CA_ADDRESS, CA_SERVER_NAME, CLUSTER_ID, MESH_TOKEN_FILE, MESH_ROOT_FILE; docs/mesh.md
 * "Mesh identity"), for `serviceAccount` with the token in `tokenFile`.
 */
export function meshGatewayEnv (mesh: Mesh, serviceAccount: string, tokenFile: string, options: { caAddress?: string, rootFile?: string } = {}): Record<string, string> {
  return {
    MESH_ENABLED: 'true',
    POD_NAMESPACE: mesh.namespace,
    SERVICE_ACCOUNT: serviceAccount,
    CA_ADDRESS: options.caAddress ?? `127.0.0.1:${mesh.istiod.secureGrpcPort}`,
    // An address has no name to check istiod's certificate against: the name it carries.
    CA_SERVER_NAME: mesh.istiod.serverName,
    CLUSTER_ID: mesh.clusterId,
    MESH_TOKEN_FILE: tokenFile,
    MESH_ROOT_FILE: options.rootFile ?? mesh.rootFile
  }
}
