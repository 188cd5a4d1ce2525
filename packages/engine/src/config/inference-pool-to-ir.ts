/**
 * A standalone `inferencePool` backend → a BackendIR whose endpoints are the pool's model
 * servers and whose `inferencePool` says how to reach its endpoint picker
 * (pipeline/inference-pool.ts serves it).
 */

import type { Static } from '@sinclair/typebox'
import type { InferencePoolSchema } from './schema.ts'
import type { BackendIR, InferencePoolIR } from '../ir/types.ts'
import { checkTimerMs, parseDuration } from '../util/duration.ts'
import { readPemField, type FileFieldContext } from './referenced-file.ts'
import { endpointLabel, parseEndpoint, type PoolEndpoint } from '../inference/endpoints.ts'

type Path = Array<string | number>
type InferencePoolConfig = Static<typeof InferencePoolSchema>

/** The picker's per-message wait when the config sets none. */
export const DEFAULT_PICKER_TIMEOUT_MS = 10_000

/** The reference picker's own request body limit (pkg/lwepp/handlers: 10 MiB). */
export const DEFAULT_PICKER_MAX_BODY_BYTES = 10 * 1024 * 1024

export function inferencePoolToIR (pool: InferencePoolConfig, path: Path, files: FileFieldContext): BackendIR | undefined {
  const report = files.report
  let ok = true
  const fail = (at: Path, message: string): void => {
    ok = false
    report(at, message)
  }
  const ports = (pool.targetPorts ?? []).map(p => p.number)
  if (new Set(ports).size !== ports.length) fail([...path, 'targetPorts'], 'target ports must be distinct')
  const endpoints: PoolEndpoint[] = []
  pool.endpoints.forEach((text, i) => {
    const parsed = parseEndpoint(text, ports)
    if (parsed === null) fail([...path, 'endpoints', i], `"${text}" is not an IP address${ports.length === 0 ? ' with a port (ip:port, [v6]:port; or set targetPorts)' : ' or ip:port'}`)
    else endpoints.push(...parsed)
  })
  const labels = endpoints.map(endpointLabel)
  if (ok && new Set(labels).size !== labels.length) fail([...path, 'endpoints'], 'endpoints must be distinct')

  const picker = pool.endpointPicker
  const pickerAt = [...path, 'endpointPicker']
  const target = picker.host
  if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(target) || Number(target.slice(target.lastIndexOf(':') + 1)) > 65535 || Number(target.slice(target.lastIndexOf(':') + 1)) < 1) {
    fail([...pickerAt, 'host'], `"${target}" is not host:port`)
  }
  let tls: InferencePoolIR['picker']['tls'] = { insecureSkipVerify: true }
  if (picker.tls === false) tls = null
  else if (picker.tls !== undefined) {
    const ca = picker.tls.ca !== undefined ? readPemField(picker.tls.ca, [...pickerAt, 'tls', 'ca'], files) : undefined
    if (picker.tls.ca !== undefined && ca === undefined) ok = false
    if (picker.tls.insecureSkipVerify === true && picker.tls.ca !== undefined) fail([...pickerAt, 'tls'], 'set ca or insecureSkipVerify, not both')
    tls = { insecureSkipVerify: picker.tls.insecureSkipVerify === true, ...(ca !== undefined ? { ca } : {}) }
  }
  const timeoutMs = picker.timeout !== undefined ? parseDuration(picker.timeout) : DEFAULT_PICKER_TIMEOUT_MS
  checkTimerMs(timeoutMs, [...pickerAt, 'timeout'], fail, 1)
  if (!ok) return undefined

  const name = pool.name ?? 'inference-pool'
  const h2c = pool.appProtocol === 'kubernetes.io/h2c'
  return {
    key: `inferencepool://${name}@${target}/${labels.join(',')}`,
    kind: 'static',
    name,
    protocol: 'http',
    ...(h2c ? { h2c: true } : {}),
    endpoints,
    target: name,
    inferencePool: {
      name,
      picker: {
        target,
        tls,
        failureMode: picker.failureMode ?? 'FailClose',
        timeoutMs,
        maxBodyBytes: picker.maxBodyBytes ?? DEFAULT_PICKER_MAX_BODY_BYTES
      },
      subsetHint: picker.subsetHint === true
    }
  }
}
