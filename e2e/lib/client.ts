// Moved to @portico/testkit (waitUntil to its /wait part); kept so e2e tests' imports still resolve.
export * from '@portico/testkit/client'
export { waitUntil } from '@portico/testkit/wait'
