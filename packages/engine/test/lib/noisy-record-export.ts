/**
 * An export-thread module (trace/export-worker.ts loads it, as it loads span-export.ts) that
 * prints on every channel a thread has while it opens and while it takes records, and
 * reports each batch done: record-batches.test.ts checks that none of it reaches the
 * process's own stdout or stderr.
 */

import type { RecordSink } from '../../src/trace/record-export.ts'

export async function openRecordExport (_options: unknown, done: (n: number, error: string | null) => void): Promise<RecordSink<unknown>> {
  console.log('export thread: console.log')
  console.error('export thread: console.error')
  process.stdout.write('export thread: stdout\n')
  process.stderr.write('export thread: stderr\n')
  return {
    add (records) {
      console.warn(`export thread: ${records.length} records`)
      process.stdout.write(`export thread: ${records.length} records\n`)
      done(records.length, null)
    },
    async shutdown () {
      console.info('export thread: shutdown')
    }
  }
}
