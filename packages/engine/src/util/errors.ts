/**
 * Errors with stable codes, in the style of undici and fastify: callers branch on `code`,
 * people read `message`.
 */
export class PorticoError extends Error {
  readonly code: string
  constructor (code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'PorticoError'
    this.code = code
  }
}

export function isPorticoError (err: unknown, code?: string): err is PorticoError {
  return err instanceof PorticoError && (code === undefined || err.code === code)
}
