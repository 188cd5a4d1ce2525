/**
 * An LLM call's span attributes (OpenTelemetry GenAI semantic conventions): the upstream
 * call of an `ai` backend is the GenAI client span, named `{operation} {model}`.
 * `gen_ai.system` (deprecated for `gen_ai.provider.name`) is kept beside it for the
 * backends that read only the older name.
 */

import type { LlmCall } from '../request/calls.ts'
import type { SpanAttributes } from '../trace/otel.ts'

export function llmSpanName (call: LlmCall): string {
  return call.model === '' ? call.operation : `${call.operation} ${call.model}`
}

export function llmRequestAttributes (call: LlmCall): SpanAttributes {
  return {
    'gen_ai.operation.name': call.operation,
    'gen_ai.provider.name': call.system,
    'gen_ai.system': call.system,
    'gen_ai.request.model': call.model,
    'portico.llm.streaming': call.streaming
  }
}

/** What the answer told: the model that served it, the tokens spent and (with `pricing`) what they cost. */
export function llmResponseAttributes (call: LlmCall): SpanAttributes {
  const usage = call.usage
  if (usage === null) return {}
  return {
    'gen_ai.response.model': usage.responseModel ?? undefined,
    'gen_ai.usage.input_tokens': usage.inputTokens ?? undefined,
    'gen_ai.usage.output_tokens': usage.outputTokens ?? undefined,
    // No semantic convention for a cost: Portico's own names, as in the access log.
    'portico.llm.cost': call.cost !== undefined ? Number(call.cost.amount) : undefined,
    'portico.llm.currency': call.cost?.currency
  }
}
