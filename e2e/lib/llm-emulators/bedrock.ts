/**
 * An AWS Bedrock Runtime emulator on loopback, for what cannot run here: `POST
 * /model/{modelId}/converse` and `/model/{modelId}/converse-stream` (and `/model/{modelId}/invoke`
 * for the Titan and Cohere embedding models, see `invokeEmbeddings`), answering recorded
 * transcripts (the golden fixtures of packages/engine/test/golden/llm/bedrock-converse/): a
 * Converse JSON answer, a ConverseStream answer as the real binary event-stream frames, or an
 * error as Bedrock sends it (`{message}` with the `x-amzn-ErrorType` header).
 *
 * Every request must be authorised as Bedrock requires: a SigV4 signature, VERIFIED by
 * recomputing it with the AWS SDK's own signer (`@smithy/signature-v4`) from the known test
 * credentials over the request as received (method, path, query, the signed headers, the body),
 * or a Bedrock API key as a bearer token. A bad or missing signature is refused as Bedrock
 * refuses it: 403 with `InvalidSignatureException` / `UnrecognizedClientException` /
 * `MissingAuthenticationTokenException`. Like Bedrock it speaks HTTP/2 (the SDK's default
 * handler is HTTP/2 only: cleartext HTTP/2 with prior knowledge on loopback) and HTTP/1.1 (what
 * most gateways send), on one port. The emulator is itself checked by the official
 * `@aws-sdk/client-bedrock-runtime` talking to it directly (e2e/test/llm-emulator-bedrock.test.ts).
 */

import { randomUUID, timingSafeEqual } from 'node:crypto'
import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'
import http from 'node:http'
import http2 from 'node:http2'
import net from 'node:net'
import { Duplex, PassThrough } from 'node:stream'
import type { Backend } from '@portico/testkit/backends'

/** The part of `@smithy/signature-v4` used here (its types live in the engine's dependencies). */
interface SignerInit {
  service: string
  region: string
  credentials: { accessKeyId: string, secretAccessKey: string, sessionToken?: string }
  sha256: unknown
  applyChecksum?: boolean
}
interface SignableRequest {
  method: string
  protocol: string
  hostname: string
  path: string
  query: Record<string, string | string[]>
  headers: Record<string, string>
  body: Buffer
}
type SignerClass = new (init: SignerInit) => { sign: (request: SignableRequest, options: { signingDate: Date }) => Promise<{ headers: Record<string, string> }> }

// The AWS signer is an engine dependency: resolved from there, not added to e2e.
const engineRequire = createRequire(import.meta.resolve('@portico/engine'))
const { SignatureV4 } = engineRequire('@smithy/signature-v4') as { SignatureV4: SignerClass }
const { Hash } = engineRequire('@smithy/hash-node') as { Hash: { bind: (thisArg: null, algorithm: string) => unknown } }

/** The recorded transcripts: the Bedrock golden fixtures of the engine's tests. */
export const BEDROCK_TRANSCRIPTS = path.join(import.meta.dirname, '..', '..', '..', 'packages', 'engine', 'test', 'golden', 'llm', 'bedrock-converse')

/** Obviously fake credentials the emulator accepts (and test clients sign with). */
export const BEDROCK_TEST_CREDENTIALS = { accessKeyId: 'AKIDPORTICOTESTONLY', secretAccessKey: 'portico-test-secret-not-a-real-key' }
export const BEDROCK_TEST_API_KEY = 'bedrock-api-key-portico-test-not-real'

/**
 * What the emulator answers: a recorded case of responses/, streams/ (.b64) or errors/. A
 * stream can be cut after `cutAtByte` bytes (the connection then ends: a provider that died
 * mid-frame); `cut-tool-call` is a recorded stream that stops inside a tool call.
 */
export type BedrockAnswer = { response: string } | { stream: string, cutAtByte?: number } | { error: string }

export interface BedrockCall {
  modelId: string
  streaming: boolean
  body: Record<string, unknown>
  headers: http.IncomingHttpHeaders
  /** How it was authorised. */
  auth: 'sigv4' | 'bearer'
  /** `invoke` for InvokeModel (embeddings); absent for Converse. */
  operation?: 'invoke'
}

export interface BedrockEmulatorOptions {
  region?: string
  credentials?: { accessKeyId: string, secretAccessKey: string, sessionToken?: string }
  apiKey?: string
  /** Picks the transcript; default: tool calls when tools are offered, else text. */
  answer?: (call: BedrockCall) => BedrockAnswer
  /** Pause between stream frames, to show they are forwarded one by one. */
  frameDelayMs?: number
}

export interface BedrockEmulator extends Backend {
  calls: BedrockCall[]
  /** Requests refused for their authorisation, with the exception type sent. */
  refused: string[]
}

function defaultAnswer (call: BedrockCall): BedrockAnswer {
  const tools = call.body.toolConfig !== undefined
  if (call.streaming) return { stream: tools ? 'tool-calls' : 'text' }
  return { response: tools ? 'tool-calls' : 'text' }
}

/** AWS's `x-amzn-ErrorType` carries the type and the service namespace; SDKs keep the part before `:`. */
type Req = http.IncomingMessage | http2.Http2ServerRequest
/** What the emulator uses of a response, the same for HTTP/1.1 and HTTP/2. */
interface Res {
  readonly headersSent: boolean
  writeHead: (status: number, headers: Record<string, string | number>) => unknown
  write: (chunk: Buffer) => boolean
  end: (data?: string) => unknown
  once: (event: 'close', listener: () => void) => unknown
}

function sendError (res: Res, status: number, type: string, message: string): void {
  const body = JSON.stringify({ message })
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
    'x-amzn-requestid': randomUUID()
  })
  res.end(body)
}

/** The messages of a recorded stream, one buffer each (their first 4 bytes are the length). */
export function splitFrames (bytes: Buffer): Buffer[] {
  const out: Buffer[] = []
  for (let at = 0; at < bytes.length;) {
    // A cut stream's last frame is shorter than its length says: sent as it is.
    const length = at + 4 <= bytes.length ? bytes.readUInt32BE(at) : bytes.length - at
    out.push(bytes.subarray(at, at + length))
    at += length
  }
  return out
}

const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;:-]+), ?Signature=([0-9a-f]{64})$/

/** `20261205T090000Z` → Date. */
function amzDate (value: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value)
  return m === null ? null : new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`)
}

type Refusal = [status: number, type: string, message: string]

const SIGNATURE_MISMATCH = 'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.'

/**
 * Verifies a SigV4-signed request by signing the same request again with the SDK's signer: the
 * canonical request is rebuilt from what arrived (only the headers the client listed as signed),
 * the payload hash from the body received — so a changed body, path, or signed header fails.
 */
async function verifySigV4 (req: Req, body: Buffer, options: Required<Pick<BedrockEmulatorOptions, 'region' | 'credentials'>>): Promise<Refusal | null> {
  const authorization = req.headers.authorization ?? ''
  const m = AUTH.exec(authorization)
  if (m === null) return [403, 'IncompleteSignatureException', 'Authorization header requires \'Credential\', \'Signature\' and \'SignedHeaders\' parameters.']
  const [, keyId, , region, service, signedList, signature] = m as unknown as string[]
  if (keyId !== options.credentials.accessKeyId) return [403, 'UnrecognizedClientException', 'The security token included in the request is invalid.']
  if (service !== 'bedrock') return [403, 'InvalidSignatureException', `Credential should be scoped to correct service: 'bedrock'.`]
  if (region !== options.region) return [403, 'InvalidSignatureException', `Credential should be scoped to a valid region.`]
  const date = amzDate(String(req.headers['x-amz-date'] ?? ''))
  if (date === null) return [403, 'IncompleteSignatureException', 'Date must be in ISO-8601 \'basic format\'.']
  if (Math.abs(Date.now() - date.getTime()) > 15 * 60_000) return [403, 'InvalidSignatureException', 'Signature expired: the request time is more than 15 minutes from the current time.']
  const signed = (signedList ?? '').split(';')
  // The SDK's HTTP/2 handler signs the `:authority` pseudo-header in place of `host`.
  if (!signed.includes('host') && !signed.includes(':authority')) return [403, 'InvalidSignatureException', '\'Host\' or \':authority\' must be a \'SignedHeader\' in the AWS Authorization.']
  if (!signed.includes('x-amz-date')) return [403, 'InvalidSignatureException', '\'X-Amz-Date\' must be a \'SignedHeader\' in the AWS Authorization.']
  if (options.credentials.sessionToken !== undefined && req.headers['x-amz-security-token'] !== options.credentials.sessionToken) {
    return [403, 'UnrecognizedClientException', 'The security token included in the request is invalid.']
  }
  const headers: Record<string, string> = {}
  for (const name of signed) {
    // Over HTTP/2 the host is the :authority pseudo-header.
    const value = req.headers[name] ?? (name === 'host' ? req.headers[':authority'] : undefined)
    if (value === undefined) return [403, 'InvalidSignatureException', SIGNATURE_MISMATCH]
    headers[name] = Array.isArray(value) ? value.join(',') : value
  }
  // The payload hash is always computed from the body received, never taken from the header.
  const sha256Signed = 'x-amz-content-sha256' in headers
  delete headers['x-amz-content-sha256']
  const url = new URL(req.url ?? '/', 'http://emulator')
  const query: Record<string, string | string[]> = {}
  for (const [k, v] of url.searchParams) {
    const prev = query[k]
    query[k] = prev === undefined ? v : [...(Array.isArray(prev) ? prev : [prev]), v]
  }
  const signer = new SignatureV4({ service: 'bedrock', region: options.region, credentials: options.credentials, sha256: Hash.bind(null, 'sha256'), applyChecksum: sha256Signed })
  const again = await signer.sign({
    method: req.method ?? 'POST',
    protocol: 'http:',
    hostname: headers.host ?? headers[':authority'] ?? '',
    path: (req.url ?? '/').split('?')[0] ?? '/',
    query,
    headers,
    body
  }, { signingDate: date })
  const expected = /Signature=([0-9a-f]{64})/.exec(String(again.headers.authorization ?? again.headers.Authorization))?.[1] ?? ''
  const a = Buffer.from(expected)
  const b = Buffer.from(signature ?? '')
  if (a.length !== b.length || !timingSafeEqual(a, b)) return [403, 'InvalidSignatureException', SIGNATURE_MISMATCH]
  return null
}

const PATH = /^\/model\/([^/]+)\/(converse|converse-stream|invoke)$/

/**
 * InvokeModel for the embedding models (Bedrock's model-parameter references): Amazon Titan Text
 * Embeddings (`{inputText, dimensions?, normalize?, embeddingTypes?}` → `{embedding,
 * inputTextTokenCount}`) and Cohere Embed (`{texts, input_type, truncate?, embedding_types?}` →
 * `{id, embeddings, response_type: "embeddings_floats", texts}`, the token count only in the
 * `X-Amzn-Bedrock-Input-Token-Count` header, which Bedrock sets on every InvokeModel answer).
 * Other models are not emulated (a ValidationException).
 */
function invokeEmbeddings (res: Res, call: BedrockCall, requestId: string): void {
  const body = call.body
  const validation = (message: string): void => sendError(res, 400, 'ValidationException', message)
  const vector = (n: number, seed: number): number[] => Array.from({ length: n }, (_, k) => Math.round(((k + 1) * 0.125 + seed) * 1000) / 1000)
  const send = (value: unknown, inputTokens: number): void => {
    const text = JSON.stringify(value)
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-amzn-requestid': requestId, 'x-amzn-bedrock-input-token-count': String(inputTokens), 'x-amzn-bedrock-invocation-latency': '12' })
    res.end(text)
  }
  if (call.modelId.startsWith('amazon.titan-embed-text')) {
    for (const key of Object.keys(body)) if (!['inputText', 'dimensions', 'normalize', 'embeddingTypes'].includes(key)) return validation(`Malformed input request: #: extraneous key [${key}] is not permitted, please reformat your input and try again.`)
    if (typeof body.inputText !== 'string') return validation('Malformed input request: #: required key [inputText] not found, please reformat your input and try again.')
    const dims = typeof body.dimensions === 'number' ? body.dimensions : 4
    const tokens = body.inputText.split(/\s+/).length
    return send({ embedding: vector(dims, 0), inputTextTokenCount: tokens }, tokens)
  }
  if (call.modelId.startsWith('cohere.embed-')) {
    for (const key of Object.keys(body)) if (!['texts', 'input_type', 'truncate', 'embedding_types', 'output_dimension', 'images'].includes(key)) return validation(`Malformed input request: #: extraneous key [${key}] is not permitted, please reformat your input and try again.`)
    if (!Array.isArray(body.texts) || !body.texts.every(t => typeof t === 'string')) return validation('Malformed input request: #/texts: expected type: JSONArray, please reformat your input and try again.')
    if (typeof body.input_type !== 'string') return validation('Malformed input request: #: required key [input_type] not found, please reformat your input and try again.')
    const texts = body.texts as string[]
    const tokens = texts.reduce((n, t) => n + t.split(/\s+/).length, 0)
    return send({ id: requestId, embeddings: texts.map((_, i) => vector(4, i)), response_type: 'embeddings_floats', texts }, tokens)
  }
  validation(`The provided model identifier is invalid for this emulator: ${call.modelId}`)
}

export async function startBedrockEmulator (options: BedrockEmulatorOptions = {}): Promise<BedrockEmulator> {
  const region = options.region ?? 'us-east-1'
  const credentials = options.credentials ?? BEDROCK_TEST_CREDENTIALS
  const apiKey = options.apiKey ?? BEDROCK_TEST_API_KEY
  const choose = options.answer ?? defaultAnswer
  const calls: BedrockCall[] = []
  const refused: string[] = []

  const handle = async (req: Req, res: Res, body: Buffer): Promise<void> => {
    const pathname = (req.url ?? '').split('?')[0] ?? ''
    const route = PATH.exec(pathname)
    if (req.method !== 'POST' || route === null) return sendError(res, 404, 'UnknownOperationException', 'Unknown operation')
    // Authorisation first, as AWS does: an unsigned request learns nothing about the API.
    const authorization = req.headers.authorization
    let auth: BedrockCall['auth']
    if (authorization === undefined) {
      refused.push('MissingAuthenticationTokenException')
      return sendError(res, 403, 'MissingAuthenticationTokenException', 'Missing Authentication Token')
    } else if (authorization.startsWith('Bearer ')) {
      const given = Buffer.from(authorization.slice(7))
      const known = Buffer.from(apiKey)
      if (given.length !== known.length || !timingSafeEqual(given, known)) {
        refused.push('UnrecognizedClientException')
        return sendError(res, 403, 'UnrecognizedClientException', 'The security token included in the request is invalid.')
      }
      auth = 'bearer'
    } else {
      const refusal = await verifySigV4(req, body, { region, credentials })
      if (refusal !== null) {
        refused.push(refusal[1])
        return sendError(res, ...refusal)
      }
      auth = 'sigv4'
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(body.toString('utf8'))
    } catch {
      return sendError(res, 400, 'ValidationException', 'Malformed input request, please reformat your input and try again.')
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return sendError(res, 400, 'ValidationException', 'Malformed input request, please reformat your input and try again.')
    const call: BedrockCall = { modelId: decodeURIComponent(route[1] ?? ''), streaming: route[2] === 'converse-stream', body: parsed as Record<string, unknown>, headers: req.headers, auth }
    if (route[2] === 'invoke') call.operation = 'invoke'
    calls.push(call)
    if (route[2] === 'invoke') return invokeEmbeddings(res, call, randomUUID())
    const messages = call.body.messages
    if (!Array.isArray(messages) || messages.length === 0) return sendError(res, 400, 'ValidationException', 'A conversation must start with a user message. Try again with a conversation that starts with a user message.')
    if ('modelId' in call.body) return sendError(res, 400, 'ValidationException', 'Malformed input request: extraneous key [modelId] is not permitted, please reformat your input and try again.')

    const answer = choose(call)
    const requestId = randomUUID()
    if ('error' in answer) {
      const file = path.join(BEDROCK_TRANSCRIPTS, 'errors', answer.error)
      const status = Number(fs.readFileSync(`${file}.status`, 'utf8'))
      const type = fs.readFileSync(`${file}.type`, 'utf8').trim()
      const message = (JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as { message: string }).message
      return sendError(res, status, type, message)
    }
    if ('response' in answer) {
      const text = JSON.stringify(JSON.parse(fs.readFileSync(path.join(BEDROCK_TRANSCRIPTS, 'responses', `${answer.response}.json`), 'utf8')))
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-amzn-requestid': requestId })
      res.end(text)
      return
    }
    const recorded = Buffer.from(fs.readFileSync(path.join(BEDROCK_TRANSCRIPTS, 'streams', `${answer.stream}.b64`), 'utf8').trim(), 'base64')
    const bytes = answer.cutAtByte === undefined ? recorded : recorded.subarray(0, answer.cutAtByte)
    let closed = false
    res.once('close', () => { closed = true })
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': requestId })
    for (const frame of splitFrames(bytes)) {
      if (closed) return
      res.write(frame)
      if (options.frameDelayMs !== undefined) await new Promise(resolve => setTimeout(resolve, options.frameDelayMs))
    }
    res.end()
  }

  const requests: http.IncomingMessage[] = []
  const onRequest = (req: Req, res: http.ServerResponse | http2.Http2ServerResponse): void => {
    if (req instanceof http.IncomingMessage) requests.push(req)
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const r = res as unknown as Res
      handle(req, r, Buffer.concat(chunks)).catch((err: unknown) => {
        if (!r.headersSent) sendError(r, 500, 'InternalServerException', `emulator: ${(err as Error).message}`)
        else r.end()
      })
    })
  }
  const h1 = http.createServer(onRequest)
  const h2 = http2.createServer(onRequest)
  const sockets = new Set<net.Socket>()
  // One port, both protocols: a connection that opens with the HTTP/2 preface goes to the
  // HTTP/2 server, any other to the HTTP/1.1 one.
  const server = net.createServer(socket => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    let head = Buffer.alloc(0)
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk])
      if (head.length < 4) return
      socket.off('data', onData)
      socket.pause()
      if (head.subarray(0, 4).toString('latin1') !== 'PRI ') {
        socket.unshift(head)
        h1.emit('connection', socket)
        socket.resume()
        return
      }
      // HTTP/2 reads the socket's native handle, past bytes already read here: it gets a
      // stream that replays them, then the rest of the socket.
      const readable = new PassThrough()
      readable.write(head)
      socket.pipe(readable)
      const duplex = Duplex.from({ readable, writable: socket })
      socket.once('close', () => duplex.destroy())
      h2.emit('connection', duplex)
    }
    socket.on('data', onData)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve())
  })
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    server: h1,
    port,
    host: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}`,
    requests,
    calls,
    refused,
    close: () => new Promise<void>(resolve => {
      server.close(() => resolve())
      h1.closeAllConnections()
      for (const s of sockets) s.destroy()
    })
  }
}
