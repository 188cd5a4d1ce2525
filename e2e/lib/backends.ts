// Moved to @portico/testkit (the waits to its /wait part); kept so e2e tests' imports still resolve.
export * from '@portico/testkit/backends'
export { sleep, deferred, withTimeout } from '@portico/testkit/wait'
