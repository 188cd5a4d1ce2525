/**
 * The one neutral shape every LLM wire format translates through (hub and spoke): a client
 * format (OpenAI chat completions, OpenAI Responses, Anthropic Messages) is decoded into a
 * `ChatRequest`, a provider format (the same three, Gemini, Bedrock Converse) is encoded from
 * it, and the answer goes back the same way — a `ChatResponse` for a whole answer, a sequence
 * of `StreamEvent`s for a stream. N formats need N modules, not N×N translators.
 *
 * Pass-through (the client's format is the provider's) never goes through this: the body is
 * forwarded as today, byte for byte, and only the usage is read.
 *
 * Rules every format module follows:
 * - Decoding never drops a field silently. A field the neutral shape cannot carry is either
 *   mapped as the providers' own docs say, or the decoder returns a `TranslationError`
 *   naming it (status 400), so the client learns what was refused before anything is sent.
 *   Fields meant only for one provider and harmless to omit elsewhere (`user`, `metadata`,
 *   `service_tier`, ...) are listed in the module's `IGNORED` table with a reason: dropping
 *   those is a documented choice, not an accident.
 * - Encoding never invents content: a neutral field the target cannot express is refused
 *   (400 naming it), never dropped.
 * - Every module is pure (no I/O, no clock): the golden tests feed files in and compare files
 *   out (`packages/engine/test/golden/llm/`).
 *
 * Names follow the providers' own vocabulary where they agree; where they do not, Anthropic's
 * content-block model is used (a message is a list of typed parts), since it is the richest
 * and the others map onto it without loss.
 */

/** Roles of conversation turns. System prompts are not turns: see `ChatRequest.system`. */
export type ChatRole = 'user' | 'assistant'

export type ContentPart =
  | { type: 'text', text: string }
  /** An image, inline (base64) or by URL; `mediaType` is required for inline data. */
  | { type: 'image', source: { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string }, detail?: 'auto' | 'low' | 'high' }
  /** A call the assistant asks for. `input` is the parsed JSON arguments object. */
  | { type: 'tool_call', id: string, name: string, input: Record<string, unknown> }
  /** The result of a tool call, sent back by the user side. */
  | { type: 'tool_result', callId: string, content: Array<{ type: 'text', text: string } | { type: 'image', source: { kind: 'base64', mediaType: string, data: string } | { kind: 'url', url: string } }>, isError?: boolean }
  /** Model reasoning a provider returned (kept so multi-turn reasoning can be sent back where the provider takes it). */
  | { type: 'reasoning', text: string, signature?: string }

export interface ChatMessage {
  role: ChatRole
  content: ContentPart[]
}

export interface ToolDefinition {
  name: string
  description?: string
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>
}

export type ToolChoice =
  | { type: 'auto' }
  | { type: 'none' }
  /** The model must call some tool. */
  | { type: 'required' }
  | { type: 'tool', name: string }

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema', name: string, schema: Record<string, unknown>, strict?: boolean, description?: string }

export interface ChatRequest {
  /** The model the client asked for (before any backend override). */
  model: string
  /** System / developer instructions, in order. */
  system: string[]
  messages: ChatMessage[]
  tools?: ToolDefinition[]
  toolChoice?: ToolChoice
  /** False when the client forbids parallel tool calls (OpenAI `parallel_tool_calls: false`, Anthropic `disable_parallel_tool_use`). */
  parallelToolCalls?: boolean
  responseFormat?: ResponseFormat
  /** Output token limit: `max_tokens` / `max_completion_tokens` / `max_output_tokens` / `maxOutputTokens` / `maxTokens`. */
  maxTokens?: number
  temperature?: number
  topP?: number
  topK?: number
  stop?: string[]
  stream: boolean
  /** Extended thinking / reasoning budget where the client asked for one. */
  reasoning?: { effort?: 'minimal' | 'low' | 'medium' | 'high', budgetTokens?: number }
}

/** Why a generation stopped, in one vocabulary (each format maps its own names onto these). */
export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'content_filter' | 'pause' | 'refusal' | 'error'

export interface Usage {
  inputTokens: number
  outputTokens: number
  /** Input tokens read from a prompt cache (included in `inputTokens`). */
  cachedInputTokens?: number
  /** Input tokens written to a prompt cache (included in `inputTokens`). */
  cacheCreationInputTokens?: number
  /** Output tokens spent on reasoning (included in `outputTokens`). */
  reasoningTokens?: number
}

export interface ChatResponse {
  id: string
  model: string
  /** Seconds since the epoch, when the provider said (OpenAI's `created`); else the encoder's `now`. */
  created?: number
  content: ContentPart[]
  stopReason: StopReason
  /** The stop sequence that ended it, when one did and the provider said which. */
  stopSequence?: string
  usage: Usage | null
}

/**
 * A stream, as a sequence of events. Content comes in indexed blocks (Anthropic's model):
 * a block starts, gets deltas, stops. Text blocks carry text deltas, tool-call blocks JSON
 * argument fragments (to be concatenated; they are not each valid JSON).
 */
export type StreamEvent =
  | { type: 'start', id: string, model: string, created?: number, usage?: Usage }
  | { type: 'block_start', index: number, block: { type: 'text' } | { type: 'reasoning' } | { type: 'tool_call', id: string, name: string } }
  | { type: 'text_delta', index: number, text: string }
  | { type: 'reasoning_delta', index: number, text: string, signature?: string }
  | { type: 'tool_args_delta', index: number, json: string }
  | { type: 'block_stop', index: number }
  /** The end of the generation: why, and the final usage when known. */
  | { type: 'finish', stopReason: StopReason, stopSequence?: string, usage: Usage | null }
  /** A provider error in the middle of a stream (after the head went out). */
  | { type: 'error', error: TranslationError }

/** A request or answer a translation refuses, in the client format's terms. */
export interface TranslationError {
  status: number
  /** OpenAI-style type / Anthropic error type, chosen by the encoder of the client format. */
  kind: 'invalid_request' | 'authentication' | 'permission' | 'not_found' | 'rate_limit' | 'overloaded' | 'api_error' | 'timeout'
  message: string
  /** The request field at fault (`messages[2].content[0].type`), when there is one. */
  field?: string
}

export function translationError (status: number, kind: TranslationError['kind'], message: string, field?: string): TranslationError {
  return field === undefined ? { status, kind, message } : { status, kind, message, field }
}

export function isTranslationError (value: unknown): value is TranslationError {
  return value !== null && typeof value === 'object' && 'kind' in value && 'status' in value && 'message' in value
}

/** What an encoder of a whole answer or of stream events needs besides the neutral data. */
export interface EncodeOptions {
  /** Seconds since the epoch, for formats that stamp answers (OpenAI `created`). Golden tests fix it. */
  now: number
  /** The model name the client asked for, for formats that echo it. */
  requestModel: string
}

/**
 * A stateful stream decoder: provider bytes in (SSE text or an AWS event stream), neutral
 * events out. `push` may be called with any split of the bytes (a UTF-8 character or an
 * event may span two calls); `end` flushes and reports a stream cut short.
 */
export interface StreamDecoder {
  push (chunk: Buffer): StreamEvent[]
  end (): StreamEvent[]
}

/** A stateful stream encoder: neutral events in, the client format's wire bytes out. */
export interface StreamEncoder {
  /** Bytes to send for this event (possibly empty: some events have no wire form in a format). */
  encode (event: StreamEvent): string
  /** Bytes that end the stream (OpenAI's `data: [DONE]`), after the last event. */
  end (): string
}

/**
 * A stream encoder whose wire form is binary (Bedrock's ConverseStream: AWS event-stream
 * messages), for a format whose stream is not text. A format has it beside `newStreamEncoder`
 * (`WireFormat.newBinaryStreamEncoder`); where both exist, a client stream uses this one.
 */
export interface BinaryStreamEncoder {
  /** Bytes to send for this event (possibly empty). */
  encode (event: StreamEvent): Uint8Array
  /** Bytes that end the stream, after the last event. */
  end (): Uint8Array
}

/**
 * One wire format. A client format needs the `decode*` of requests and the `encode*` of
 * answers; a provider format the reverse. Every module implements both directions, so any
 * format can be on either side.
 */
export interface WireFormat {
  readonly name: WireFormatName
  /** The client's JSON request → neutral (or a 400 naming the field). */
  decodeRequest (body: Record<string, unknown>): ChatRequest | TranslationError
  /** Neutral → the provider's JSON request body. `model` is the model to send (after overrides). */
  encodeRequest (request: ChatRequest, model: string): Record<string, unknown> | TranslationError
  /** The provider's whole JSON answer → neutral. */
  decodeResponse (body: Record<string, unknown>): ChatResponse | TranslationError
  /** Neutral → the client's whole JSON answer. */
  encodeResponse (response: ChatResponse, options: EncodeOptions): Record<string, unknown>
  /** The provider's error answer (status and parsed body, or null when not JSON) → neutral. */
  decodeError (status: number, body: unknown): TranslationError
  /** Neutral error → the client format's error body (its status is `error.status`). */
  encodeError (error: TranslationError): Record<string, unknown>
  /** Headers that go with `encodeError`'s body, for a format whose clients read the error's type from one (Bedrock's `x-amzn-errortype`). */
  errorHeaders? (error: TranslationError): Record<string, string>
  newStreamDecoder (): StreamDecoder
  newStreamEncoder (options: EncodeOptions): StreamEncoder
  /** For a format whose client stream is binary: used instead of `newStreamEncoder` (see `BinaryStreamEncoder`). */
  newBinaryStreamEncoder? (options: EncodeOptions): BinaryStreamEncoder
  /** Content type of the client's stream (`text/event-stream`). */
  readonly streamContentType: string
}

export type WireFormatName = 'openai-chat' | 'openai-responses' | 'anthropic-messages' | 'gemini' | 'bedrock-converse'
