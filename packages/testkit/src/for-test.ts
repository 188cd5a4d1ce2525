/**
 * Shared state changed for one test only. A file's tests share a gateway, backends and
 * `process.env`; a test that changes one of them (a backend's handler, an env var) must put
 * it back even when it fails, or the next test runs against what the failed one left (a
 * 'hang' handler, say). `setForTest` sets the value now and restores the original in
 * `t.after`, so the restore cannot be skipped by a failed assertion.
 */

import type { TestContext } from 'node:test'

// Per test, the keys of each object it changed: only the first change records the original,
// so a test may set the same key several times and the one restore still brings back what
// was there before the test (whatever order t.after hooks run in).
const changed = new WeakMap<TestContext, WeakMap<object, Set<PropertyKey>>>()

/**
 * Sets `target[key] = value` for the rest of test `t`; after it, the value from before the
 * test comes back (a key that was absent is deleted again). `value` undefined deletes the
 * key, as `process.env` needs (assigning undefined there stores the string 'undefined').
 */
export function setForTest<T extends object, K extends keyof T> (t: TestContext, target: T, key: K, value: T[K] | undefined): void {
  let objects = changed.get(t)
  if (objects === undefined) changed.set(t, objects = new WeakMap())
  let keys = objects.get(target)
  if (keys === undefined) objects.set(target, keys = new Set())
  if (!keys.has(key)) {
    keys.add(key)
    const had = Object.prototype.hasOwnProperty.call(target, key)
    const original = target[key]
    t.after(() => {
      if (had) target[key] = original
      else delete target[key]
    })
  }
  if (value === undefined) delete target[key]
  else target[key] = value
}
