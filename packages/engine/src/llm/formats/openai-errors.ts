/**
 * OpenAI's error body, `{error: {message, type, param, code}}`, shared by the two OpenAI wire
 * formats (chat completions and Responses answer errors alike). Types and codes are the ones
 * OpenAI's API actually returns: a bad key is a 401 with `type: invalid_request_error` and
 * `code: invalid_api_key`; a rate limit a 429 with `code: rate_limit_exceeded` (`type` names
 * the limit: `requests` or `tokens`); server trouble `type: server_error`. The SDK picks its
 * error class from the status; `type`, `param` and `code` are what applications read.
 */

import { translationError, type TranslationError } from '../canonical.ts'

const TYPES: Record<TranslationError['kind'], [type: string, code: string | null]> = {
  invalid_request: ['invalid_request_error', null],
  authentication: ['invalid_request_error', 'invalid_api_key'],
  permission: ['invalid_request_error', null],
  not_found: ['invalid_request_error', null],
  rate_limit: ['requests', 'rate_limit_exceeded'],
  overloaded: ['server_error', null],
  api_error: ['server_error', null],
  timeout: ['server_error', null]
}

/** The `code` an OpenAI error of this kind carries, or null. */
export function openAIErrorCode (error: TranslationError): string | null {
  return TYPES[error.kind][1]
}

export function encodeOpenAIError (error: TranslationError): Record<string, unknown> {
  const [type, code] = TYPES[error.kind]
  return { error: { message: error.message, type, param: error.field ?? null, code } }
}

function kindForStatus (status: number): TranslationError['kind'] {
  if (status === 401) return 'authentication'
  if (status === 403) return 'permission'
  if (status === 404) return 'not_found'
  if (status === 429) return 'rate_limit'
  if (status === 408 || status === 504) return 'timeout'
  if (status === 503 || status === 529) return 'overloaded'
  if (status >= 400 && status < 500) return 'invalid_request'
  return 'api_error'
}

/** A provider's OpenAI-shaped error answer. A 200 carrying an error body is the provider's fault (502). */
export function decodeOpenAIError (status: number, body: unknown): TranslationError {
  const error = body !== null && typeof body === 'object' && !Array.isArray(body) && 'error' in body ? (body as { error: unknown }).error : null
  const fields = error !== null && typeof error === 'object' ? error as Record<string, unknown> : {}
  const message = typeof fields.message === 'string' && fields.message !== '' ? fields.message : `the provider answered ${status}`
  const outStatus = status >= 400 ? status : 502
  const param = typeof fields.param === 'string' ? fields.param : undefined
  return translationError(outStatus, status >= 400 ? kindForStatus(status) : 'api_error', message, param)
}
