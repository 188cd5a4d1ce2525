/**
 * What a failed backend call becomes for the client: the status, reason and body of the
 * proxy's answer for each transport error (timeouts 504, a client body cut short 408, a
 * request Node refused 400, a malformed response 502, anything else 503).
 */

import { isPorticoError } from '../util/errors.ts'

export interface Failure {
  status: number
  reason: 'Timeout' | 'UpstreamFailure' | 'InvalidRequest' | 'DownstreamClosed'
  body: string
  detail: string
}

/** Maps a transport error to the answer the client gets. */
export function classifyFailure (err: Error, timedOut: string | null): Failure {
  const code = (err as NodeJS.ErrnoException).code ?? ''
  const detail = code !== '' ? `${code}: ${err.message}` : err.message
  if (timedOut !== null) return { status: 504, reason: 'Timeout', body: timedOut, detail: timedOut }
  // The client stopped sending its body (http/frontend.ts: requestBodyIdleTimeout).
  if (isPorticoError(err, 'PORTICO_REQUEST_BODY_TIMEOUT')) return { status: 408, reason: 'Timeout', body: 'request body timeout', detail: err.message }
  // The backend's answer stopped moving (streamIdleTimeout): its head is out, so the stream is cut.
  if (isPorticoError(err, 'PORTICO_STREAM_IDLE_TIMEOUT')) return { status: 504, reason: 'Timeout', body: 'upstream call timeout', detail: err.message }
  // Node's parser refused the rest of the request (a bad chunk size, say).
  if (code.startsWith('HPE_')) return { status: 400, reason: 'InvalidRequest', body: 'bad request', detail }
  switch (code) {
    case 'PORTICO_UPSTREAM_HEADERS_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { status: 504, reason: 'Timeout', body: 'upstream call timeout', detail }
    case 'PORTICO_REQUEST_LENGTH_MISMATCH':
    case 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH':
      return { status: 400, reason: 'InvalidRequest', body: 'invalid request: body does not match content-length', detail }
    case 'PORTICO_UPSTREAM_PROTOCOL':
      // A response that breaks HTTP/1.1 framing is refused whole (RFC 9112 asks a proxy for a 502).
      return { status: 502, reason: 'UpstreamFailure', body: err.message, detail }
    case 'PORTICO_HBONE_CONNECT_REFUSED':
      // The mesh peer (ztunnel) answered the tunnel's CONNECT with an error: a bad gateway.
      return { status: 502, reason: 'UpstreamFailure', body: `upstream mesh tunnel refused: ${err.message}`, detail }
    case 'PORTICO_MESH_PEER_IDENTITY':
    case 'PORTICO_MESH_NO_IDENTITY':
    case 'PORTICO_HBONE_FAILED':
      return { status: 503, reason: 'UpstreamFailure', body: `upstream mesh tunnel failed: ${err.message}`, detail }
    case 'ECONNABORTED':
    case 'ERR_STREAM_PREMATURE_CLOSE':
      return { status: 400, reason: 'DownstreamClosed', body: 'request body incomplete', detail }
    default:
      if (TLS_FAILURE.test(code)) {
        // Certificate verification, name mismatch or a refused handshake (backendTLS).
        const message = err.message.replace(/; if the root CA is installed locally.*$/, '')
        return { status: 503, reason: 'UpstreamFailure', body: `upstream TLS failed: ${message}`, detail: `${code}: ${message}` }
      }
      return { status: 503, reason: 'UpstreamFailure', body: `upstream call failed: ${err.message}`, detail }
  }
}

/** Error codes of a failed TLS handshake with a backend (OpenSSL verification codes, Node's TLS errors). */
const TLS_FAILURE = /^(ERR_SSL_|ERR_TLS_)|CERT|SELF_SIGNED|^UNABLE_TO_/
