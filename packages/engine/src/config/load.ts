/**
 * Text -> validated config -> IR, collecting every problem with its position. The one entry
 * point for `portico -f`, `--validate` and hot reloads.
 *
 * Whatever the text, the result is a LoadResult: nothing here throws (a YAML alias bomb, a
 * library bug or an oversized file are diagnostics like a typo), so neither start-up nor a
 * reload can end in a stack trace or an unhandled rejection.
 */

import { closeSync, fstatSync, openSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { ConfigFile, StaticConfig } from './schema.ts'
import type { ProxyIR } from '../ir/types.ts'
import type { ConfigDiagnostic } from './diagnostics.ts'
import { lazyRequire } from '../util/lazy-require.ts'
import { validateAgainstSchema } from './validate.ts'
import { staticConfigDiagnostics } from './static-config-check.ts'
import { formatIrDiagnostic, validateIR } from '../ir/validate.ts'
import { formatByteSize } from '../util/byte-size.ts'
import { PorticoError } from '../util/errors.ts'
import { openRegularFile, readBounded, readReferencedFile } from './referenced-file.ts'

// The YAML parser (72 modules) loads with the first config text parsed: a data-plane worker
// imports the engine but is given IR, never text (bench/footprint.ts).
const yamlSource = lazyRequire<typeof import('./yaml-source.ts')>('../config/yaml-source.ts')
// Likewise config -> IR (to-ir.ts and its translators, about a dozen modules): only a thread
// that translates config text loads it -- the primary, at its first load (issue 54).
const toIR = lazyRequire<typeof import('./to-ir.ts')>('../config/to-ir.ts')

export interface LoadedConfig {
  file: ConfigFile
  ir: ProxyIR
  staticConfig: StaticConfig
}

export type LoadResult =
  | { ok: true, config: LoadedConfig }
  | { ok: false, diagnostics: ConfigDiagnostic[] }

/** loadConfigFile's result: a loaded config comes with the text it was read from. */
export type FileLoadResult =
  | { ok: true, config: LoadedConfig, text: string }
  | { ok: false, diagnostics: ConfigDiagnostic[] }

/**
 * Largest config accepted by default. Parsing costs about a second and 150 MB of memory per
 * MiB of YAML (10,000 routes are ~6 MiB); 8 MiB leaves room for the largest hand-written
 * or generated route tables while keeping a runaway file (a generator loop, a log written
 * to the wrong path) from taking minutes and gigabytes.
 */
export const DEFAULT_MAX_CONFIG_BYTES = 8 * 1024 * 1024

export interface LoadOptions {
  /** Directory that relative paths in the file are resolved against. */
  baseDir: string
  /**
   * Reads a file the config names (TLS, JWKS, htpasswd). Default: readReferencedFile, with
   * the same size limit as the config; tests inject one.
   */
  readFile?: (path: string) => string
  /** Size limit in bytes (UTF-8) of the config and of each file it names; default DEFAULT_MAX_CONFIG_BYTES. */
  maxBytes?: number
  /** A fragment of a larger config (ToIROptions.fragment): whole-route checks are skipped. */
  fragment?: boolean
  /** Cluster mode (ToIROptions.refuseLocalBaseURL): models' baseURLs at loopback, link-local or metadata addresses are refused. */
  refuseLocalBaseURL?: boolean
}

export function loadConfigText (text: string, options: LoadOptions): LoadResult {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_CONFIG_BYTES
  // A string's UTF-16 length bounds its UTF-8 size from below: only count bytes when close.
  if (text.length > maxBytes || (text.length * 3 > maxBytes && Buffer.byteLength(text, 'utf8') > maxBytes)) {
    return { ok: false, diagnostics: [tooLarge(Buffer.byteLength(text, 'utf8'), maxBytes)] }
  }
  try {
    return loadChecked(text, options)
  } catch (err) {
    // A bug or a library throwing on some input: still a refusal, never an exception.
    return { ok: false, diagnostics: [{ path: [], message: `cannot load the config: ${(err as Error).message ?? String(err)}` }] }
  }
}

function loadChecked (text: string, options: LoadOptions): LoadResult {
  const source = yamlSource().parseYamlSource(text)
  if (source.syntaxErrors.length > 0) return { ok: false, diagnostics: source.syntaxErrors }
  const value = source.value ?? {}
  const place = (ds: ConfigDiagnostic[]): ConfigDiagnostic[] =>
    ds.map(d => ({ ...d, ...source.locate(d.path) }))
      .sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.col ?? 0) - (b.col ?? 0))

  const schemaErrors = validateAgainstSchema(value)
  if (schemaErrors.length > 0) return { ok: false, diagnostics: place([...schemaErrors, ...semanticsBesides(value, schemaErrors, options)]) }

  const file = value as ConfigFile
  const { ir, diagnostics } = toIR().configToIR(file, { baseDir: options.baseDir, readFile: fileReader(options), ...(options.fragment === true ? { fragment: true } : {}), ...(options.refuseLocalBaseURL === true ? { refuseLocalBaseURL: true } : {}) })
  const missing = missingGateways(file)
  if (missing !== undefined) diagnostics.unshift(missing)
  diagnostics.push(...staticConfigDiagnostics(file.config))
  if (diagnostics.length > 0) return { ok: false, diagnostics: place(diagnostics) }
  // The checks every config source gets (Engine.apply runs them too): --validate must refuse
  // what start would refuse. Most are caught above with positions; these name the IR path.
  const problems = validateIR(ir)
  if (problems.length > 0) return { ok: false, diagnostics: problems.map(p => ({ path: [], message: `in the translated config: ${formatIrDiagnostic(p)}` })) }
  return { ok: true, config: { file, ir, staticConfig: file.config ?? {} } }
}

/** The reader of files the config names: the injected one, else readReferencedFile with the config's size limit. */
function fileReader (options: LoadOptions): (path: string) => string {
  return options.readFile ?? (p => readReferencedFile(p, options.maxBytes ?? DEFAULT_MAX_CONFIG_BYTES))
}

const ROUTE_LISTS = new Set(['routes', 'tcpRoutes', 'tlsRoutes', 'udpRoutes'])

/**
 * The semantic problems (files, CEL, timers, references) of a document the schema refused,
 * when every schema error lies inside routes: those routes are left out -- as holes, so the
 * others keep their indices and positions -- and the rest is translated, so --validate
 * reports a route's typo and a missing certificate in one run. Schema errors anywhere else
 * (a gateway, `config:`, the top level) come alone: translation assumes their shape.
 */
function semanticsBesides (value: unknown, schemaErrors: ConfigDiagnostic[], options: LoadOptions): ConfigDiagnostic[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return []
  const doc: Record<string, unknown> = { ...(value as Record<string, unknown>) }
  for (const { path } of schemaErrors) {
    const [list, index] = path
    if (typeof list !== 'string' || !ROUTE_LISTS.has(list) || typeof index !== 'number' || !Array.isArray(doc[list])) return []
    if (doc[list] === (value as Record<string, unknown>)[list]) doc[list] = [...(doc[list] as unknown[])]
    // A hole, not a splice: the other routes keep their indices (forEach skips holes).
    delete (doc[list] as unknown[])[index]
  }
  try {
    return toIR().configToIR(doc as ConfigFile, { baseDir: options.baseDir, readFile: fileReader(options), ...(options.fragment === true ? { fragment: true } : {}), ...(options.refuseLocalBaseURL === true ? { refuseLocalBaseURL: true } : {}) }).diagnostics
  } catch {
    // The schema errors are what matter; a translation tripping over the rest adds nothing.
    return []
  }
}

/**
 * A config with no gateway listens nowhere. It is what an empty, comment-only or truncated
 * file reads as (an editor that truncates before writing, `>` in a shell), and installing it
 * would close every listener -- so it is an error, at start, in --validate and on reload.
 * Line 1, column 1 when the document is empty (there is nothing else to point at).
 */
function missingGateways (file: ConfigFile): ConfigDiagnostic | undefined {
  if (file.gateways !== undefined && Object.keys(file.gateways).length > 0) return undefined
  const why = 'a config needs at least one gateway (a listener); an empty or partly written file is refused so that it never replaces a running config'
  return file.gateways === undefined
    ? { path: [], message: `no gateways: ${why}`, line: 1, col: 1 }
    : { path: ['gateways'], message: `no gateways: ${why}` }
}

/** `bytes` undefined: more than the limit, size unknown (a pipe). */
function tooLarge (bytes: number | undefined, maxBytes: number): ConfigDiagnostic {
  const size = bytes === undefined ? `larger than ${formatByteSize(maxBytes)}` : `${formatByteSize(bytes)}`
  return {
    path: [],
    message: `the config is ${size}, over the ${formatByteSize(maxBytes)} limit (raise it with --max-config-size or MAX_CONFIG_SIZE)`
  }
}

/**
 * Reads a config file as UTF-8, refusing one over `maxBytes` without reading it all (a
 * regular file by its size; a pipe or device by reading at most one byte past the limit).
 * With `regularOnly` (reloads), anything but a regular file is refused unread.
 * Throws PORTICO_CONFIG_TOO_LARGE, PORTICO_REFERENCED_FILE, or the file system's error.
 */
export function readConfigText (path: string, maxBytes = DEFAULT_MAX_CONFIG_BYTES, options: { regularOnly?: boolean } = {}): string {
  // A reload reads on the event loop that serves requests: there, a config file that is not a
  // regular file (replaced by a FIFO, which would block the open until a writer came) is
  // refused unread. At start, a pipe stays allowed (`-f /dev/stdin`, `-f <(generate)`).
  const opened = options.regularOnly === true ? openRegularFile(path) : undefined
  const fd = opened?.fd ?? openSync(path, 'r')
  try {
    const stat = opened?.stat ?? fstatSync(fd)
    if (stat.isFile() && stat.size > maxBytes) throw new PorticoError('PORTICO_CONFIG_TOO_LARGE', tooLarge(stat.size, maxBytes).message)
    return readBounded(fd, stat.size, maxBytes, () => new PorticoError('PORTICO_CONFIG_TOO_LARGE', tooLarge(undefined, maxBytes).message)).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

export function loadConfigFile (path: string, options: { maxBytes?: number } = {}): FileLoadResult {
  let text: string
  try {
    text = readConfigText(path, options.maxBytes)
  } catch (err) {
    const message = err instanceof PorticoError ? err.message : `cannot read config file: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`
    return { ok: false, diagnostics: [{ path: [], message }] }
  }
  const result = loadConfigText(text, { baseDir: dirname(resolve(path)), ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}) })
  // The text read is handed on (the watcher compares later reads with it): reading the file a
  // second time could read a different file, and without the size limit.
  return result.ok ? { ...result, text } : result
}
