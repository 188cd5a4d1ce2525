/**
 * Makes source files Latin-1, so that V8 keeps each one's source as a one-byte string. A
 * module's source stays in its isolate for as long as the module lives (V8 compiles its
 * functions lazily from it), once per thread that loads it, and a single character above
 * U+00FF anywhere in a file — an em dash in a comment — makes V8 hold the whole source as
 * UTF-16, twice the bytes. Of the 159 files a data-plane worker loaded, 72 were: 610 KB
 * more in every worker and in the primary (docs/multicore.md, Memory).
 *
 * In comments, each such character becomes its ASCII spelling (— → --, → → ->, … → ...);
 * in code (a string, template or regular expression), a `\uXXXX` escape, which is the same
 * character at run time. A character of neither kind stops the script with the file and
 * line. packages/proxy/test/startup-loads.test.ts checks the files a worker loads.
 *
 * Usage: node scripts/latin1-sources.ts FILE...   (rewrites the files in place; prints what changed)
 */

import { readFileSync, writeFileSync } from 'node:fs'

const ASCII: Record<string, string> = {
  '—': '--',
  '–': '-',
  '−': '-',
  '→': '->',
  '←': '<-',
  '…': '...',
  '≥': '>=',
  '≤': '<=',
  '≠': '!=',
  '≈': '~',
  'Σ': 'sum',
  '‘': '\'',
  '’': '\'',
  '“': '"',
  '”': '"'
}

const WIDE = /[^\u0000-\u00ff]/gu

/** Where a line's comment starts (-1: none), for a line of code: a `//` outside quotes. */
function commentStart (line: string): number {
  let quote: string | null = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (quote !== null) {
      if (c === '\\') i++
      else if (c === quote) quote = null
    } else if (c === '\'' || c === '"' || c === '`') quote = c
    else if (c === '/' && line[i + 1] === '/') return i
  }
  return -1
}

function ascii (text: string, where: string): string {
  return text.replace(WIDE, c => {
    const a = ASCII[c]
    if (a === undefined) throw new Error(`${where}: no ASCII spelling for ${JSON.stringify(c)} in a comment (add one to scripts/latin1-sources.ts)`)
    return a
  })
}

const escaped = (text: string): string => text.replace(WIDE, c => c.length === 1 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : `\\u{${c.codePointAt(0)!.toString(16)}}`)

export function latin1 (source: string, file: string): string {
  let inBlock = false
  return source.split('\n').map((line, i) => {
    const where = `${file}:${i + 1}`
    const trimmed = line.trimStart()
    // Block comments: the repository writes them one per line run (/** … */), never after code.
    if (inBlock || trimmed.startsWith('/*')) {
      const end = line.indexOf('*/')
      inBlock = end === -1
      if (end !== -1 && /[^\u0000-\u00ff]/u.test(line.slice(end + 2))) throw new Error(`${where}: code after a block comment`)
      return ascii(line, where)
    }
    if (trimmed.startsWith('//')) return ascii(line, where)
    const at = commentStart(line)
    return at === -1 ? escaped(line) : escaped(line.slice(0, at)) + ascii(line.slice(at), where)
  }).join('\n')
}

if (import.meta.main) {
  for (const file of process.argv.slice(2)) {
    const before = readFileSync(file, 'utf8')
    const after = latin1(before, file)
    if (after !== before) {
      writeFileSync(file, after)
      process.stdout.write(`${file}\n`)
    }
  }
}
