/**
 * trace/record-batches.ts and its export thread, run in a process of their own:
 *   - the thread's own output: its stdout and stderr are not piped into the process's,
 *     whose stdout carries the JSON log lines, so nothing it prints — console or a direct
 *     write — reaches the proxy's output, and the records still leave and are counted;
 *   - a thread whose exporter could not start: its records count as failed, and shutting
 *     down does not wait for a thread that is already gone.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Runs RecordBatches with the export module `fixture` in a fresh process: its stdout (the outcomes, and whether the shutdown came at once) and stderr. */
async function runBatches (fixture: string): Promise<{ stdout: string, stderr: string }> {
  const script = `
    import { RecordBatches } from ${JSON.stringify(new URL('../src/trace/record-batches.ts', import.meta.url).href)}
    const outcomes = {}
    const batches = new RecordBatches({ sink: { module: new URL(${JSON.stringify(new URL(`./lib/${fixture}`, import.meta.url).href)}), options: {} }, delayMs: 5, what: 'record' })
    batches.onOutcome = (result, n) => { outcomes[result] = (outcomes[result] ?? 0) + n }
    for (let i = 0; i < 100; i++) batches.add(['r', i])
    await new Promise(resolve => setTimeout(resolve, 1000))
    const started = Date.now()
    await batches.shutdown()
    process.stdout.write('outcomes ' + JSON.stringify(outcomes) + (Date.now() - started < 5000 ? ' stopped at once' : ' stopped late') + '\\n')
  `
  // A file, not --eval: the export thread inherits the process's flags, --input-type too.
  const file = join(mkdtempSync(join(tmpdir(), 'record-batches-')), 'run.mjs')
  writeFileSync(file, script)
  return await run(process.execPath, [file], { timeout: 30_000 })
}

test('nothing the export thread prints reaches the process\'s stdout or stderr, and its records are exported', async () => {
  const { stdout, stderr } = await runBatches('noisy-record-export.ts')
  assert.equal(stdout, 'outcomes {"exported":100} stopped at once\n')
  assert.equal(stderr, '')
})

test('an export thread that could not start: its records count as failed, and the shutdown does not wait for it', async () => {
  const { stdout } = await runBatches('failing-record-export.ts')
  assert.equal(stdout, 'outcomes {"failed":100} stopped at once\n')
})
