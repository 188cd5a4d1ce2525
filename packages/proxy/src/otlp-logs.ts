/**
 * The access log as OpenTelemetry log records (`config.accessLog.otlp`): each line's fields
 * become the record's attributes, its body the message, and the request's trace id and span
 * id (when tracing is on) its trace context, so a log backend joins it to the trace. Loaded
 * only when configured (the SDK and its exporters are not needed otherwise).
 */

import { ROOT_CONTEXT, SeverityNumber, TraceFlags, trace } from '@opentelemetry/api'
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter } from '@opentelemetry/sdk-logs'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import type { RequestSpan } from '@portico/engine'
import { otlpTarget, type OtlpEndpointOptions } from '@portico/engine/otel-sdk'

export interface OtlpLogsOptions extends OtlpEndpointOptions {
  /** Resource attributes (config.tracing's, when set); service.name defaults to portico. */
  resources: Record<string, string>
}

export interface OtlpLogs {
  emit(message: string, fields: Record<string, unknown>, span: RequestSpan | null): void
  shutdown(): Promise<void>
}

export async function startOtlpLogs (options: OtlpLogsOptions): Promise<OtlpLogs> {
  const exporter = await exporterFor(options)
  const provider = new LoggerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': 'portico', ...options.resources })),
    processors: [new BatchLogRecordProcessor({ exporter, scheduledDelayMillis: 1000, maxQueueSize: 8192 })]
  })
  const logger = provider.getLogger('portico.access')
  return {
    emit (message, fields, span) {
      const attributes: Record<string, string | number | boolean> = {}
      for (const key in fields) {
        const v = fields[key]
        if (v === undefined || v === null) continue
        attributes[key] = typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : JSON.stringify(v)
      }
      const context = span === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, { traceId: span.traceId, spanId: span.spanId, traceFlags: span.recording ? TraceFlags.SAMPLED : TraceFlags.NONE })
      logger.emit({ severityNumber: SeverityNumber.INFO, severityText: 'INFO', body: message, attributes, context })
    },
    shutdown: () => provider.shutdown()
  }
}

async function exporterFor (options: OtlpLogsOptions): Promise<LogRecordExporter> {
  const target = await otlpTarget(options, '/v1/logs')
  if (target.protocol === 'http') {
    const { OTLPLogExporter } = await import('@opentelemetry/exporter-logs-otlp-proto')
    return new OTLPLogExporter(target.options)
  }
  const { OTLPLogExporter } = await import('@opentelemetry/exporter-logs-otlp-grpc')
  return new OTLPLogExporter(target.options)
}
