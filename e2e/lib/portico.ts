// Moved to @portico/testkit; kept so e2e tests' imports still resolve.
export * from '@portico/testkit/portico'
