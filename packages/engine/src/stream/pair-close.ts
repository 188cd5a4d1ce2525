/**
 * Closing one socket of a relayed pair (a TCP/TLS route's client and backend, the primary's
 * client and worker) after the other has closed.
 *
 * A clean close of one side comes after its end was passed on: the other socket was told to
 * end, but may still hold bytes its peer has not taken -- the last bytes a backend sent before
 * closing, waiting for a slow client. Destroying it then drops them (a socket keeps up to its
 * high-water mark, 64 KiB, while `write` still says go on). So it ends on its own once they
 * are written; a socket that was not told to end (the other side went away without ending,
 * a reset or an idle cut) or holds nothing is closed at once.
 */

import type { Socket } from 'node:net'

/**
 * Closes `socket` once what it holds is written, at the latest after `lingerMs` (none: until
 * its owner's own timeouts end it), or at once when it was not ended or holds nothing.
 */
export function closeWhenFlushed (socket: Socket, lingerMs?: number): void {
  if (socket.destroyed) return
  if (!socket.writableEnded || socket.writableFinished) {
    socket.destroy()
    return
  }
  const timer = lingerMs === undefined ? undefined : setTimeout(() => socket.destroy(), lingerMs).unref()
  // Written out: its peer has every byte and the end; reading on has no one to pass to.
  socket.once('finish', () => socket.destroy())
  if (timer !== undefined) socket.once('close', () => clearTimeout(timer))
}
