import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

/** The proxy package's version, reported by --version, /config_dump and metrics. */
export const version: string = (require('../package.json') as { version: string }).version
