/** kubectl-style tables: upper-case headers, columns padded with three spaces, no borders. */
export function formatTable (headers: string[], rows: string[][]): string {
  const widths = headers.map((hd, i) => Math.max(hd.length, ...rows.map(r => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i]!)).join('   ').trimEnd()
  return [line(headers), ...rows.map(line)].join('\n') + '\n'
}
