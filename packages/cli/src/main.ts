/**
 * porticoctl's entry point: parses the command line, runs the command, and turns errors into
 * `porticoctl: <message>` on stderr and an exit status (0 ok, 1 runtime error, 2 usage).
 */

import { CommanderError } from 'commander'
import { buildProgram, type ProgramContext } from './args.ts'
import { CliError, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, exitCodeFor } from './errors.ts'
import { processIo, type Io } from './io.ts'

/** Splits `argv` at the first `--`: porticoctl's own arguments, and the URL and curl arguments. */
export function splitPassthrough (argv: string[]): { own: string[], passthrough: string[] } {
  const at = argv.indexOf('--')
  return at === -1 ? { own: argv, passthrough: [] } : { own: argv.slice(0, at), passthrough: argv.slice(at + 1) }
}

export async function main (argv: string[], io: Io = processIo, extra: Partial<ProgramContext> = {}): Promise<number> {
  const { own, passthrough } = splitPassthrough(argv)
  const program = buildProgram({ ...extra, io, passthrough })
  try {
    await program.parseAsync(own, { from: 'user' })
    return EXIT_OK
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) return EXIT_OK
      if (err.code !== 'commander.help') {
        io.stderr.write(`porticoctl: ${err.message.replace(/^error: /, '')}\n(run with --help for usage)\n`)
      }
      return EXIT_USAGE
    }
    if (err instanceof CliError) {
      io.stderr.write(`porticoctl: ${err.message}\n`)
      return exitCodeFor(err.code)
    }
    io.stderr.write(`porticoctl: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`)
    return EXIT_RUNTIME
  }
}
