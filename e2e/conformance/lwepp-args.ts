/**
 * How the conformance runner (run.ts --suite inference) runs the Inference Extension suite's
 * endpoint picker image (`lwepp`, or the full `epp`) as the lwepp binary scripts/test-tools
 * builds: its container arguments mapped to lwepp's flags.
 */

/**
 * lwepp's arguments from an endpoint picker container's: the flags lwepp has pass as they are
 * (the suite's manifests give only those), others are dropped (the full EPP's scheduler and
 * plugin flags mean nothing to lwepp's round robin), and `--pool-namespace`, which lwepp
 * needs and the full EPP takes from its own namespace, defaults to the pod's.
 */
export function lweppArgs (containerArgs: string[], podNamespace: string, dropped: (flag: string) => void = () => {}): string[] {
  // Not --kubeconfig: a path inside the container's image means nothing here; the process
  // kubelet gives the pod's service account through KUBECONFIG.
  const known = new Set(['endpoint-target-ports', 'grpc-health-port', 'grpc-port', 'health-checking', 'metrics-port',
    'pool-group', 'pool-name', 'pool-namespace', 'secure-serving', 'zap-devel', 'zap-encoder', 'zap-log-level', 'zap-stacktrace-level', 'zap-time-encoding'])
  const out: string[] = []
  for (let i = 0; i < containerArgs.length; i++) {
    const arg = containerArgs[i]!
    const m = /^--?([^=]+)(=.*)?$/.exec(arg)
    if (m === null) continue // a stray value
    // `--flag value`: the next argument is the value unless it is a flag itself.
    const value = m[2] !== undefined ? [] : (i + 1 < containerArgs.length && !containerArgs[i + 1]!.startsWith('-') ? [containerArgs[++i]!] : [])
    if (known.has(m[1]!)) out.push(`--${m[1]!}${m[2] ?? ''}`, ...value)
    else dropped(arg)
  }
  if (!out.some(a => /^--pool-namespace(=|$)/.test(a))) out.push(`--pool-namespace=${podNamespace}`)
  return out
}
