/**
 * Keeping Node's `EventEmitter.init` on V8's fast path in a process that serves requests.
 *
 * Every EventEmitter runs `EventEmitter.init`, and every request builds two of them (over
 * HTTP/1.1 the proxy's `H1Request` and `H1Response`, proxy/src/h1-server.ts; over HTTP/2
 * Node's compatibility pair), whose constructors V8 compiles with `init` inlined.
 * Each of `init`'s field accesses (`_events`, `_eventsCount`, `_maxListeners`) keeps one
 * inline cache shared by every class that passes through, and V8 checks up to four classes
 * inline (`--max-valid-polymorphic-map-count`); past four it looks the fields up generically,
 * from then on, and so does every request's pair. V8 starts keeping that feedback after
 * `init`'s first eight calls, so what counts is what is built after start-up's first
 * emitters:
 *   - a proxy serving plain HTTP builds three classes then (`Socket`, `H1Request`,
 *     `H1Response`);
 *   - its start-up builds more after the eighth call when the admin, stats and readiness
 *     servers run, as by default (`Server`s, the admin's inspector `Session`, the listener's
 *     `Http2Server`, the config file's `FSWatcher`): seven in all;
 *   - a `Worker` (the span export thread at its first batch, or a big config's loader)
 *     adds two: the `Worker` and its stdio's `ReadableWorkerStdio`.
 * Over four, requests cost ~600-800 more instructions each under callgrind
 * (docs/tracing-cost-log.md, eighth and thirteenth rounds).
 *
 * Two remedies here, both copies of what Node's `init` does:
 *   - `renewEmitterInit()`, once the process serves: `EventEmitter.init` becomes a copy whose
 *     feedback starts empty, so start-up's classes are not in it;
 *   - `startWorkerThread()`: for the one synchronous `new Worker()`, `Worker`'s super
 *     constructor (which `super()` looks up when it runs) is a class that sets the same
 *     fields itself, so the `Worker` never reaches `init`; only `ReadableWorkerStdio` does,
 *     the fourth class. (It cannot call the copy: the copy's feedback would see the `Worker`.)
 * The fields are Node's internals, so both are used only when `EventEmitter.init` is the
 * code they copy (compared by source at load) and Node's private symbols for it are found;
 * otherwise Node's own `init` and a plain `new Worker()` run, correct at the old cost. The
 * tests fail on a Node whose `init` differs, so an upgrade gets the copies checked again.
 */

import { EventEmitter } from 'node:events'
import { Worker, type WorkerOptions } from 'node:worker_threads'

/** Node 24's `EventEmitter.init`, the code copied below (compared without whitespace). */
const COPIED_INIT = `function(opts) {
  if (this._events === undefined ||
      this._events === ObjectGetPrototypeOf(this)._events) {
    this._events = { __proto__: null };
    this._eventsCount = 0;
    this[kShapeMode] = false;
  } else {
    this[kShapeMode] = true;
  }
  this._maxListeners ||= undefined;
  if (opts?.captureRejections) {
    validateBoolean(opts.captureRejections, 'options.captureRejections');
    this[kCapture] = Boolean(opts.captureRejections);
  } else {
    // Assigning the kCapture property directly saves an expensive
    // prototype lookup in a very sensitive hot path.
    this[kCapture] = EventEmitter.prototype[kCapture];
  }
}`

type Init = (this: Fields, opts?: { captureRejections?: unknown }) => void
type Fields = Record<string | symbol, unknown>

const emitter = EventEmitter as unknown as { init: Init, prototype: Fields }
/** Node's own `init`, as loaded. */
const nodeInit = emitter.init
const withoutSpace = (s: string): string => s.replace(/\s+/g, '')
const getPrototypeOf = Object.getPrototypeOf

/** Node's private symbols `init` sets, found by description on objects that exist already (none is built here). */
const kCapture = Object.getOwnPropertySymbols(EventEmitter.prototype).find(s => s.description === 'kCapture')
const kShapeMode = Object.getOwnPropertySymbols(process).find(s => s.description === 'shapeMode')

/** Whether this Node's `init` is the code copied here, so the copies may stand in for it. */
export const EMITTER_INIT_COPIED = kCapture !== undefined && kShapeMode !== undefined &&
  getPrototypeOf(Worker) === EventEmitter && withoutSpace(String(nodeInit)) === withoutSpace(COPIED_INIT)

let renewed = false

/**
 * Makes `EventEmitter.init` a copy of Node's with feedback of its own, for the classes built
 * from now on; call once the process serves (later calls do nothing). Options that capture
 * rejections (rare) go to Node's own, which validates them. Returns whether it did (false
 * on a Node it does not know, or when done already).
 */
export function renewEmitterInit (): boolean {
  // Once: a second closure of the same function would share the first one's feedback.
  if (!EMITTER_INIT_COPIED || renewed) return false
  renewed = true
  const capture = kCapture!
  const shapeMode = kShapeMode!
  const proto = emitter.prototype
  emitter.init = function init (opts) {
    if (opts?.captureRejections) return nodeInit.call(this, opts)
    if (this._events === undefined || this._events === (getPrototypeOf(this) as Fields)._events) {
      this._events = { __proto__: null }
      this._eventsCount = 0
      this[shapeMode] = false
    } else {
      this[shapeMode] = true
    }
    this._maxListeners ||= undefined
    this[capture] = proto[capture]
  }
  return true
}

/** `Worker`'s super constructor while `startWorkerThread` builds one: `init`'s work for a new object given no options (`Worker` gives none). */
class WorkerEmitterFields {
  constructor () {
    const self = this as unknown as Fields
    self._events = { __proto__: null }
    self._eventsCount = 0
    self[kShapeMode!] = false
    self._maxListeners = undefined
    self[kCapture!] = emitter.prototype[kCapture!]
  }
}

/** `new Worker(url, options)`, its emitter fields set without `EventEmitter.init` where that is known to be safe. */
export function startWorkerThread (url: URL, options: WorkerOptions): Worker {
  if (!EMITTER_INIT_COPIED) return new Worker(url, options)
  Object.setPrototypeOf(Worker, WorkerEmitterFields)
  try {
    return new Worker(url, options)
  } finally {
    Object.setPrototypeOf(Worker, EventEmitter)
  }
}
