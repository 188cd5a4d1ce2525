/**
 * One tick object of `process.nextTick` held for the life of the thread, so that V8 keeps
 * the hidden classes (maps) Node's tick objects are built through, and `nextTick` stays in
 * compiled code.
 *
 * Why. Node (lib/internal/process/task_queues.js) builds each tick object as a literal whose
 * first key is computed: `{ [async_id_symbol]: ..., [trigger_async_id_symbol]: ...,
 * [async_context_frame]: ..., callback, args }`. From the first computed key on, V8 defines
 * every property with the `DefineKeyedOwnPropertyInLiteral` bytecode, whose feedback is kept
 * by the runtime function itself (V8 13.6, Runtime_DefineKeyedOwnPropertyInLiteral): the
 * first map it sees is recorded (weakly), and any other map -- or the recorded one cleared
 * by a GC -- turns the slot megamorphic, for good. The maps after the first property exist
 * only while a tick object does (a map's transitions are weak; optimized code retains its
 * maps for two more full GCs, `--retain-maps-for-n-gc`). A full GC run while no tick object
 * is alive -- from a timer, when the tick queue is empty: start-up's own collection
 * (startup-gc.ts), an idle proxy's -- clears them, the next tick object builds new ones, and
 * four of the five slots go megamorphic. TurboFan then compiles those properties as calls
 * into the runtime (no inline stores for a megamorphic slot): ~5,000 instructions per
 * `nextTick`, about 8 of which Node's HTTP and stream internals make per proxied GET
 * (bench/README.md, "2026-12-06, the two heads": ~155-165k instructions per GET on the
 * event-loop thread, ~204-224k in the processes where this had happened).
 *
 * Holding one tick object keeps its map, and through the maps' back pointers the whole
 * chain from the literal's first map, alive; every later tick object takes the same maps
 * and the slots stay monomorphic. It must be taken before the first such GC, at the top of
 * each thread that serves (bin/portico.ts, workers/worker-main.ts). It costs one small
 * object.
 *
 * The tick object is the resource `async_hooks.executionAsyncResource()` returns while a
 * `nextTick` callback runs (Node passes it to emitBefore); a Node that passed something else
 * would only make this hold that something.
 */

import { executionAsyncResource } from 'node:async_hooks'

let held: object | undefined

/** Queues one `nextTick` whose callback takes its own tick object and holds it (above). */
export function holdTickObjectMaps (): void {
  if (held !== undefined) return
  process.nextTick(() => { held = executionAsyncResource() })
}

/** The held tick object, once the tick has run (for tests). */
export function heldTickObject (): object | undefined {
  return held
}
