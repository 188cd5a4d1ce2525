/**
 * The part of the settings (settings.ts) a data-plane worker thread runs: the access log's
 * settings and the settings' crossing to a worker and back. Apart from settings.ts, which
 * reads the environment and the config file's static section (schema validation, CEL checks,
 * the mesh's CA defaults), so that a worker loads none of that (docs/multicore.md, Memory).
 */

import { compileAccessLogFields, type AccessLogFields } from '@portico/engine/serving'
import type { StaticConfig } from '@portico/engine'
import type { OtlpLogsOptions } from './otlp-logs.ts'

/** config.accessLog (env ACCESS_LOG as JSON): the CEL fields and filter, compiled; the OTLP logs export. */
export interface AccessLogSettings { fields: AccessLogFields | null, otlp: OtlpLogsOptions | null, config: StaticConfig['accessLog'] }

/** What of the settings (settings.ts `Settings`) crosses here. */
interface WithAccessLog { accessLog: AccessLogSettings, tracing: { resources?: Record<string, string> } | null }

/**
 * Settings as they cross to a data-plane worker (structured clone): the access log's compiled
 * CEL fields stay behind, and the worker compiles them again from the same config.
 */
export function transferableSettings<S extends WithAccessLog> (s: S): S {
  return { ...s, accessLog: { ...s.accessLog, fields: null } }
}

/** The worker's side of transferableSettings: the fields compiled again, the rest as received. */
export function receivedSettings<S extends WithAccessLog> (s: S): S {
  return { ...s, accessLog: { ...s.accessLog, fields: accessLogSettings(s.accessLog.config, s.tracing).fields } }
}

export function accessLogSettings (a: StaticConfig['accessLog'], tracing: Pick<NonNullable<StaticConfig['tracing']>, 'resources'> | null | undefined): AccessLogSettings {
  let fields: AccessLogFields | null
  try {
    fields = compileAccessLogFields(a)
  } catch (err) {
    throw new Error(`config.accessLog / ACCESS_LOG: ${(err as Error).message}`)
  }
  const o = a?.otlp
  const otlp = o === undefined
    ? null
    : { otlpEndpoint: o.otlpEndpoint, otlpProtocol: o.otlpProtocol ?? 'grpc', ...(o.path !== undefined ? { path: o.path } : {}), headers: o.headers ?? {}, resources: tracing?.resources ?? {} }
  return { fields, otlp, config: a }
}
