/** An export-thread module whose exporter cannot start (record-batches.test.ts). */

export async function openRecordExport (): Promise<never> {
  throw new Error('no exporter here')
}
