/**
 * The Bedrock emulator (e2e/lib/llm-emulators/bedrock.ts) checked by the official
 * `@aws-sdk/client-bedrock-runtime` as a client talking to it directly (its default HTTP/2
 * handler, SigV4 with its own signer, its restJson1 and event-stream parsers): what the SDK
 * sends for each request fixture is the fixture byte for byte in meaning, what it parses out
 * of each recorded answer is the recorded answer, its exceptions are Bedrock's. Then Portico's
 * Bedrock adapter signs requests the emulator verifies with the SDK's signer; a tampered body
 * or path is refused as Bedrock refuses it.
 */

import { after, before, describe, test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { request } from 'undici'
import {
  BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, InvokeModelCommand,
  type ConverseCommandInput, type ConverseStreamCommandInput
} from '@aws-sdk/client-bedrock-runtime'
import {
  BEDROCK_TEST_API_KEY, BEDROCK_TEST_CREDENTIALS, BEDROCK_TRANSCRIPTS, startBedrockEmulator,
  type BedrockAnswer, type BedrockEmulator
} from '../lib/llm-emulators/bedrock.ts'
import { setForTest } from '@portico/testkit/for-test'
import { bedrockProvider } from '@portico/engine/llm/providers/bedrock'
import { bedrockConverseFormat } from '@portico/engine/llm/formats/bedrock-converse'
import type { StreamEvent } from '@portico/engine/llm/canonical'

const MODEL = 'anthropic.claude-sonnet-4-20250514-v1:0'
const REGION = 'us-east-1'

/**
 * The SDK's default credential chain reads process.env: for one test, every AWS_ variable
 * unset and the EC2 instance metadata lookup off (no request leaves the machine); all of it
 * back after the test, failed or not.
 */
function awsEnvForTest (t: TestContext): void {
  for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) setForTest(t, process.env, name, undefined)
  setForTest(t, process.env, 'AWS_EC2_METADATA_DISABLED', 'true')
}

function fixture (...parts: string[]): any {
  return JSON.parse(fs.readFileSync(path.join(BEDROCK_TRANSCRIPTS, ...parts), 'utf8'))
}

function names (sub: string, suffix: string): string[] {
  return fs.readdirSync(path.join(BEDROCK_TRANSCRIPTS, sub)).filter(f => f.endsWith(suffix) && !f.endsWith('.neutral.json')).map(f => f.slice(0, -suffix.length)).sort()
}

/** A request fixture as SDK input: the wire's base64 blobs are Uint8Arrays in the SDK. */
function sdkInput (body: any): any {
  return JSON.parse(JSON.stringify(body), (key, value) => key === 'bytes' && typeof value === 'string' ? Buffer.from(value, 'base64') : value)
}

function withoutPadding (value: any): any {
  return JSON.parse(JSON.stringify(value, (key, v) => key === 'p' ? undefined : v))
}

describe('Bedrock emulator, checked by @aws-sdk/client-bedrock-runtime', () => {
  let emulator: BedrockEmulator
  // What the emulator answers next (unset: a text answer): each test sets its own (setForTest: put back after it).
  const serve: { next?: BedrockAnswer } = {}
  let client: BedrockRuntimeClient

  before(async () => {
    emulator = await startBedrockEmulator({ region: REGION, answer: call => serve.next ?? (call.streaming ? { stream: 'text' } : { response: 'text' }) })
    client = new BedrockRuntimeClient({ region: REGION, endpoint: emulator.url, credentials: BEDROCK_TEST_CREDENTIALS, maxAttempts: 1 })
  })
  after(async () => {
    client?.destroy()
    await emulator?.close()
  })

  test('Converse: every request fixture is what the SDK puts on the wire; the answer parses', async t => {
    for (const name of names('requests', '.json').filter(n => !n.startsWith('refused-'))) {
      const body = fixture('requests', `${name}.json`)
      setForTest(t, serve, 'next', { response: 'text' })
      const out = await client.send(new ConverseCommand({ modelId: MODEL, ...sdkInput(body) } as ConverseCommandInput))
      const call = emulator.calls.at(-1)
      assert.equal(call?.auth, 'sigv4', name)
      assert.equal(call?.modelId, MODEL)
      assert.equal(call?.streaming, false)
      assert.deepEqual(call?.body, body, `${name}: the SDK's JSON is the fixture`)
      assert.equal(out.$metadata.httpStatusCode, 200)
    }
  })

  test('Converse: the SDK parses each recorded answer into exactly the recorded fields', async t => {
    for (const name of names('responses', '.json')) {
      setForTest(t, serve, 'next', { response: name })
      const out = await client.send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
      const recorded = fixture('responses', `${name}.json`)
      const { $metadata, ...parsed } = out
      assert.deepEqual(JSON.parse(JSON.stringify(parsed)), recorded, name)
      assert.match(String($metadata.requestId), /^[0-9a-f-]{36}$/)
    }
  })

  test('ConverseStream with tools: the SDK decodes the event-stream frames into the recorded events', async t => {
    for (const name of ['text', 'tool-calls', 'parallel-tool-calls', 'max-tokens', 'reasoning']) {
      setForTest(t, serve, 'next', { stream: name })
      const tools = fixture('requests', 'tools.json')
      const out = await client.send(new ConverseStreamCommand({ modelId: MODEL, ...tools } as ConverseStreamCommandInput))
      const events: unknown[] = []
      for await (const event of out.stream ?? []) events.push(JSON.parse(JSON.stringify(event)))
      const recorded = (fixture('streams', `${name}.events.json`) as Array<{ event: string, payload: unknown }>)
        .map(e => ({ [e.event]: withoutPadding(e.payload) }))
      assert.deepEqual(events, recorded, name)
      assert.equal(emulator.calls.at(-1)?.streaming, true)
      assert.deepEqual(emulator.calls.at(-1)?.body, tools)
    }
  })

  test('exceptions: HTTP errors and an exception inside the stream are the SDK\'s typed exceptions', async t => {
    for (const name of names('errors', '.json')) {
      setForTest(t, serve, 'next', { error: name })
      const type = fs.readFileSync(path.join(BEDROCK_TRANSCRIPTS, 'errors', `${name}.type`), 'utf8').trim()
      const status = Number(fs.readFileSync(path.join(BEDROCK_TRANSCRIPTS, 'errors', `${name}.status`), 'utf8'))
      await assert.rejects(client.send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }] })),
        (err: any) => err.name === type && err.$metadata?.httpStatusCode === status && err.message === fixture('errors', `${name}.json`).message, name)
    }
    setForTest(t, serve, 'next', { stream: 'throttled' })
    const out = await client.send(new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
    const seen: string[] = []
    await assert.rejects(async () => {
      for await (const event of out.stream ?? []) seen.push(Object.keys(event)[0] ?? '')
    }, (err: any) => err.name === 'ThrottlingException' && err.message === 'Too many tokens, please wait before trying again.')
    assert.deepEqual(seen, ['messageStart', 'contentBlockDelta'])

    // A stream cut mid-frame: the SDK fails too (what Portico's decoder reports as a cut stream).
    setForTest(t, serve, 'next', { stream: 'tool-calls', cutAtByte: 300 })
    const cut = await client.send(new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
    await assert.rejects(async () => {
      for await (const event of cut.stream ?? []) seen.push(Object.keys(event)[0] ?? '')
    })
  })

  test('authorisation: a wrong secret is InvalidSignatureException, an unknown key UnrecognizedClientException; a Bedrock API key works', async t => {
    const input = { modelId: MODEL, messages: [{ role: 'user' as const, content: [{ text: 'hi' }] }] }
    const wrongSecret = new BedrockRuntimeClient({ region: REGION, endpoint: emulator.url, credentials: { ...BEDROCK_TEST_CREDENTIALS, secretAccessKey: 'not-the-secret' }, maxAttempts: 1 })
    await assert.rejects(wrongSecret.send(new ConverseCommand(input)), (err: any) => err.name === 'InvalidSignatureException' && err.$metadata.httpStatusCode === 403)
    wrongSecret.destroy()
    const unknownKey = new BedrockRuntimeClient({ region: REGION, endpoint: emulator.url, credentials: { accessKeyId: 'AKIDUNKNOWN', secretAccessKey: 'x' }, maxAttempts: 1 })
    await assert.rejects(unknownKey.send(new ConverseCommand(input)), (err: any) => err.name === 'UnrecognizedClientException' && err.$metadata.httpStatusCode === 403)
    unknownKey.destroy()
    const wrongRegion = new BedrockRuntimeClient({ region: 'eu-west-3', endpoint: emulator.url, credentials: BEDROCK_TEST_CREDENTIALS, maxAttempts: 1 })
    await assert.rejects(wrongRegion.send(new ConverseCommand(input)), (err: any) => err.name === 'InvalidSignatureException')
    wrongRegion.destroy()

    setForTest(t, serve, 'next', { response: 'text' })
    const bearer = new BedrockRuntimeClient({ region: REGION, endpoint: emulator.url, token: { token: BEDROCK_TEST_API_KEY }, authSchemePreference: ['httpBearerAuth'], maxAttempts: 1 })
    const out = await bearer.send(new ConverseCommand(input))
    assert.equal(out.stopReason, 'end_turn')
    assert.equal(emulator.calls.at(-1)?.auth, 'bearer')
    bearer.destroy()
  })

  test('InvokeModel (embeddings): Titan and Cohere bodies and answers as the SDK sends and reads them; the token count header', async () => {
    const titan = await client.send(new InvokeModelCommand({ modelId: 'amazon.titan-embed-text-v2:0', contentType: 'application/json', accept: 'application/json', body: JSON.stringify({ inputText: 'hello there world', dimensions: 3 }) }))
    assert.deepEqual(JSON.parse(Buffer.from(titan.body).toString()), { embedding: [0.125, 0.25, 0.375], inputTextTokenCount: 3 })
    assert.equal(emulator.calls.at(-1)?.operation, 'invoke')
    assert.equal(emulator.calls.at(-1)?.modelId, 'amazon.titan-embed-text-v2:0')
    const cohere = await client.send(new InvokeModelCommand({ modelId: 'cohere.embed-english-v3', contentType: 'application/json', body: JSON.stringify({ texts: ['a b', 'c'], input_type: 'search_query' }) }))
    const answer = JSON.parse(Buffer.from(cohere.body).toString()) as { embeddings: number[][], response_type: string }
    assert.equal(answer.response_type, 'embeddings_floats')
    assert.equal(answer.embeddings.length, 2)
    await assert.rejects(client.send(new InvokeModelCommand({ modelId: 'amazon.titan-embed-text-v2:0', body: JSON.stringify({ texts: ['x'] }) })), (e: unknown) => (e as { name?: string }).name === 'ValidationException')
  })
})

describe('Portico\'s Bedrock adapter against the emulator', () => {
  let emulator: BedrockEmulator
  before(async () => {
    emulator = await startBedrockEmulator({ region: REGION })
  })
  after(async () => {
    await emulator?.close()
  })

  async function send (streaming: boolean, options: { tamperBody?: boolean, tamperPath?: boolean, apiKey?: string, chain?: boolean } = {}): Promise<{ status: number, headers: Record<string, unknown>, body: Buffer }> {
    const adapter = bedrockProvider(options.apiKey !== undefined
      ? { region: REGION, apiKey: options.apiKey }
      : options.chain === true ? { region: REGION } : { region: REGION, credentials: BEDROCK_TEST_CREDENTIALS })
    const encoded = bedrockConverseFormat.encodeRequest({ model: MODEL, system: ['be brief'], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: streaming, maxTokens: 64 }, MODEL)
    const body = Buffer.from(JSON.stringify(encoded))
    const providerRequest = { operation: 'chat' as const, model: MODEL, streaming, body, headers: {} as Record<string, string> }
    await adapter.authorize(providerRequest, { host: '127.0.0.1', port: emulator.port, protocol: 'http' })
    let requestPath = adapter.path(providerRequest)
    if (options.tamperPath === true) requestPath = requestPath.replace('sonnet', 'opus')
    const sent = options.tamperBody === true ? Buffer.from(body.toString().replace('hi', 'HI')) : body
    const response = await request(`${emulator.url}${requestPath}`, { method: 'POST', headers: providerRequest.headers, body: sent })
    return { status: response.statusCode, headers: response.headers, body: Buffer.from(await response.body.arrayBuffer()) }
  }

  test('a request the adapter signed is accepted (Converse and ConverseStream); its answer decodes', async () => {
    const whole = await send(false)
    assert.equal(whole.status, 200, whole.body.toString())
    assert.equal(emulator.calls.at(-1)?.auth, 'sigv4')
    const decoded = bedrockConverseFormat.decodeResponse(JSON.parse(whole.body.toString()))
    assert.deepEqual(decoded, fixture('responses', 'text.neutral.json'))

    const streamed = await send(true)
    assert.equal(streamed.status, 200)
    assert.equal(streamed.headers['content-type'], 'application/vnd.amazon.eventstream')
    const decoder = bedrockConverseFormat.newStreamDecoder()
    const events: StreamEvent[] = [...decoder.push(streamed.body), ...decoder.end()]
    assert.deepEqual(events, fixture('streams', 'text.neutral.json'))
  })

  test('a tampered body or path is refused as Bedrock refuses a bad signature', async () => {
    for (const tamper of [{ tamperBody: true }, { tamperPath: true }]) {
      const out = await send(false, tamper)
      assert.equal(out.status, 403, JSON.stringify(tamper))
      assert.match(String(out.headers['x-amzn-errortype']), /^InvalidSignatureException:/)
      assert.match(JSON.parse(out.body.toString()).message, /signature we calculated does not match/)
    }
  })

  test('credentials from the SDK\'s default chain: environment variables, then a shared credentials file', async t => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portico-aws-'))
    try {
      awsEnvForTest(t)
      setForTest(t, process.env, 'AWS_ACCESS_KEY_ID', BEDROCK_TEST_CREDENTIALS.accessKeyId)
      setForTest(t, process.env, 'AWS_SECRET_ACCESS_KEY', BEDROCK_TEST_CREDENTIALS.secretAccessKey)
      assert.equal((await send(false, { chain: true })).status, 200)
      assert.equal(emulator.calls.at(-1)?.auth, 'sigv4')

      setForTest(t, process.env, 'AWS_ACCESS_KEY_ID', undefined)
      setForTest(t, process.env, 'AWS_SECRET_ACCESS_KEY', undefined)
      const file = path.join(dir, 'credentials')
      fs.writeFileSync(file, `[portico-test]\naws_access_key_id = ${BEDROCK_TEST_CREDENTIALS.accessKeyId}\naws_secret_access_key = ${BEDROCK_TEST_CREDENTIALS.secretAccessKey}\n`)
      setForTest(t, process.env, 'AWS_SHARED_CREDENTIALS_FILE', file)
      setForTest(t, process.env, 'AWS_CONFIG_FILE', path.join(dir, 'config'))
      setForTest(t, process.env, 'AWS_PROFILE', 'portico-test')
      assert.equal((await send(false, { chain: true })).status, 200)
      // A profile with the wrong secret (another file: the SDK caches the files it read): signed, and refused.
      const wrong = path.join(dir, 'credentials-wrong')
      fs.writeFileSync(wrong, `[portico-wrong]\naws_access_key_id = ${BEDROCK_TEST_CREDENTIALS.accessKeyId}\naws_secret_access_key = wrong\n`)
      setForTest(t, process.env, 'AWS_SHARED_CREDENTIALS_FILE', wrong)
      setForTest(t, process.env, 'AWS_PROFILE', 'portico-wrong')
      assert.equal((await send(false, { chain: true })).status, 403)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('credentials from the container endpoint (ECS / EKS Pod Identity): session token signed, cached until near expiry', async t => {
    const session = { ...BEDROCK_TEST_CREDENTIALS, sessionToken: 'portico-test-session-token' }
    const withSession = await startBedrockEmulator({ region: REGION, credentials: session })
    let fetched = 0
    const container = http.createServer((req, res) => {
      fetched++
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ AccessKeyId: session.accessKeyId, SecretAccessKey: session.secretAccessKey, Token: session.sessionToken, Expiration: new Date(Date.now() + 3600_000).toISOString() }))
    })
    await new Promise<void>(resolve => container.listen(0, '127.0.0.1', resolve))
    try {
      awsEnvForTest(t)
      setForTest(t, process.env, 'AWS_CONTAINER_CREDENTIALS_FULL_URI', `http://127.0.0.1:${(container.address() as { port: number }).port}/creds`)
      const adapter = bedrockProvider({ region: REGION })
      for (let i = 0; i < 2; i++) {
        const providerRequest = { operation: 'chat' as const, model: MODEL, streaming: false, body: Buffer.from('{"messages":[{"role":"user","content":[{"text":"hi"}]}]}'), headers: {} as Record<string, string> }
        await adapter.authorize(providerRequest, { host: '127.0.0.1', port: withSession.port, protocol: 'http' })
        assert.equal(providerRequest.headers['x-amz-security-token'], session.sessionToken)
        const response = await request(`${withSession.url}${adapter.path(providerRequest)}`, { method: 'POST', headers: providerRequest.headers, body: providerRequest.body })
        assert.equal(response.statusCode, 200, await response.body.text())
      }
      assert.equal(fetched, 1, 'the chain caches credentials until they near expiry')
    } finally {
      container.close()
      container.closeAllConnections()
      await withSession.close()
    }
  })

  test('credentials from web identity (EKS IRSA): the token file exchanged at STS, the session signed', async t => {
    const session = { accessKeyId: 'ASIAPORTICOTESTONLY', secretAccessKey: 'portico-sts-secret-not-real', sessionToken: 'portico-sts-session-token' }
    const withSession = await startBedrockEmulator({ region: REGION, credentials: session })
    const stsCalls: URLSearchParams[] = []
    // STS's AssumeRoleWithWebIdentity (query protocol: form-encoded in, XML out), as documented.
    const sts = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        stsCalls.push(new URLSearchParams(Buffer.concat(chunks).toString()))
        res.writeHead(200, { 'content-type': 'text/xml' })
        res.end(`<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>${session.accessKeyId}</AccessKeyId><SecretAccessKey>${session.secretAccessKey}</SecretAccessKey><SessionToken>${session.sessionToken}</SessionToken><Expiration>${new Date(Date.now() + 3600_000).toISOString()}</Expiration></Credentials>
<SubjectFromWebIdentityToken>system:serviceaccount:ai:portico</SubjectFromWebIdentityToken>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/portico-bedrock/portico</Arn><AssumedRoleId>AROAPORTICOTEST:portico</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>${'0'.repeat(8)}-0000-0000-0000-000000000000</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`)
      })
    })
    await new Promise<void>(resolve => sts.listen(0, '127.0.0.1', resolve))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portico-irsa-'))
    try {
      awsEnvForTest(t)
      setForTest(t, process.env, 'AWS_CONFIG_FILE', path.join(dir, 'config'))
      setForTest(t, process.env, 'AWS_SHARED_CREDENTIALS_FILE', path.join(dir, 'credentials'))
      fs.writeFileSync(path.join(dir, 'token'), 'eyJportico.test.token')
      setForTest(t, process.env, 'AWS_WEB_IDENTITY_TOKEN_FILE', path.join(dir, 'token'))
      setForTest(t, process.env, 'AWS_ROLE_ARN', 'arn:aws:iam::123456789012:role/portico-bedrock')
      setForTest(t, process.env, 'AWS_ROLE_SESSION_NAME', 'portico')
      setForTest(t, process.env, 'AWS_REGION', REGION)
      setForTest(t, process.env, 'AWS_ENDPOINT_URL_STS', `http://127.0.0.1:${(sts.address() as { port: number }).port}`)
      const adapter = bedrockProvider({ region: REGION })
      const providerRequest = { operation: 'chat' as const, model: MODEL, streaming: false, body: Buffer.from('{"messages":[{"role":"user","content":[{"text":"hi"}]}]}'), headers: {} as Record<string, string> }
      await adapter.authorize(providerRequest, { host: '127.0.0.1', port: withSession.port, protocol: 'http' })
      const response = await request(`${withSession.url}${adapter.path(providerRequest)}`, { method: 'POST', headers: providerRequest.headers, body: providerRequest.body })
      assert.equal(response.statusCode, 200, await response.body.text())
      assert.equal(stsCalls.length, 1)
      assert.equal(stsCalls[0]?.get('Action'), 'AssumeRoleWithWebIdentity')
      assert.equal(stsCalls[0]?.get('WebIdentityToken'), 'eyJportico.test.token')
      assert.equal(stsCalls[0]?.get('RoleArn'), 'arn:aws:iam::123456789012:role/portico-bedrock')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
      sts.close()
      sts.closeAllConnections()
      await withSession.close()
    }
  })

  test('a Bedrock API key is sent as a bearer token; a wrong one is refused', async () => {
    assert.equal((await send(false, { apiKey: BEDROCK_TEST_API_KEY })).status, 200)
    assert.equal(emulator.calls.at(-1)?.auth, 'bearer')
    const wrong = await send(false, { apiKey: 'bedrock-api-key-wrong' })
    assert.equal(wrong.status, 403)
    assert.match(String(wrong.headers['x-amzn-errortype']), /^UnrecognizedClientException:/)
  })
})
