/**
 * Reading a file a config names (a TLS certificate, key or CA bundle, a JWKS, an htpasswd
 * file): the one reader every `file:`-style field goes through, so each gets the same limits.
 *
 * - A regular file only. The file is opened with O_NONBLOCK and checked with fstat before a
 *   byte is read: a FIFO cannot block the open or the read (no writer need ever come), and a
 *   device (`/dev/zero`, `/dev/urandom`), a directory or a socket is refused unread -- as
 *   nginx's ngx_open_cached_file refuses what is not a regular file where it expects one.
 * - At most `maxBytes` (the config file's own limit, DEFAULT_MAX_CONFIG_BYTES unless
 *   --max-config-size says otherwise): a larger file is refused by its size, unread; one that
 *   grows while it is read is refused after at most `maxBytes + 1` bytes.
 *
 * It reads synchronously: the loader is synchronous (config -> IR is one pure pass). What keeps
 * it off the event loop that serves requests is where it runs -- `portico -f` and --validate
 * before anything listens, and a reload that names any file in the config-load worker thread
 * (packages/proxy/src/config-loader.ts).
 */

import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs'
import { resolve as resolvePath } from 'node:path'
import { PorticoError } from '../util/errors.ts'

/** What a path that is not a regular file is, in the words of the error message. */
function kindOf (stat: Stats): string {
  if (stat.isDirectory()) return 'a directory'
  if (stat.isFIFO()) return 'a FIFO (named pipe)'
  if (stat.isCharacterDevice()) return 'a character device'
  if (stat.isBlockDevice()) return 'a block device'
  if (stat.isSocket()) return 'a socket'
  return 'not a regular file'
}

/** `file is N bytes, limit M` -- the message of a file over the limit (`N` unknown: `more than M`). */
export function fileTooLargeMessage (bytes: number | undefined, maxBytes: number): string {
  return bytes === undefined
    ? `file is more than ${maxBytes} bytes, limit ${maxBytes} (--max-config-size)`
    : `file is ${bytes} bytes, limit ${maxBytes} (--max-config-size)`
}

/**
 * Reads what is left of an open descriptor, at most `maxBytes`; `tooLarge` builds the error
 * thrown when there is more. One loop for the config file (load.ts readConfigText, which
 * also reads pipes) and for the files it names.
 */
export function readBounded (fd: number, sizeHint: number, maxBytes: number, tooLarge: () => Error): Buffer {
  const chunks: Buffer[] = []
  let total = 0
  const chunk = Buffer.allocUnsafe(Math.min(maxBytes + 1, Math.max(sizeHint + 1, 64 * 1024)))
  for (;;) {
    const n = readSync(fd, chunk, 0, chunk.length, null)
    if (n === 0) break
    total += n
    if (total > maxBytes) throw tooLarge()
    chunks.push(Buffer.from(chunk.subarray(0, n)))
  }
  return Buffer.concat(chunks, total)
}

/**
 * The file at `path` as UTF-8. Throws PORTICO_REFERENCED_FILE (not a regular file, over the
 * limit) or the file system's error (ENOENT, EACCES); either's message or code is what the
 * caller reports after `cannot read PATH: `.
 */
export function readReferencedFile (path: string, maxBytes: number): string {
  const { fd, stat } = openRegularFile(path)
  try {
    if (stat.size > maxBytes) throw new PorticoError('PORTICO_REFERENCED_FILE', fileTooLargeMessage(stat.size, maxBytes))
    return readBounded(fd, stat.size, maxBytes, () => new PorticoError('PORTICO_REFERENCED_FILE', fileTooLargeMessage(undefined, maxBytes))).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * Opens `path` for reading if it is a regular file; the caller closes the descriptor. Anything
 * else throws PORTICO_REFERENCED_FILE without a byte read (and the descriptor closed).
 */
export function openRegularFile (path: string): { fd: number, stat: Stats } {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
  // O_NOCTTY: a terminal named by mistake does not become the controlling one.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new PorticoError('PORTICO_REFERENCED_FILE', `${kindOf(stat)}, not a regular file (not read)`)
    return { fd, stat }
  } catch (err) {
    closeSync(fd)
    throw err
  }
}

/** Why a referenced file could not be read, for `cannot read PATH: <why>`: the message we wrote, else the errno code. */
export function referencedFileProblem (err: unknown): string {
  if (err instanceof PorticoError) return err.message
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message ?? String(err)
}

type Path = Array<string | number>

/** What reading a file field needs: where relative paths start, the reader, where problems go. */
export interface FileFieldContext {
  baseDir: string
  readFile: (path: string) => string
  report: (path: Path, message: string) => void
}

/**
 * The file a config field names, resolved against the config's directory and read; on any
 * problem one error at the field (`cannot read PATH: why`) and undefined.
 */
export function readFileField (file: string, at: Path, ctx: FileFieldContext): { full: string, text: string } | undefined {
  const full = resolvePath(ctx.baseDir, file)
  try {
    return { full, text: ctx.readFile(full) }
  } catch (err) {
    ctx.report(at, `cannot read ${full}: ${referencedFileProblem(err)}`)
    return undefined
  }
}

/** A PEM file field (certificate, key, CA bundle): read as readFileField, and refused when it holds no PEM block. */
export function readPemField (file: string, at: Path, ctx: FileFieldContext): string | undefined {
  const read = readFileField(file, at, ctx)
  if (read === undefined) return undefined
  if (!read.text.includes('-----BEGIN ')) {
    ctx.report(at, `${read.full} is not a PEM file`)
    return undefined
  }
  return read.text
}
