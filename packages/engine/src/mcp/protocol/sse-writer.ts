/**
 * SSE on an HTTP response, and the finish step of an answer's head. Client-facing answers
 * (client/) and the session's own stream (session/) both write SSE through SseWriter; an
 * upstream 2026-07-28 forward (upstream/) hands its head to the same HeadHook. So they live
 * on the floor of mcp/, which imports no other room of it.
 */

import type { InboundResponse } from '../../http/inbound.ts'

/** The head to write; null when the finish step answered the request itself (the stream is over). */
export type Head = { status: number, headers: Record<string, string | string[]> } | null

/**
 * The finish step of an answer's head, passed in by mcp/client/http.ts (the pipeline's response
 * policies and trace, as for every other answer): given the status and the headers the
 * answer would send, returns the head to write — at once, or once an asynchronous response
 * policy (extProc) has answered; what is sent meanwhile waits.
 */
export type HeadHook = (status: number, headers: Record<string, string>) => Head | Promise<Head>

/** Writes the head as it is (a channel nobody finishes, in unit tests). */
export const PLAIN_HEAD: HeadHook = (status, headers) => ({ status, headers })

/** Calls `then` with the hook's head: at once when it has it, else when it comes. */
export function withHead (res: InboundResponse, head: Head | Promise<Head>, then: (head: NonNullable<Head>) => void): void {
  if (!(head instanceof Promise)) {
    if (head !== null && !res.headersSent && !res.destroyed) then(head)
    return
  }
  head.then(h => {
    if (h !== null && !res.headersSent && !res.destroyed) then(h)
  }, (err: Error) => res.destroy(err))
}

/** Writes SSE frames to one HTTP response. */
export class SseWriter {
  readonly res: InboundResponse
  private keepalive: NodeJS.Timeout | undefined
  /** Frames written while the head waits for an asynchronous response policy; null once it is out. */
  private pending: string[] | null = null
  private endPending = false

  constructor (res: InboundResponse, headers: Record<string, string>, head: HeadHook = PLAIN_HEAD, keepaliveMs = 15_000) {
    this.res = res
    if (!res.headersSent) {
      const h = head(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
        ...headers
      })
      if (h instanceof Promise) this.pending = []
      withHead(res, h, ({ status, headers }) => {
        res.writeHead(status, headers)
        res.flushHeaders()
        const frames = this.pending ?? []
        this.pending = null
        for (const frame of frames) res.write(frame)
        if (this.endPending) res.end()
      })
    }
    if (keepaliveMs > 0) {
      this.keepalive = setInterval(() => { if (this.open && this.pending === null) res.write(': keepalive\n\n') }, keepaliveMs)
      this.keepalive.unref()
      res.once('close', () => clearInterval(this.keepalive))
    }
  }

  get open (): boolean {
    return !this.res.destroyed && !this.res.writableEnded
  }

  event (data: string, id?: string, event?: string): void {
    if (!this.open) return
    let frame = ''
    if (event !== undefined) frame += `event: ${event}\n`
    if (id !== undefined) frame += `id: ${id}\n`
    frame += `data: ${data}\n\n`
    if (this.pending !== null) this.pending.push(frame)
    else this.res.write(frame)
  }

  end (): void {
    clearInterval(this.keepalive)
    if (this.pending !== null) this.endPending = true
    else if (this.open) this.res.end()
  }
}
