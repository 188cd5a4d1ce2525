/**
 * `porticoctl controller log`: shows and sets the controller's per-component log levels
 * through its admin `/logging` endpoint (port 9095 in the controller pod):
 * `GET /logging` answers one `<component>=<level>` line per component; `POST ?level=L` sets
 * all; `POST ?set=component=level` sets one; 400 with a message on bad input.
 */

import { adminCall } from '../admin/client.ts'
import { cliError, usageError } from '../errors.ts'
import type { Io } from '../io.ts'
import type { Target } from '../targets/types.ts'
import { formatTable } from '../util/table.ts'

/** The controller's components (all `info` by default). */
export const CONTROLLER_COMPONENTS = ['portico/syncer', 'portico/translator', 'gateway-controller', 'deployer', 'default']

export interface ControllerLogOptions {
  target: Target
  level?: string
  /** `component=level` pairs. */
  set: string[]
  io: Io
}

export function checkSetArg (value: string): string {
  const eq = value.lastIndexOf('=')
  if (eq <= 0 || eq === value.length - 1) throw usageError(`--set "${value}": use component=level (components: ${CONTROLLER_COMPONENTS.join(', ')})`)
  return value
}

/** `component=level` lines as table rows; other lines are kept whole. */
export function parseLevels (text: string): string[][] {
  return text.split('\n').map(l => l.trim()).filter(l => l !== '').map(l => {
    const eq = l.lastIndexOf('=')
    return eq <= 0 ? [l, ''] : [l.slice(0, eq), l.slice(eq + 1)]
  })
}

export async function controllerLogCommand (options: ControllerLogOptions): Promise<void> {
  const sets = options.set.map(checkSetArg)
  const connection = await options.target.connect({ all: true })
  try {
    for (const instance of connection.instances) {
      const changes: Array<Record<string, string>> = []
      if (options.level !== undefined) changes.push({ level: options.level })
      for (const s of sets) changes.push({ set: s })
      for (const query of changes) {
        const answer = await adminCall(instance, { method: 'POST', path: '/logging', query })
        const flag = query.level !== undefined ? '--level' : `--set ${query.set}`
        if (answer.status === 400) throw cliError('PORTICOCTL_BAD_LEVEL', `${flag}: ${answer.text.trim()}`)
        if (answer.status !== 200) throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: POST /logging answered ${answer.status}: ${answer.text.trim()}`)
      }
      const answer = await adminCall(instance, { path: '/logging' })
      if (answer.status !== 200) throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: GET /logging answered ${answer.status}: ${answer.text.trim()}`)
      if (connection.instances.length > 1 || options.target.kind === 'cluster') options.io.stdout.write(`${instance.label}:\n`)
      options.io.stdout.write(formatTable(['COMPONENT', 'LEVEL'], parseLevels(answer.text)))
    }
  } finally {
    await connection.close()
  }
}
