/**
 * Combining several targets into one server for the client: the initialize result
 * (capabilities united, versions negotiated) and paginated list results (one cursor that
 * carries each target's own cursor).
 */

import { isSupportedVersion, LATEST_PROTOCOL_VERSION } from '../protocol/jsonrpc.ts'
import type { TargetInitResult } from '../upstream/target.ts'

export const GATEWAY_INFO = { name: 'portico', version: '0.1.0' }

/** Flags inside a capability (`listChanged`, `subscribe`) are true when any target has them. */
export function mergeCapabilities (all: Array<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {}
  for (const caps of all) {
    for (const [key, value] of Object.entries(caps)) {
      if (value === undefined || value === null) continue
      const into = out[key] ??= {}
      if (typeof value !== 'object') continue
      for (const [flag, v] of Object.entries(value as Record<string, unknown>)) {
        if (typeof v === 'boolean') into[flag] = into[flag] === true || v
        else if (!(flag in into)) into[flag] = v
      }
    }
  }
  return out
}

/** The version to answer the client with: its own when we speak it, else our latest. */
export function negotiateVersion (requested: unknown): string {
  return typeof requested === 'string' && isSupportedVersion(requested) ? requested : LATEST_PROTOCOL_VERSION
}

/**
 * What a session of several targets routes (mcp/session/routing.ts): named items, resources, the
 * completions of either, logging levels fanned out. Anything else a target offers (tasks,
 * experimental features) would answer "not supported across several targets", so it is not
 * advertised; one target's capabilities pass through whole.
 */
const MULTIPLEXED_CAPABILITIES = new Set(['tools', 'prompts', 'resources', 'completions', 'logging'])

export function mergeInitialize (targets: Array<{ name: string, result: TargetInitResult }>, requestedVersion: unknown): Record<string, unknown> {
  const capabilities = mergeCapabilities(targets.map(t => t.result.capabilities ?? {}))
  if (targets.length > 1) for (const key of Object.keys(capabilities)) if (!MULTIPLEXED_CAPABILITIES.has(key)) delete capabilities[key]
  const result: Record<string, unknown> = {
    protocolVersion: negotiateVersion(requestedVersion),
    capabilities,
    serverInfo: targets.length === 1 ? targets[0]!.result.serverInfo : GATEWAY_INFO
  }
  const instructions = targets.filter(t => typeof t.result.instructions === 'string' && t.result.instructions !== '')
  if (instructions.length === 1 && targets.length === 1) result.instructions = instructions[0]!.result.instructions
  else if (instructions.length > 0) result.instructions = instructions.map(t => `[${t.name}] ${t.result.instructions!}`).join('\n\n')
  return result
}

/** Per-target cursors of a fan-out list, in one opaque string. */
export function encodeCursor (cursors: Record<string, string>): string {
  return Buffer.from(JSON.stringify(cursors)).toString('base64url')
}

export function decodeCursor (cursor: string): Record<string, string> | null {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return null
    for (const v of Object.values(value)) if (typeof v !== 'string') return null
    return value as Record<string, string>
  } catch {
    return null
  }
}
