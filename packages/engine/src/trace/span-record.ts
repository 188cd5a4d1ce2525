/**
 * What a recorded span is on the request's thread, and where spans go: the flat record
 * the request's thread writes per span, and the OTLP endpoint options. Nothing of the
 * OpenTelemetry SDK is loaded here — the request's thread of a traced proxy runs only this,
 * trace/otel-sdk.ts and the API's propagators; the SDK's resources, spans and exporters load
 * in the export thread (trace/span-export.ts). Loaded on the request's thread, the SDK's
 * resources (and the semantic-conventions package under them) made every request of a
 * proxy with tracing configured ~5 % dearer in instructions, with none of their code
 * running (bench/tracing-instructions.ts; docs/tracing-cost-log.md, "Counted, not timed").
 */

import type { SpanKind } from '@opentelemetry/api'
import type { LayoutValues } from './attribute-layouts.ts'
import type { SpanAttributeValue } from './otel.ts'
import { performance } from '../util/clock.ts'

/**
 * One ended span as the request's thread wrote it: a flat array, fields at the indexes of
 * `RECORD`. Attributes come two ways: the values of a fixed layout (trace/attribute-layouts.ts:
 * the layout's id, then its values in the layout's key order, so the keys never travel),
 * and after them any others as key, value, key, value… (a later value of a key replaces an
 * earlier one, and a pair replaces a layout's value). Flat because it is structured-cloned
 * to the export thread, and one array clones about three times faster than an object
 * holding an array of attributes.
 */
export type SpanRecord = [
  traceId: string,
  spanId: string,
  /** '' for a span without a parent (a request that arrived without a trace). */
  parentSpanId: string,
  /** The parent is the caller's (a request's server span continuing a trace). */
  parentRemote: boolean,
  /** The caller's W3C tracestate, '' for none. */
  traceState: string,
  name: string,
  kind: SpanKind,
  /** ms since the epoch, with the fraction (performance.timeOrigin + performance.now()). */
  start: number,
  end: number,
  /** SpanStatusCode: 0 unset, 2 error. */
  status: number,
  statusMessage: string,
  /** The attribute layout's id (0: none). */
  layout: number,
  /** Its values (null: none). */
  layoutValues: LayoutValues | null,
  ...attributes: Array<string | SpanAttributeValue>
]

/** Where each field of a SpanRecord is. */
export const RECORD = { traceId: 0, spanId: 1, parentSpanId: 2, parentRemote: 3, traceState: 4, name: 5, kind: 6, start: 7, end: 8, status: 9, statusMessage: 10, layout: 11, layoutValues: 12, attributes: 13 } as const

/** Where the export goes, as the config says it (`config.tracing`). */
export interface SpanExportOptions extends OtlpEndpointOptions {
  /** Resource attributes (service.name defaults to portico). */
  resources: Record<string, string>
}

/** Where an OTLP exporter sends, as the config says it (tracing's and the access log's). */
export interface OtlpEndpointOptions {
  otlpEndpoint: string
  otlpProtocol: 'grpc' | 'http'
  path?: string
  headers: Record<string, string>
}
