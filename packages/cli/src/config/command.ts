/** `porticoctl proxy config all|backends|models`: read `/config_dump` from one proxy and format it. */

import { adminJson } from '../admin/client.ts'
import type { Io } from '../io.ts'
import type { Target } from '../targets/types.ts'
import type { ConfigDump } from './dump.ts'
import { backendsTable, formatConfigAll, modelsTable, type OutputFormat } from './format.ts'
import { stringify } from 'yaml'

export interface ConfigCommandOptions {
  target: Target
  section: 'all' | 'backends' | 'models'
  output: OutputFormat
  io: Io
}

export async function configCommand (options: ConfigCommandOptions): Promise<void> {
  const connection = await options.target.connect({ all: false })
  try {
    const dump = await adminJson<ConfigDump>(connection.instances[0]!, { path: '/config_dump' })
    let text: string
    if (options.section === 'all') text = formatConfigAll(dump, options.output)
    else if (options.section === 'models') {
      const models = dump.models ?? []
      text = options.output === 'json' ? JSON.stringify(models, null, 2) + '\n' : options.output === 'yaml' ? stringify(models, { lineWidth: 0 }) : modelsTable(dump)
    } else if (options.output === 'json') text = JSON.stringify(dump.backends ?? [], null, 2) + '\n'
    else if (options.output === 'yaml') text = stringify(dump.backends ?? [], { lineWidth: 0 })
    else text = backendsTable(dump, { colour: options.io.stdout.isTTY === true && process.env.NO_COLOR === undefined })
    options.io.stdout.write(text)
  } finally {
    await connection.close()
  }
}
