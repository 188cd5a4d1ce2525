/**
 * Which kubeconfig to load, as kubectl picks it (`--kubeconfig`, then `KUBECONFIG`, then
 * `~/.kube/config`, then the in-cluster service account), failing with a clear "no
 * kubeconfig" error instead of client-node's silent fallback to localhost:8080. Loading it is
 * in kube.ts (which pulls in @kubernetes/client-node only when a cluster is used).
 */

import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, join } from 'node:path'
import { cliError } from '../errors.ts'

export interface KubeOptions {
  /** `--kubeconfig FILE`. */
  kubeconfig?: string
  /** `--context NAME`. */
  context?: string
  /** The environment to read KUBECONFIG, HOME and KUBERNETES_SERVICE_HOST from. */
  env?: NodeJS.ProcessEnv
}

export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token'

export type KubeconfigSource =
  | { kind: 'files', files: string[], from: string }
  | { kind: 'in-cluster' }

const HINT = 'use --local for a standalone instance'

/** Which kubeconfig would be used, or the "no kubeconfig" error explaining why there is none. */
export function kubeconfigSource (options: KubeOptions): KubeconfigSource {
  const env = options.env ?? process.env
  if (options.kubeconfig !== undefined) {
    if (!existsSync(options.kubeconfig)) throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig: --kubeconfig ${options.kubeconfig} does not exist`)
    return { kind: 'files', files: [options.kubeconfig], from: '--kubeconfig' }
  }
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter(f => f !== '')
  if (listed.length > 0) {
    const files = listed.filter(f => existsSync(f))
    if (files.length === 0) throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig: KUBECONFIG=${env.KUBECONFIG} names no existing file (${HINT})`)
    return { kind: 'files', files, from: 'KUBECONFIG' }
  }
  const home = env.HOME !== undefined && env.HOME !== '' ? env.HOME : homedir()
  const file = join(home, '.kube', 'config')
  if (existsSync(file)) return { kind: 'files', files: [file], from: '~/.kube/config' }
  if ((env.KUBERNETES_SERVICE_HOST ?? '') !== '' && existsSync(SERVICE_ACCOUNT_TOKEN)) return { kind: 'in-cluster' }
  throw cliError('PORTICOCTL_NO_KUBECONFIG', `no kubeconfig: KUBECONFIG is not set and ${file} does not exist (${HINT})`)
}
