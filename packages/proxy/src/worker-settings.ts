/**
 * The part of the settings (settings.ts) a data-plane worker thread runs: the access log's
 * settings and the settings' crossing to a worker and back. Apart from settings.ts, which
 * reads the environment and the config file's static section (schema validation, CEL checks,
 * the mesh's CA defaults), so that a worker loads none of that (docs/multicore.md, Memory).
 */

import { compileAccessLogFields, type AccessLogFields } from '@portico/engine/serving'
import type { StaticConfig } from '@portico/engine'
import type { Settings } from './settings.ts'

/**
 * Settings as they cross to a data-plane worker (structured clone): the access log's compiled
 * CEL fields stay behind, and the worker compiles them again from the same config.
 */
export function transferableSettings (s: Settings): Settings {
  return { ...s, accessLog: { ...s.accessLog, fields: null } }
}

/** The worker's side of transferableSettings: the fields compiled again, the rest as received. */
export function receivedSettings (s: Settings): Settings {
  return { ...s, accessLog: { ...s.accessLog, fields: accessLogSettings(s.accessLog.config, s.tracing).fields } }
}

export function accessLogSettings (a: StaticConfig['accessLog'], tracing: Pick<NonNullable<StaticConfig['tracing']>, 'resources'> | null | undefined): Settings['accessLog'] {
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
