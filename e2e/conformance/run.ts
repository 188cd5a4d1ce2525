/**
 * Runs the official Gateway API conformance suite against Portico (docs/conformance.md).
 *
 *   node e2e/conformance/run.ts [--channel standard|experimental]
 *     [--profiles GATEWAY-HTTP,GATEWAY-GRPC,GATEWAY-TLS,GATEWAY-TCP (the default: every profile Portico claims)]
 *     [--report FILE] [--run-test NAME] [--skip-tests A,B] [--keep-dir] [--implementation-version V]
 *   node e2e/conformance/run.ts --suite inference [--report FILE] [--run-test NAME] ...
 *
 * (`./scripts/conformance` runs it on both channels with the tools built;
 * `./scripts/inference-conformance SRC_DIR` runs the Inference Extension's suite.)
 *
 * `--suite inference` runs the Gateway API Inference Extension's suite instead
 * (INFERENCE_CONFORMANCE_TEST, built from a copy of its repository, whose module is not on the
 * module proxy): the same cluster on the Gateway API CRDs of the suite's gateway-api version
 * (INFERENCE_GATEWAY_API_CRDS), plus the InferencePool CRDs (INFERENCE_CONFORMANCE_CRDS), the
 * controller with the extension on, the API server reachable from pods (its endpoint pickers
 * read Pods and InferencePools) and the suite's picker image run as lwepp (LWEPP).
 *
 * Everything happens inside a private network namespace (the script re-runs itself under
 * `unshare --net`; root): a kube-apiserver with etcd and kube-controller-manager
 * (e2e/cluster/harness.ts), the fake kubelet running echo-basic and Portico proxy pods as
 * processes in namespaces of their own (process-kubelet.ts), a load-balancer stand-in, the
 * Portico controller, then `conformance.test` (scripts/conformance-tools). Exit status: the
 * suite's. The full output of the suite and of the controller is kept in the run's directory.
 *
 * Tools come from the environment `scripts/test-tools` / `scripts/conformance-tools` print
 * (GATEWAY_CONFORMANCE_TEST, ECHO_BASIC, GATEWAY_API_CRDS_EXPERIMENTAL, GATEWAY_API_CRDS_STANDARD, KUBE_*).
 */

import { spawn, spawnSync } from 'node:child_process'
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { CLUSTER_TRUST_BUNDLE_APISERVER_ARGS, documentationAddresses, startCluster, type Cluster, type KubeObject } from '../cluster/harness.ts'
import { processKubelet } from '../cluster/process-kubelet.ts'
import { startController, type ControllerProcess } from '../cluster/portico-processes.ts'
import { REPO_ROOT } from '@portico/testkit/portico'
import { startLoadBalancer } from './load-balancer.ts'
import { lweppArgs } from './lwepp-args.ts'

const PROXY_IMAGE = 'portico:conformance'
const PORTICO_BIN = join(REPO_ROOT, 'packages/proxy/bin/portico.ts')
const GATEWAY_CLASS = 'portico'
const CONTROLLER_NAME = 'portico.dev/gateway-controller'
const GATEWAY_IP = '169.254.1.1'
/**
 * The load-balancer stand-in's pool for requested addresses (a Gateway's spec.addresses):
 * 198.18.0.0/24 (RFC 2544 benchmarking, never a pod IP). GatewayStaticAddresses gets one
 * address from the pool (usable) and one outside it (unusable).
 */
const LB_POOL = /^198\.18\.0\.\d+$/
const USABLE_ADDRESS = '198.18.0.10'
const UNUSABLE_ADDRESS = '198.19.0.10'

const { values: args } = parseArgs({
  options: {
    suite: { type: 'string', default: 'gateway' },
    channel: { type: 'string', default: 'standard' },
    profiles: { type: 'string', default: 'GATEWAY-HTTP,GATEWAY-GRPC,GATEWAY-TLS,GATEWAY-TCP' },
    report: { type: 'string' },
    'run-test': { type: 'string' },
    'skip-tests': { type: 'string' },
    'keep-dir': { type: 'boolean', default: false },
    'implementation-version': { type: 'string', default: 'dev' }
  }
})

function need (name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '' || !existsSync(value)) {
    process.stderr.write(`conformance: ${name} is not set or missing (run ./scripts/conformance-tools and ./scripts/test-tools, or ./scripts/conformance)\n`)
    process.exit(2)
  }
  return value
}

// ---------------------------------------------------------------------------------------------
// The private network namespace

if (process.env.PORTICO_CONFORMANCE_NETNS !== '1') {
  if (process.getuid?.() !== 0) {
    process.stderr.write('conformance: needs root (network namespaces for the cluster and each pod)\n')
    process.exit(2)
  }
  const child = spawn('unshare', ['--net', '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, PORTICO_CONFORMANCE_NETNS: '1' }
  })
  for (const s of ['SIGINT', 'SIGTERM'] as const) process.on(s, () => child.kill(s))
  child.on('exit', (code, signal) => process.exit(code ?? (signal !== null ? 128 : 1)))
} else {
  await main()
}

function sh (cmd: string, cmdArgs: string[]): void {
  const r = spawnSync(cmd, cmdArgs, { stdio: 'pipe' })
  if (r.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')}: ${String(r.stderr).trim()}`)
}

function say (line: string): void {
  process.stderr.write(`conformance: ${line}\n`)
}

async function main (): Promise<void> {
  const started = Date.now()
  const inference = args.suite === 'inference'
  if (!inference && args.suite !== 'gateway') throw new Error(`--suite: ${String(args.suite)} (gateway or inference)`)
  const conformanceTest = need(inference ? 'INFERENCE_CONFORMANCE_TEST' : 'GATEWAY_CONFORMANCE_TEST')
  const echoBasic = need('ECHO_BASIC')
  const lwepp = inference ? need('LWEPP') : undefined
  const inferenceCrds = inference ? need('INFERENCE_CONFORMANCE_CRDS') : undefined
  const channel = args.channel
  if (channel !== 'standard' && channel !== 'experimental') throw new Error(`--channel: ${String(channel)}`)
  // The Inference Extension's suite checks that the Gateway API CRDs are its gateway-api's version.
  // The standard channel's: the suite's own version when scripts/conformance-tools printed them
  // (v1.7.0 refuses v1.6.3's, which the harness installs by default).
  const crds = inference
    ? need('INFERENCE_GATEWAY_API_CRDS')
    : channel === 'experimental'
      ? need('GATEWAY_API_CRDS_EXPERIMENTAL')
      : (process.env.GATEWAY_API_CRDS_STANDARD ?? '') !== '' ? need('GATEWAY_API_CRDS_STANDARD') : undefined
  const dir = mkdtempSync(join(tmpdir(), 'portico-conformance-'))
  const runLog = join(dir, 'runner.log')
  const log = (line: string): void => appendFileSync(runLog, `${new Date().toISOString()} ${line}\n`)

  // This namespace's loopback, forwarding between pods, nothing else.
  sh('ip', ['link', 'set', 'lo', 'up'])
  writeFileSync('/proc/sys/net/ipv4/ip_forward', '1\n')

  let cluster: Cluster | undefined
  let controller: ControllerProcess | undefined
  let stopLb: (() => void) | undefined
  let status = 1
  const pods = processKubelet({
    api: async (method, path, body) => await cluster!.api(method, path, body),
    dir: join(dir, 'pods'),
    gatewayIP: GATEWAY_IP,
    log,
    // Pods reach the API server over their veth (it binds every address of this namespace);
    // its certificate names localhost, not the veth's address.
    apiServer: { get server () { return cluster!.server.replace('127.0.0.1', GATEWAY_IP) }, get caFile () { return cluster!.caFile }, tlsServerName: 'localhost' },
    commandFor: (image, pod, files, container) => {
      // Any registry, path and tag: the Gateway API suite v1.6.3 pulls
      // registry.k8s.io/gateway-api/echo-basic, v1.7.0 registry.k8s.io/gateway-api/conformance/echo-basic,
      // the Inference Extension's gcr.io/k8s-staging-gateway-api/echo-basic.
      if (/(^|\/)echo-basic(:|@|$)/.test(image)) return { command: echoBasic, args: [] }
      if (lwepp !== undefined && /(^|\/)(lwepp|epp)(:|@|$)/.test(image)) {
        const ns = String(pod.metadata?.namespace)
        return { command: lwepp, args: lweppArgs((container.args ?? []).map(String), ns, flag => log(`pod ${ns}/${String(pod.metadata?.name)}: lwepp does not take ${flag}; dropped`)), apiAccess: true }
      }
      if (image === PROXY_IMAGE) {
        return {
          command: process.execPath,
          args: [PORTICO_BIN],
          // The projected token the Deployment mounts; the proxy reads its fixed path otherwise.
          env: { XDS_TOKEN_FILE: files.path('/var/run/secrets/portico/xds-token'), LOG_FORMAT: 'json', NODE_COMPILE_CACHE: join(REPO_ROOT, 'packages/proxy/node_modules/.cache/node-compile-cache') }
        }
      }
      return null
    }
  })
  const cleanup = async (): Promise<void> => {
    stopLb?.()
    await controller?.stop()
    await cluster?.stop()
    if (!args['keep-dir'] && status === 0) rmSync(dir, { recursive: true, force: true })
  }
  for (const s of ['SIGINT', 'SIGTERM'] as const) process.on(s, () => { void cleanup().finally(() => process.exit(130)) })

  try {
    say(`cluster (${inference ? crds! : `${channel} channel`} CRDs) in a private network namespace; files in ${dir}`)
    cluster = await startCluster({
      ...(crds !== undefined ? { gatewayApiCrds: crds } : {}),
      fakeKubelet: { podIP: documentationAddresses(), runtime: pods },
      // The endpoint pickers read the API server from their pods (their veths end here). The
      // Gateway API runs serve ClusterTrustBundle, so that the feature is claimed and reported.
      apiserverArgs: inference ? ['--bind-address=0.0.0.0'] : CLUSTER_TRUST_BUNDLE_APISERVER_ARGS,
      startTimeoutMs: 120_000
    })
    if (inferenceCrds !== undefined) {
      await cluster.kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=portico-e2e', '-f', inferenceCrds])
      await cluster.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/inferencepools.inference.networking.k8s.io'])
    }
    await cluster.createNamespace('portico-system')
    await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: ${GATEWAY_CLASS} }
spec: { controllerName: ${CONTROLLER_NAME} }
`)
    stopLb = startLoadBalancer(cluster, log, { pool: ip => LB_POOL.test(ip), attach: pods.addAddress })
    controller = await startController(cluster, {
      env: {
        PROXY_IMAGE,
        LOG_LEVEL: 'info',
        ...(inference ? { INFERENCE_EXTENSION_ENABLED: 'true' } : {})
      },
      // The proxies run in their pods' namespaces: they reach the controller over the veth.
      xdsAddress: (port: number) => `http://${GATEWAY_IP}:${port}`
    })
    const features = await waitForClassAccepted(cluster)
    say(`cluster and controller up in ${((Date.now() - started) / 1000).toFixed(0)} s; running the ${inference ? 'Inference Extension\'s suite' : `suite (${String(args.profiles)})`}`)

    const report = resolve(args.report ?? join(dir, 'report.yaml'))
    const suiteArgs = [
      '-test.v', '-test.run', '^TestConformance$', '-test.timeout', '60m',
      `--kubeconfig=${cluster.kubeconfig}`,
      `--gateway-class=${GATEWAY_CLASS}`,
      `--report-output=${report}`,
      '--cleanup-base-resources=false',
      `--version=${String(args['implementation-version'])}`,
      ...(inference
        // Its one profile (Gateway) and core features are its defaults; the report needs the
        // implementation, which the Gateway API suite gets from our module's test instead.
        ? ['--organization=portico', '--project=portico', '--url=https://github.com/portico-dev/portico', '--contact=https://github.com/portico-dev/portico/issues',
            ...(args['run-test'] !== undefined ? [`--run-test=${args['run-test']}`] : [])]
        : [`--conformance-profiles=${String(args.profiles)}`,
            `--usable-address=${USABLE_ADDRESS}`,
            `--unusable-address=${UNUSABLE_ADDRESS}`,
            // With --run-test the suite no longer reads the features from the GatewayClass.
            ...(args['run-test'] !== undefined ? [`--run-test=${args['run-test']}`, `--supported-features=${features.join(',')}`] : [])]),
      ...(args['skip-tests'] !== undefined ? [`--skip-tests=${args['skip-tests']}`] : [])
    ]
    status = await runSuite(conformanceTest, suiteArgs, join(dir, 'suite.log'))
    writeFileSync(join(dir, 'controller.log'), controller.output())
    say(`suite exited ${status} after ${((Date.now() - started) / 1000).toFixed(0)} s in all; report ${existsSync(report) ? report : '(none)'}`)
    if (status !== 0) say(`logs kept in ${dir} (suite.log, controller.log, runner.log, ${cluster.dir} is removed)`)
  } catch (err) {
    say(`failed: ${(err as Error).stack ?? String(err)}`)
    if (controller !== undefined) writeFileSync(join(dir, 'controller.log'), controller.output())
    say(`logs kept in ${dir}`)
    status = 1
  } finally {
    await cleanup()
  }
  process.exit(status)
}

/** Waits for the GatewayClass to be Accepted; returns the features it claims. */
async function waitForClassAccepted (cluster: Cluster): Promise<string[]> {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const gc = await cluster.api<KubeObject>('GET', `/apis/gateway.networking.k8s.io/v1/gatewayclasses/${GATEWAY_CLASS}`).catch(() => undefined)
    const accepted = (gc?.status?.conditions ?? []).some((c: { type: string, status: string }) => c.type === 'Accepted' && c.status === 'True')
    const features = ((gc?.status?.supportedFeatures ?? []) as Array<{ name: string }>).map(f => f.name)
    if (accepted && features.length > 0) return features
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  throw new Error(`GatewayClass ${GATEWAY_CLASS} was not Accepted with supportedFeatures within 60 s`)
}

/**
 * The suite's output goes to `logFile` whole; the terminal gets each run test's verdict as
 * it comes (`--- PASS: TestConformance/HTTPRouteSimpleSameNamespace`), a count, and the
 * failures' output at the end.
 */
async function runSuite (binary: string, suiteArgs: string[], logFile: string): Promise<number> {
  const child = spawn(binary, suiteArgs, { stdio: ['ignore', 'pipe', 'pipe'] })
  let pending = ''
  const onData = (chunk: Buffer): void => {
    appendFileSync(logFile, chunk)
    pending += chunk.toString('utf8')
    let nl
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      const verdict = /^\s*--- (PASS|FAIL|SKIP): TestConformance\/(\S+)(?:\/\S+)? \(([\d.]+)s\)/.exec(line)
      if (verdict === null || verdict[2]!.includes('/')) continue
      counts[verdict[1] as 'PASS' | 'FAIL' | 'SKIP']++
      // Skipped tests (features not claimed) are counted, not listed.
      if (verdict[1] !== 'SKIP') process.stderr.write(`  ${verdict[1]!.padEnd(4)} ${verdict[2]!} (${verdict[3]!} s)\n`)
    }
  }
  const counts = { PASS: 0, FAIL: 0, SKIP: 0 }
  child.stdout.on('data', onData)
  child.stderr.on('data', onData)
  const code = await new Promise<number>(resolve => child.on('close', (c, signal) => resolve(c ?? (signal !== null ? 1 : 0))))
  process.stderr.write(`  ${counts.PASS} passed, ${counts.FAIL} failed, ${counts.SKIP} skipped (features not claimed or tests not run)\n`)
  if (code !== 0) printFailures(readFileSync(logFile, 'utf8'))
  return code
}

/** The lines of each failed test's output (Go's test log indents them under the test). */
function printFailures (text: string): void {
  const failed = [...text.matchAll(/^\s*--- FAIL: (TestConformance\/\S+)/gm)].map(m => m[1]!)
  const leaves = failed.filter(name => !failed.some(other => other !== name && other.startsWith(name + '/')))
  for (const name of leaves) {
    const lines = text.split('\n').filter(l => l.includes(name.split('/').at(-1)!) || /Error Trace|Error:|expected|got/.test(l))
    process.stderr.write(`\n===== ${name}\n${lines.slice(0, 60).join('\n')}\n`)
  }
}
