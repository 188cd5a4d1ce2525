/**
 * Text → validated config → IR, collecting every problem with its position. The one entry
 * point for `portico -f`, `--validate` and hot reloads.
 */

import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { ConfigFile, StaticConfig } from './schema.ts'
import type { ProxyIR } from '../ir/types.ts'
import type { ConfigDiagnostic } from './diagnostics.ts'
import { parseYamlSource } from './yaml-source.ts'
import { validateAgainstSchema } from './validate.ts'
import { configToIR } from './to-ir.ts'

export interface LoadedConfig {
  file: ConfigFile
  ir: ProxyIR
  staticConfig: StaticConfig
}

export type LoadResult =
  | { ok: true, config: LoadedConfig }
  | { ok: false, diagnostics: ConfigDiagnostic[] }

export interface LoadOptions {
  /** Directory that relative paths in the file are resolved against. */
  baseDir: string
  readFile?: (path: string) => string
}

export function loadConfigText (text: string, options: LoadOptions): LoadResult {
  const source = parseYamlSource(text)
  if (source.syntaxErrors.length > 0) return { ok: false, diagnostics: source.syntaxErrors }
  const value = source.value ?? {}
  const place = (ds: ConfigDiagnostic[]): ConfigDiagnostic[] =>
    ds.map(d => ({ ...d, ...source.locate(d.path) }))
      .sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.col ?? 0) - (b.col ?? 0))

  const schemaErrors = validateAgainstSchema(value)
  if (schemaErrors.length > 0) return { ok: false, diagnostics: place(schemaErrors) }

  const file = value as ConfigFile
  const { ir, diagnostics } = configToIR(file, {
    baseDir: options.baseDir,
    readFile: options.readFile ?? (p => readFileSync(p, 'utf8'))
  })
  if (diagnostics.length > 0) return { ok: false, diagnostics: place(diagnostics) }
  return { ok: true, config: { file, ir, staticConfig: file.config ?? {} } }
}

export function loadConfigFile (path: string): LoadResult {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    return { ok: false, diagnostics: [{ path: [], message: `cannot read config file: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` }] }
  }
  return loadConfigText(text, { baseDir: dirname(resolve(path)) })
}
