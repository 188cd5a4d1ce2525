/**
 * Sends inject mode's request: to `to` (127.0.0.1:<port>, or a port-forward), with the
 * URL's path and query, and the URL's host as the Host header — the name is never resolved.
 * For https:// URLs the TLS server name is the URL's host; `-k` skips verification.
 */

import { isIP } from 'node:net'
import { Agent, request } from 'undici'
import { cliError } from '../errors.ts'
import type { Address } from '../targets/types.ts'
import type { CurlRequest } from './curl-args.ts'
import { version } from '../version.ts'

export interface SendOptions {
  request: CurlRequest
  to: Address
  /** The header that tags this request for the armed trace. */
  tag: [name: string, value: string]
  /** Where `-v` writes (stderr). */
  verboseOut?: NodeJS.WritableStream
  timeoutMs?: number
  /** Said when the connection is refused: which port was chosen, and how to pick another. */
  portHint?: string
}

export interface SendResult {
  status: number
  headers: Record<string, string | string[] | undefined>
}

/** The headers sent, in order: defaults (User-Agent, Accept), the user's, then the tag. */
export function requestHeaders (req: CurlRequest, tag: [string, string]): Array<[string, string]> {
  const out: Array<[string, string]> = []
  const given = new Set(req.headers.map(([n]) => n.toLowerCase()))
  const add = (name: string, value: string) => {
    if (!given.has(name.toLowerCase()) && !req.removed.includes(name.toLowerCase())) out.push([name, value])
  }
  add('Host', req.url.host)
  add('User-Agent', `porticoctl/${version}`)
  add('Accept', '*/*')
  out.push(...req.headers)
  out.push(tag)
  return out
}

export async function sendRequest (options: SendOptions): Promise<SendResult> {
  const req = options.request
  const https = req.url.protocol === 'https:'
  const hostForTls = req.url.hostname.replace(/^\[|\]$/g, '')
  const dispatcher = new Agent({
    connect: https ? { servername: isIP(hostForTls) === 0 ? hostForTls : undefined, rejectUnauthorized: !req.insecure } : {},
    headersTimeout: options.timeoutMs ?? 60_000,
    bodyTimeout: options.timeoutMs ?? 60_000
  })
  const path = `${req.url.pathname}${req.url.search}`
  const headers = requestHeaders(req, options.tag)
  const origin = `${https ? 'https' : 'http'}://${options.to.host.includes(':') ? `[${options.to.host}]` : options.to.host}:${options.to.port}`
  const v = req.verbose ? options.verboseOut : undefined
  v?.write(`* Connected to ${options.to.host} port ${options.to.port} (Host: ${req.url.host})\n`)
  v?.write(`> ${req.method} ${path} HTTP/1.1\n`)
  for (const [n, val] of headers) v?.write(`> ${n}: ${val}\n`)
  v?.write('>\n')
  try {
    const res = await request(`${origin}${path}`, {
      method: req.method as 'GET',
      headers: headers.flat(),
      body: req.body ?? undefined,
      dispatcher
    })
    v?.write(`< HTTP/1.1 ${res.statusCode}\n`)
    for (const [n, val] of Object.entries(res.headers)) {
      for (const one of Array.isArray(val) ? val : [val]) v?.write(`< ${n}: ${one ?? ''}\n`)
    }
    v?.write('<\n')
    // Read (and drop) the body so the request finishes and its trace completes.
    for await (const _chunk of res.body) { /* discard */ }
    return { status: res.statusCode, headers: res.headers }
  } catch (err) {
    throw cliError('PORTICOCTL_REQUEST_FAILED', `the request to ${origin}${path} (Host: ${req.url.host}) failed: ${describeSendError(err, options.portHint)}`, err)
  } finally {
    dispatcher.close().catch(() => {})
  }
}

function describeSendError (err: unknown, portHint = 'is --port the listener port?'): string {
  const e = err as { code?: string, message?: string, cause?: { code?: string, message?: string } }
  const code = e.code ?? e.cause?.code
  if (code === 'ECONNREFUSED') return `connection refused (${portHint})`
  if (code !== undefined && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return `${e.message ?? code} (use -k to skip certificate verification)`
  return e.message ?? String(err)
}
