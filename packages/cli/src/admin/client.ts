/**
 * Plain HTTP calls to an instance's admin server (undici), turning "nothing listens there"
 * into the instance's own "cannot reach" error.
 */

import { request } from 'undici'
import { cliError } from '../errors.ts'
import type { Instance } from '../targets/types.ts'

/** undici and socket error codes that mean the admin server is not there. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED'])

export function isUnreachable (err: unknown): boolean {
  const e = err as { code?: string, cause?: { code?: string } } | null
  return UNREACHABLE.has(e?.code ?? '') || UNREACHABLE.has(e?.cause?.code ?? '')
}

export interface AdminCall {
  method?: 'GET' | 'POST'
  path: string
  /** Query parameters; an array value repeats the parameter. */
  query?: Record<string, string | string[] | undefined>
}

export interface AdminAnswer {
  status: number
  text: string
}

export function adminUrl (instance: Instance, call: AdminCall): string {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(call.query ?? {})) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) params.append(name, v)
  }
  const q = params.toString()
  return `${instance.adminUrl}${call.path}${q === '' ? '' : `?${q}`}`
}

/** One request; any HTTP status is returned, transport failures throw "cannot reach". */
export async function adminCall (instance: Instance, call: AdminCall): Promise<AdminAnswer> {
  try {
    const res = await request(adminUrl(instance, call), { method: call.method ?? 'GET', headersTimeout: 30_000, bodyTimeout: 30_000 })
    return { status: res.statusCode, text: await res.body.text() }
  } catch (err) {
    if (isUnreachable(err)) throw cliError('PORTICOCTL_ADMIN_UNREACHABLE', instance.unreachable, err)
    throw err
  }
}

/** A 2xx answer's text, or an "answered STATUS" error. */
export async function adminText (instance: Instance, call: AdminCall): Promise<string> {
  const answer = await adminCall(instance, call)
  if (answer.status < 200 || answer.status > 299) {
    throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: ${call.method ?? 'GET'} ${call.path} answered ${answer.status}: ${answer.text.trim()}`)
  }
  return answer.text
}

export async function adminJson<T> (instance: Instance, call: AdminCall): Promise<T> {
  const text = await adminText(instance, call)
  try {
    return JSON.parse(text) as T
  } catch (err) {
    throw cliError('PORTICOCTL_ADMIN_ERROR', `${instance.label}: ${call.path} did not answer JSON (is this a portico admin server?)`, err)
  }
}
