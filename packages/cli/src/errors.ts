/**
 * Errors porticoctl reports: an error with a stable code (in the style of the engine's
 * PorticoError, with its own table: these codes are the command line's — each decides the
 * exit status — not errors of the proxy, so they stay out of PORTICO_ERRORS); the code
 * decides the exit status. Usage errors (bad flags, bad curl arguments) exit 2; everything
 * that went wrong at run time (admin port closed, trace timed out, gateway not found, ...)
 * exits 1.
 */

export const EXIT_OK = 0
export const EXIT_RUNTIME = 1
export const EXIT_USAGE = 2

export type CliErrorCode =
  | 'PORTICOCTL_USAGE'
  | 'PORTICOCTL_BAD_CURL_ARGS'
  | 'PORTICOCTL_BAD_LEVEL'
  | 'PORTICOCTL_ADMIN_UNREACHABLE'
  | 'PORTICOCTL_ADMIN_ERROR'
  | 'PORTICOCTL_TRACE_TIMEOUT'
  | 'PORTICOCTL_TRACE_ENDED'
  | 'PORTICOCTL_TRACE_FILE'
  | 'PORTICOCTL_REQUEST_FAILED'
  | 'PORTICOCTL_NO_KUBECONFIG'
  | 'PORTICOCTL_KUBE_API'
  | 'PORTICOCTL_GATEWAY_NOT_FOUND'
  | 'PORTICOCTL_NO_READY_POD'
  | 'PORTICOCTL_PORT_FORWARD'

export class CliError extends Error {
  readonly code: CliErrorCode
  constructor (code: CliErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CliError'
    this.code = code
  }
}

export function isCliError (err: unknown, code?: CliErrorCode): err is CliError {
  return err instanceof CliError && (code === undefined || err.code === code)
}

const USAGE_CODES = new Set<string>(['PORTICOCTL_USAGE', 'PORTICOCTL_BAD_CURL_ARGS', 'PORTICOCTL_BAD_LEVEL'])

export function cliError (code: CliErrorCode, message: string, cause?: unknown): CliError {
  return new CliError(code, message, cause === undefined ? undefined : { cause })
}

export function usageError (message: string): CliError {
  return cliError('PORTICOCTL_USAGE', message)
}

/** The exit status for an error code: 2 for usage errors, 1 otherwise. */
export function exitCodeFor (code: string): number {
  return USAGE_CODES.has(code) ? EXIT_USAGE : EXIT_RUNTIME
}
