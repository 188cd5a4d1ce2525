/**
 * `porticoctl proxy mesh`: the proxy's mesh identity from its admin server's `/debug/mesh`
 * (state, SPIFFE ID, certificate expiry, where it comes from, why it is not ready). The
 * words are @portico/trace-view's, as in the web UI's Overview. Exit status as every
 * read command: 0 when shown (whatever the state: the state is the answer), 1 when the
 * proxy cannot be asked.
 */

import { stringify } from 'yaml'
import { meshStatusRows, meshTone, meshConfigured, type MeshStatusShape } from '@portico/trace-view'
import { adminJson } from '../admin/client.ts'
import type { OutputFormat } from '../config/format.ts'
import type { Io } from '../io.ts'
import type { Target } from '../targets/types.ts'

export interface MeshCommandOptions {
  target: Target
  output: OutputFormat
  io: Io
}

/** STATE's terminal colours: the web UI's badge colours. */
const TONE_COLOURS = { ok: '\x1b[32m', warn: '\x1b[33m', bad: '\x1b[31m' } as const

/** `STATE:    ready` lines, labels padded to one width; `colour` paints STATE's value. */
export function meshText (status: MeshStatusShape | null, options: { colour?: boolean, now?: number } = {}): string {
  const rows = meshStatusRows(status, options.now)
  // `LABEL:` then two spaces after the longest label.
  const width = Math.max(...rows.map(([label]) => label.length)) + 3
  return rows.map(([label, value]) => {
    const painted = label === 'STATE' && options.colour === true && meshConfigured(status) ? `${TONE_COLOURS[meshTone(status.state)]}${value}\x1b[39m` : value
    return `${`${label}:`.padEnd(width)}${painted}`
  }).join('\n') + '\n'
}

export async function meshCommand (options: MeshCommandOptions): Promise<void> {
  const connection = await options.target.connect({ all: false })
  try {
    const status = await adminJson<MeshStatusShape>(connection.instances[0]!, { path: '/debug/mesh' })
    const text = options.output === 'json'
      ? JSON.stringify(status, null, 2) + '\n'
      : options.output === 'yaml'
        ? stringify(status, { lineWidth: 0 })
        : meshText(status, { colour: options.io.stdout.isTTY === true && process.env.NO_COLOR === undefined })
    options.io.stdout.write(text)
  } finally {
    await connection.close()
  }
}
