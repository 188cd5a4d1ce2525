/**
 * oidc-provider prints notices about its development defaults with console.warn and
 * console.info on every start: in-memory storage, the built-in login pages, default token
 * lifetimes, a request body read before it. Each is true of a test's provider on purpose and
 * none belongs in the test output, so exactly those lines are dropped; any other line the
 * library prints still shows.
 */

const EXPECTED = [
  /a quick start development-only in-memory adapter is used/,
  /a quick start development-only feature devInteractions is enabled/,
  /default [\w.]+ function called, you SHOULD change it/,
  /already parsed request body detected/
]

let installed = false

export function quietOidcProviderNotices (): void {
  if (installed) return
  installed = true
  for (const method of ['warn', 'info'] as const) {
    const original = console[method].bind(console)
    console[method] = (...args: unknown[]) => {
      const first = args[0]
      if (args.length === 1 && typeof first === 'string' && /oidc-provider (WARNING|NOTICE): /.test(first) && EXPECTED.some(re => re.test(first))) return
      original(...args)
    }
  }
}
