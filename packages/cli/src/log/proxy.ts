/**
 * `porticoctl proxy log`: shows (or with `--level`, sets) the log level of every matching
 * proxy through its admin `/logging` endpoint. Prints `current log level is <filter>` per
 * proxy (prefixed with the pod in a cluster).
 */

import { adminCall } from '../admin/client.ts'
import { cliError } from '../errors.ts'
import type { Io } from '../io.ts'
import type { Target } from '../targets/types.ts'

export interface ProxyLogOptions {
  target: Target
  /** A level or filter (`debug`, `info,engine=debug`) to set; undefined only shows. */
  level?: string
  io: Io
}

export async function proxyLogCommand (options: ProxyLogOptions): Promise<void> {
  const connection = await options.target.connect({ all: true })
  try {
    for (const instance of connection.instances) {
      const answer = await adminCall(instance, options.level === undefined
        ? { path: '/logging' }
        : { method: 'POST', path: '/logging', query: { level: options.level } })
      if (answer.status === 400) throw cliError('PORTICOCTL_BAD_LEVEL', `--level: ${answer.text.trim()}`)
      if (answer.status !== 200) throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: /logging answered ${answer.status}: ${answer.text.trim()}`)
      const line = answer.text.trim()
      options.io.stdout.write(options.target.kind === 'cluster' ? `${instance.label}: ${line}\n` : `${line}\n`)
    }
  } finally {
    await connection.close()
  }
}
