/** A problem found in a configuration, located by field path and (when known) file position. */
export interface ConfigDiagnostic {
  /** Field path from the document root, e.g. ['routes', 0, 'backends', 1, 'host']. */
  path: ReadonlyArray<string | number>
  message: string
  line?: number
  col?: number
}

/** `routes[0].backends[1].host` */
export function formatPath (path: ReadonlyArray<string | number>): string {
  let out = ''
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`
    else if (/^[A-Za-z_$][\w$-]*$/.test(part)) out += out === '' ? part : `.${part}`
    else out += `[${JSON.stringify(part)}]`
  }
  return out === '' ? '(root)' : out
}

/** `file:line:col: path.to.field: what is wrong` -- the one format of every config error. */
export function formatDiagnostic (file: string, d: ConfigDiagnostic): string {
  const where = d.line === undefined ? file : `${file}:${d.line}:${d.col ?? 1}`
  return d.path.length === 0 ? `${where}: ${d.message}` : `${where}: ${formatPath(d.path)}: ${d.message}`
}
