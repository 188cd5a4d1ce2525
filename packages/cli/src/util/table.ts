/**
 * kubectl-style tables: upper-case headers, columns padded with three spaces, no borders.
 * `paint` may wrap a body cell once padded (terminal colours), so escape codes never count
 * towards a column's width.
 */
export function formatTable (headers: string[], rows: string[][], paint?: (row: number, column: number, cell: string) => string): string {
  const widths = headers.map((hd, i) => Math.max(hd.length, ...rows.map(r => (r[i] ?? '').length)))
  const line = (cells: string[], row: number) => cells.map((c, i) => {
    const padded = i === cells.length - 1 ? c : c.padEnd(widths[i]!)
    if (row < 0 || paint === undefined) return padded
    // The padding stays outside the colour.
    const painted = paint(row, i, c)
    return painted + padded.slice(c.length)
  }).join('   ').trimEnd()
  return [line(headers, -1), ...rows.map((r, i) => line(r, i))].join('\n') + '\n'
}
