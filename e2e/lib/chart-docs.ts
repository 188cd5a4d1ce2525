/**
 * The values reference of a Helm chart from the `# --` comments of its values.yaml, in the
 * style of helm-docs (which this replaces, so the repo needs no Go tool for its docs):
 *
 *   # Lines before the `# --` line are not documentation (examples, notes).
 *   # -- (type) Description, continued on the
 *   # following comment lines.
 *   # @default -- text shown instead of the value
 *   key: value
 *
 * The type is `(type)` when given, else inferred from the value (bool, int, float, string,
 * list, object; null → string, as helm-docs does). A key without a `# --` comment is not
 * documented (free-form maps' entries, for example). Used by scripts/chart-docs.ts (writes
 * the table into the chart README, or `--check`s it) and by the chart tests.
 */

import { parse } from 'yaml'

export interface ValueDoc {
  /** Dotted path, e.g. `controller.service.ports`. */
  key: string
  type: string
  /** The value in values.yaml. */
  value: unknown
  /** What the Default column shows: `@default` text, else the value as JSON in backticks. */
  defaultText: string
  description: string
  /** 1-based line of the key in values.yaml. */
  line: number
}

const KEY_LINE = /^(\s*)("[^"]+"|'[^']+'|[^\s#'"-][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:\s|$)/

export function inferType (value: unknown): string {
  if (value === null || value === undefined) return 'string'
  if (typeof value === 'boolean') return 'bool'
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float'
  if (typeof value === 'string') return 'string'
  if (Array.isArray(value)) return 'list'
  return 'object'
}

function lookup (root: unknown, path: string[]): { found: boolean, value: unknown } {
  let cur: unknown = root
  for (const segment of path) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur) || !Object.hasOwn(cur, segment)) return { found: false, value: undefined }
    cur = (cur as Record<string, unknown>)[segment]
  }
  return { found: true, value: cur }
}

/** Every documented key of a values.yaml text, in file order. Throws on a malformed comment. */
export function parseValuesDocs (text: string): ValueDoc[] {
  const values = parse(text) as unknown
  const lines = text.split('\n')
  const stack: Array<{ indent: number, key: string }> = []
  const docs: ValueDoc[] = []
  let pending: { description: string[], type?: string, default?: string, line: number } | null = null

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const trimmed = line.trim()
    if (trimmed === '') {
      pending = null
      continue
    }
    if (trimmed.startsWith('#')) {
      const body = trimmed.replace(/^#\s?/, '')
      if (body.startsWith('-- ') || body === '--') {
        let description = body.slice(2).trim()
        const typed = /^\(([^)]+)\)\s*(.*)$/.exec(description)
        pending = { description: [], line: i + 1 }
        if (typed !== null) {
          pending.type = typed[1]!.trim()
          description = typed[2]!
        }
        if (description !== '') pending.description.push(description)
      } else if (pending !== null) {
        const def = /^@default\s+--\s*(.*)$/.exec(body)
        if (def !== null) pending.default = def[1]!.trim()
        else if (body.trim() !== '') pending.description.push(body.trim())
      }
      continue
    }
    const match = KEY_LINE.exec(line)
    if (match === null || trimmed.startsWith('- ')) {
      pending = null
      continue
    }
    const indent = match[1]!.length
    let key = match[2]!
    if ((key.startsWith('"') && key.endsWith('"')) || (key.startsWith("'") && key.endsWith("'"))) key = key.slice(1, -1)
    while (stack.length > 0 && stack[stack.length - 1]!.indent >= indent) stack.pop()
    stack.push({ indent, key })
    if (pending === null) continue
    const path = stack.map(s => s.key)
    const { found, value } = lookup(values, path)
    if (!found) throw new Error(`values.yaml:${i + 1}: documented key ${path.join('.')} not found in the parsed values`)
    if (pending.description.length === 0) throw new Error(`values.yaml:${pending.line}: the "# --" comment of ${path.join('.')} has no description`)
    docs.push({
      key: path.join('.'),
      type: pending.type ?? inferType(value),
      value,
      defaultText: pending.default ?? '`' + JSON.stringify(value ?? null) + '`',
      description: pending.description.join(' '),
      line: i + 1
    })
    pending = null
  }
  return docs
}

/**
 * Keys of the values that have no `# --` comment and are not inside a documented free-form
 * value (an object or list documented as a whole): what a contributor forgot to document.
 */
export function undocumentedKeys (text: string, docs: ValueDoc[]): string[] {
  const documented = new Set(docs.map(d => d.key))
  const missing: string[] = []
  const walk = (value: unknown, path: string[]) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return
    for (const [k, v] of Object.entries(value)) {
      const p = [...path, k]
      const key = p.join('.')
      if (!documented.has(key)) {
        missing.push(key)
        continue
      }
      // Children of a documented key are checked only if some child is documented: a
      // documented map with no documented children is free-form (labels, annotations...).
      const hasDocumentedChild = [...documented].some(d => d.startsWith(key + '.'))
      if (hasDocumentedChild) walk(v, p)
    }
  }
  walk(parse(text), [])
  return missing
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

export function renderValuesTable (docs: ValueDoc[]): string {
  const sorted = [...docs].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  const rows = sorted.map(d => `| \`${d.key}\` | ${d.type} | ${cell(d.defaultText)} | ${cell(d.description)} |`)
  return ['| Key | Type | Default | Description |', '|---|---|---|---|', ...rows].join('\n') + '\n'
}

export const TABLE_START = '<!-- values-table:start (generated by `node scripts/chart-docs.ts` from values.yaml; do not edit) -->'
export const TABLE_END = '<!-- values-table:end -->'

/** The README with the text between the markers replaced by the table. */
export function withValuesTable (readme: string, table: string): string {
  const start = readme.indexOf(TABLE_START)
  const end = readme.indexOf(TABLE_END)
  if (start === -1 || end === -1 || end < start) throw new Error(`the README needs the markers\n${TABLE_START}\n${TABLE_END}`)
  return readme.slice(0, start + TABLE_START.length) + '\n\n' + table + '\n' + readme.slice(end)
}
