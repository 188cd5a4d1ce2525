/**
 * Golden translation cases for every client format × provider format pair (issue 50), as
 * files a reviewer can read: each format's own fixtures (packages/engine/test/golden/llm/
 * <format>/, recorded to the provider's published API and checked there against the official
 * SDK) are run through the other side's module, and the result is kept under
 * golden/llm/pairs/<client>__<provider>/:
 *
 *   requests/<case>.json   the client's request (<client>/requests/<case>.json) as the provider gets it
 *   responses/<case>.json  the provider's answer (<provider>/responses/<case>.json) as the client gets it
 *   streams/<case>.sse     the provider's stream (<provider>/streams/<case>.sse|.b64) as the client gets it
 *                          (<case>.b64, base64 of the bytes, for a Bedrock client: its stream is binary)
 *   errors/<case>.json     the provider's error as the client gets it: { status, body }
 *
 * A translation the target refuses is kept too, as { refused: TranslationError }: what is
 * refused is as much a part of the contract as what maps. UPDATE_GOLDEN=1 rewrites the files;
 * otherwise any difference fails. Streams are fed in one piece here: each format's own test
 * checks that every split of the bytes decodes the same.
 */

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isTranslationError, type EncodeOptions, type StreamEvent, type WireFormat, type WireFormatName } from '../src/llm/canonical.ts'
import { formatByName } from '../src/llm/formats/index.ts'

const ROOT = fileURLToPath(new URL('golden/llm/', import.meta.url))
const UPDATE = process.env.UPDATE_GOLDEN === '1'

/** Formats a client can speak to Portico (recognised by path). */
const CLIENTS: WireFormatName[] = ['openai-chat', 'openai-responses', 'anthropic-messages', 'gemini', 'bedrock-converse']
/** The model of client formats whose path names it (Gemini, Bedrock): their request bodies have none. */
const PATH_MODEL = 'client-model'
/** Formats a provider can be reached in. */
const PROVIDERS: WireFormatName[] = ['openai-chat', 'openai-responses', 'anthropic-messages', 'gemini', 'bedrock-converse']

const OPTIONS: EncodeOptions = { now: 1767225600, requestModel: 'client-model' }

function format (name: WireFormatName): WireFormat {
  const f = formatByName(name)
  assert.ok(f !== undefined, `format ${name} is registered`)
  return f
}

/** Fixture files of one kind: inputs only (not the .neutral / .encoded goldens beside them). */
function inputs (dir: string, exts: string[]): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).filter(f => exts.some(e => f.endsWith(e)) && !/\.(neutral|encoded)\.[a-z0-9]+$/.test(f)).sort()
}

function caseName (file: string): string {
  return file.replace(/\.(json|sse|b64)$/, '')
}

function checkGolden (path: string, actual: string): void {
  if (UPDATE || !existsSync(path)) {
    if (!UPDATE) assert.fail(`${path} is missing (UPDATE_GOLDEN=1 writes it)`)
    mkdirSync(join(path, '..'), { recursive: true })
    writeFileSync(path, actual)
    return
  }
  assert.equal(actual, readFileSync(path, 'utf8'), `${path} differs (UPDATE_GOLDEN=1 rewrites it)`)
}

const json = (value: unknown): string => JSON.stringify(value, null, 2) + '\n'

/** An error fixture's status: `name.STATUS.json`, or a sibling `name.status` file. */
function errorStatus (dir: string, file: string): number {
  const inName = /\.(\d{3})\.json$/.exec(file)
  if (inName !== null) return Number(inName[1])
  const sibling = join(dir, file.replace(/\.json$/, '.status'))
  assert.ok(existsSync(sibling), `${sibling}: the status of ${file}`)
  return Number(readFileSync(sibling, 'utf8').trim())
}

/** The client's stream: SSE text, or for a binary stream (Bedrock's event stream) its bytes in base64 (a `.b64` golden). */
function streamText (client: WireFormat, events: StreamEvent[]): string {
  if (client.newBinaryStreamEncoder !== undefined) {
    const encoder = client.newBinaryStreamEncoder(OPTIONS)
    const parts = events.map(e => encoder.encode(e))
    return Buffer.concat([...parts, encoder.end()]).toString('base64') + '\n'
  }
  const encoder = client.newStreamEncoder(OPTIONS)
  let out = ''
  for (const event of events) out += encoder.encode(event)
  return out + encoder.end()
}

for (const clientName of CLIENTS) {
  for (const providerName of PROVIDERS) {
    if (clientName === providerName) continue // pass-through: the body is forwarded as it is
    const pair = `${clientName}__${providerName}`
    test(`translation pair ${pair}: requests, answers, streams and errors match their golden files`, () => {
      const client = format(clientName)
      const provider = format(providerName)
      const out = join(ROOT, 'pairs', pair)
      let cases = 0

      const requestDir = join(ROOT, clientName, 'requests')
      for (const file of inputs(requestDir, ['.json'])) {
        const decoded = client.decodeRequest(JSON.parse(readFileSync(join(requestDir, file), 'utf8')) as Record<string, unknown>)
        if (isTranslationError(decoded)) continue // refused by the client format itself: its own golden test covers it
        if (decoded.model === '') decoded.model = PATH_MODEL
        const encoded = provider.encodeRequest(decoded, decoded.model)
        checkGolden(join(out, 'requests', `${caseName(file)}.json`), json(isTranslationError(encoded) ? { refused: encoded } : encoded))
        cases++
      }

      const responseDir = join(ROOT, providerName, 'responses')
      for (const file of inputs(responseDir, ['.json'])) {
        const decoded = provider.decodeResponse(JSON.parse(readFileSync(join(responseDir, file), 'utf8')) as Record<string, unknown>)
        const answer = isTranslationError(decoded) ? { status: decoded.status, body: client.encodeError(decoded) } : client.encodeResponse(decoded, OPTIONS)
        checkGolden(join(out, 'responses', `${caseName(file)}.json`), json(answer))
        cases++
      }

      const streamDir = join(ROOT, providerName, 'streams')
      for (const file of inputs(streamDir, ['.sse', '.b64'])) {
        const raw = readFileSync(join(streamDir, file), 'utf8')
        const bytes = file.endsWith('.b64') ? Buffer.from(raw.replace(/\s+/g, ''), 'base64') : Buffer.from(raw)
        const decoder = provider.newStreamDecoder()
        const events = [...decoder.push(bytes), ...decoder.end()]
        checkGolden(join(out, 'streams', `${caseName(file)}.${client.newBinaryStreamEncoder !== undefined ? 'b64' : 'sse'}`), streamText(client, events))
        cases++
      }

      const errorDir = join(ROOT, providerName, 'errors')
      for (const file of inputs(errorDir, ['.json'])) {
        const status = errorStatus(errorDir, file)
        const text = readFileSync(join(errorDir, file), 'utf8')
        let body: unknown = null
        try { body = JSON.parse(text) } catch { body = null }
        const error = provider.decodeError(status, body)
        checkGolden(join(out, 'errors', `${caseName(file).replace(/\.\d{3}$/, '')}.json`), json({ status: error.status, body: client.encodeError(error) }))
        cases++
      }
      assert.ok(cases > 0, `${pair}: fixtures found`)
    })
  }
}
