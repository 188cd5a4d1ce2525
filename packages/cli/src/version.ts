import { createRequire } from 'node:module'

/** porticoctl's version, from packages/cli/package.json. */
export const version: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version
