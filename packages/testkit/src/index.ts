/**
 * @portico/testkit: what Portico's tests share, so package tests and e2e tests import one
 * module instead of reaching into each other's folders. Each part is also a subpath
 * (`@portico/testkit/portico`, `/backends`, `/client`, `/wait`, `/trace`, `/tools`).
 */

export * from './portico.ts'
export * from './backends.ts'
export * from './client.ts'
export * from './wait.ts'
export * from './trace.ts'
export * from './tools.ts'
export * from './llama.ts'
export * from './for-test.ts'
export * from './test-ca.ts'
