/**
 * The curl arguments `porticoctl proxy trace ... -- URL [curl args]` understands. A small,
 * strict subset: anything else is a usage error (exit 2) rather than silently ignored.
 *
 *   -X, --request METHOD       method (default GET, or POST when there is a body)
 *   -H, --header "Name: value" add a header ("Name:" with no value removes a default one)
 *   -d, --data, --data-ascii D body; "@file" reads the file without CR/LF; several are joined with &
 *       --data-raw D           body, "@" not special
 *       --data-binary D        body; "@file" reads the file byte for byte
 *       --json D               body with JSON content-type and accept headers ("@file" as --data-binary)
 *   -k, --insecure             do not verify the TLS certificate (https:// URLs)
 *   -v, --verbose              print the request and response headers on stderr
 *   -s, --silent, -S           accepted, no effect (porticoctl never prints the response body)
 *
 * Short flags take a value attached (`-XPOST`) or as the next argument; long ones also as
 * `--name=value`; boolean short flags combine (`-kv`). The URL may come anywhere; a URL
 * without a scheme is http://.
 */

import { readFileSync } from 'node:fs'
import { cliError } from '../errors.ts'

export interface CurlRequest {
  url: URL
  method: string
  /** In order; names as written. The Host header is the URL's unless one is given here. */
  headers: Array<[name: string, value: string]>
  /** Lower-cased names of default headers to leave out (`-H 'Name:'`). */
  removed: string[]
  body: Buffer | null
  insecure: boolean
  verbose: boolean
}

export interface CurlParseOptions {
  /** Reads `@file` arguments (tests swap it). */
  readFile?: (path: string) => Buffer
}

export const SUPPORTED_CURL_OPTIONS = '-X/--request, -H/--header, -d/--data/--data-ascii, --data-raw, --data-binary, --json, -k/--insecure, -v/--verbose, -s/--silent, -S'

const WITH_VALUE: Record<string, string> = {
  '-X': 'request',
  '--request': 'request',
  '-H': 'header',
  '--header': 'header',
  '-d': 'data',
  '--data': 'data',
  '--data-ascii': 'data',
  '--data-raw': 'data-raw',
  '--data-binary': 'data-binary',
  '--json': 'json'
}
const FLAGS: Record<string, string> = {
  '-k': 'insecure',
  '--insecure': 'insecure',
  '-v': 'verbose',
  '--verbose': 'verbose',
  '-s': 'silent',
  '--silent': 'silent',
  '-S': 'silent',
  '--show-error': 'silent'
}

function bad (message: string): Error {
  return cliError('PORTICOCTL_BAD_CURL_ARGS', `bad curl arguments: ${message}`)
}

/** Parses `URL [curl args]` (in any order). Throws PORTICOCTL_BAD_CURL_ARGS. */
export function parseCurlArgs (args: string[], options: CurlParseOptions = {}): CurlRequest {
  const readFile = options.readFile ?? ((path: string) => readFileSync(path))
  let url: string | null = null
  let method: string | null = null
  const headers: Array<[string, string]> = []
  const removed: string[] = []
  const bodyParts: Buffer[] = []
  let json = false
  let insecure = false
  let verbose = false

  const readAt = (option: string, value: string): Buffer => {
    const path = value.slice(1)
    if (path === '') throw bad(`${option} @: a file name is missing after @`)
    try {
      return path === '-' ? readFileSync(0) : readFile(path)
    } catch (err) {
      throw bad(`${option} @${path}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
    }
  }

  const apply = (option: string, name: string, value: string): void => {
    switch (name) {
      case 'request':
        if (!/^[A-Za-z]+$/.test(value)) throw bad(`${option} "${value}": not an HTTP method`)
        method = value.toUpperCase()
        return
      case 'header': {
        const colon = value.indexOf(':')
        if (colon <= 0) throw bad(`${option} "${value}": use "Name: value"`)
        const header = value.slice(0, colon).trim()
        if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header)) throw bad(`${option} "${value}": "${header}" is not a valid header name`)
        const v = value.slice(colon + 1).trim()
        if (v === '') removed.push(header.toLowerCase())
        else headers.push([header, v])
        return
      }
      case 'data':
        bodyParts.push(value.startsWith('@') ? Buffer.from(readAt(option, value).toString('latin1').replace(/[\r\n]/g, ''), 'latin1') : Buffer.from(value))
        return
      case 'data-raw':
        bodyParts.push(Buffer.from(value))
        return
      case 'data-binary':
        bodyParts.push(value.startsWith('@') ? readAt(option, value) : Buffer.from(value))
        return
      case 'json':
        json = true
        bodyParts.push(value.startsWith('@') ? readAt(option, value) : Buffer.from(value))
        return
    }
  }

  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (!arg.startsWith('-') || arg === '-') {
      if (url !== null) throw bad(`more than one URL ("${url}" and "${arg}")`)
      url = arg
      continue
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=')
      const opt = eq === -1 ? arg : arg.slice(0, eq)
      if (FLAGS[opt] !== undefined) {
        if (eq !== -1) throw bad(`${opt} takes no value`)
        if (FLAGS[opt] === 'insecure') insecure = true
        if (FLAGS[opt] === 'verbose') verbose = true
        continue
      }
      const name = WITH_VALUE[opt]
      if (name === undefined) throw bad(`unknown option ${opt} (supported: ${SUPPORTED_CURL_OPTIONS})`)
      let value: string
      if (eq !== -1) value = arg.slice(eq + 1)
      else {
        if (i + 1 >= args.length) throw bad(`${opt} needs a value`)
        value = args[++i]!
      }
      apply(opt, name, value)
      continue
    }
    // Short options: a value option (maybe with its value attached) or a group of flags.
    const opt = arg.slice(0, 2)
    const name = WITH_VALUE[opt]
    if (name !== undefined) {
      let value: string
      if (arg.length > 2) value = arg.slice(2)
      else {
        if (i + 1 >= args.length) throw bad(`${opt} needs a value`)
        value = args[++i]!
      }
      apply(opt, name, value)
      continue
    }
    for (const ch of arg.slice(1)) {
      const flag = FLAGS[`-${ch}`]
      if (flag === undefined) throw bad(`unknown option -${ch}${arg.length > 2 ? ` (in ${arg})` : ''} (supported: ${SUPPORTED_CURL_OPTIONS})`)
      if (flag === 'insecure') insecure = true
      if (flag === 'verbose') verbose = true
    }
  }

  if (url === null) throw bad('no URL (porticoctl proxy trace ... -- URL [curl args])')
  const parsed = parseUrl(url)
  let body: Buffer | null = null
  if (bodyParts.length > 0) body = json ? Buffer.concat(bodyParts) : joinData(bodyParts)
  const has = (n: string) => headers.some(([h]) => h.toLowerCase() === n)
  if (body !== null && !has('content-type') && !removed.includes('content-type')) {
    headers.push(['Content-Type', json ? 'application/json' : 'application/x-www-form-urlencoded'])
  }
  if (json && !has('accept')) headers.push(['Accept', 'application/json'])
  return {
    url: parsed,
    method: method ?? (body !== null ? 'POST' : 'GET'),
    headers,
    removed,
    body,
    insecure,
    verbose
  }
}

function joinData (parts: Buffer[]): Buffer {
  const out: Buffer[] = []
  parts.forEach((p, i) => {
    if (i > 0) out.push(Buffer.from('&'))
    out.push(p)
  })
  return Buffer.concat(out)
}

function parseUrl (text: string): URL {
  const withScheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(text) ? text : `http://${text}`
  let url: URL
  try {
    url = new URL(withScheme)
  } catch {
    throw bad(`"${text}" is not a URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`"${text}": only http:// and https:// URLs`)
  if (url.hostname === '') throw bad(`"${text}": the URL has no host`)
  return url
}
