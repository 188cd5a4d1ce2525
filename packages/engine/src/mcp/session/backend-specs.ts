/**
 * What the gateway knows of each MCP backend's settings: those its sessions were started
 * with, so that a config change closes the sessions of backends whose settings changed or
 * that left the config (the rest carry on); and each backend's key and settings by name,
 * since a stdio spare knows its backend only by name (its room check needs the cap).
 */

import type { BackendIR, McpBackendSpecIR } from '../../ir/types.ts'

/** The MCP backends of a config, by key. */
export function mcpSpecs (backends: readonly BackendIR[]): Map<string, McpBackendSpecIR> {
  const current = new Map<string, McpBackendSpecIR>()
  for (const b of backends) if (b.kind === 'mcp' && b.mcp !== undefined) current.set(b.key, b.mcp)
  return current
}

export class BackendSpecs {
  /** The settings sessions were started with, by backend key, as JSON (compared whole). */
  private readonly started = new Map<string, string>()
  private readonly byName = new Map<string, { key: string, spec: McpBackendSpecIR }>()

  /** A session of the backend was started with its current settings. */
  sessionStarted (backend: BackendIR): void {
    this.started.set(backend.key, JSON.stringify(backend.mcp))
  }

  /** A backend with stdio targets was admitted: its spare can find its cap by name. */
  rememberByName (backend: BackendIR): void {
    this.byName.set(backend.name, { key: backend.key, spec: backend.mcp! })
  }

  byBackendName (name: string): { key: string, spec: McpBackendSpecIR } | undefined {
    return this.byName.get(name)
  }

  /** Whether the sessions of a backend must close under the `current` config: it left, or its settings changed. */
  stale (key: string, current: ReadonlyMap<string, McpBackendSpecIR>): boolean {
    const spec = current.get(key)
    return spec === undefined || (this.started.has(key) && this.started.get(key) !== JSON.stringify(spec))
  }

  /** After the stale sessions were closed: the settings of `backends` are the ones served from now on. */
  update (backends: readonly BackendIR[], current: ReadonlyMap<string, McpBackendSpecIR>): void {
    for (const key of [...this.started.keys()]) {
      if (!current.has(key)) this.started.delete(key)
      else this.started.set(key, JSON.stringify(current.get(key)))
    }
    this.byName.clear()
    for (const b of backends) if (b.kind === 'mcp' && b.mcp !== undefined) this.byName.set(b.name, { key: b.key, spec: b.mcp })
  }
}
