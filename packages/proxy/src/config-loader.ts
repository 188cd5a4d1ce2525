/**
 * Loading a config for a hot reload without stopping the data plane. Parsing YAML,
 * validating and translating run synchronously and take about a second per MiB (10,000
 * routes ≈ 6 MiB ≈ 5 s on a busy 2-core machine); on the main thread every request, health
 * check and metrics scrape would wait that long. Texts above a small size load in a worker
 * thread instead; only receiving the result (JSON.parse of the IR, ~1/40 of the load time)
 * and installing it run on the main thread. Small texts that name no file load inline: they
 * take milliseconds, less than starting a worker. A config that names files (TLS, JWKS,
 * htpasswd) loads in the worker whatever its size: the files are read there.
 */

import { loadConfigText, startWorkerThread, type LoadOptions, type LoadResult } from '@portico/engine'

export interface OffThreadOptions extends LoadOptions {
  /** Texts up to this many UTF-16 units that name no file load inline. Default 64 KiB (~100 routes, a few ms). */
  inlineBelow?: number
  /**
   * Heap limit of the worker in MiB: a text that would need more ends the worker, not the
   * process (the reload is refused). Default 4096.
   */
  maxHeapMb?: number
}

export const DEFAULT_INLINE_BELOW = 64 * 1024

const WORKER_URL = new URL('./config-load-worker.ts', import.meta.url)

export async function loadConfigOffThread (text: string, options: OffThreadOptions): Promise<LoadResult> {
  const { inlineBelow = DEFAULT_INLINE_BELOW, maxHeapMb = 4096, ...load } = options
  // A readFile function cannot cross to another thread (tests inject one): load inline.
  if (load.readFile !== undefined) return loadConfigText(text, load)
  if (text.length <= inlineBelow) {
    // A small text loads inline only if it names no file: reading a certificate, a JWKS or an
    // htpasswd file (up to the size limit, from a disk that may be slow) is the worker's job,
    // so that no file read ever runs on the event loop serving requests. The first file the
    // load asks for ends the inline attempt (its result is dropped) and the worker loads.
    let namesFiles = false
    const result = loadConfigText(text, {
      ...load,
      readFile: () => {
        namesFiles = true
        throw new Error('loaded in the worker')
      }
    })
    if (!namesFiles) return result
  }
  return await new Promise<LoadResult>(resolve => {
    let settled = false
    const finish = (result: LoadResult) => {
      if (settled) return
      settled = true
      resolve(result)
      void worker.terminate()
    }
    const fail = (message: string) => finish({ ok: false, diagnostics: [{ path: [], message: `cannot load the config: ${message}` }] })
    // Started as the export thread is (@portico/engine's util/emitter-init.ts): a reload
    // does not leave every later request's EventEmitter fields on V8's generic path.
    const worker = startWorkerThread(WORKER_URL, {
      workerData: { text, options: load },
      resourceLimits: { maxOldGenerationSizeMb: maxHeapMb },
      // The worker reads TLS, htpasswd and JWKS files itself; it needs no stdin.
      stdin: false
    })
    worker.once('message', (json: string) => {
      let result: LoadResult
      try {
        result = JSON.parse(json) as LoadResult
      } catch (err) {
        fail((err as Error).message)
        return
      }
      finish(result)
    })
    worker.once('error', err => {
      fail((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY' ? `it needs more than ${maxHeapMb} MiB of memory to load` : err.message)
    })
    worker.once('exit', code => fail(`the loader thread exited (code ${code}) without a result`))
  })
}
