/**
 * Requests a target makes of the client (sampling, elicitation, roots), and their ids both
 * ways. Each gets an id of the session's own (`portico-N`) on its way to the client: two
 * targets may well both use id 1, and the client's answer must find its way back to the
 * target that asked, under the target's own id.
 */

import type { JsonRpcId, JsonRpcResponse } from '../protocol/jsonrpc.ts'
import type { TargetConnection } from '../upstream/target.ts'

interface Origin {
  target: TargetConnection
  id: JsonRpcId
}

export class ServerRequests {
  private next = 1
  private readonly byClientSideId = new Map<string, Origin>()

  /** The id the client sees for the target's request `id`. */
  issue (target: TargetConnection, id: JsonRpcId): string {
    const clientSideId = `portico-${this.next++}`
    this.byClientSideId.set(clientSideId, { target, id })
    return clientSideId
  }

  /** The client answered: the target that asked, and the answer under the target's id; null for an answer to nothing asked. */
  answer (response: JsonRpcResponse): { target: TargetConnection, response: JsonRpcResponse } | null {
    if (response.id === null) return null
    const key = String(response.id)
    const origin = this.byClientSideId.get(key)
    if (origin === undefined) return null
    this.byClientSideId.delete(key)
    return { target: origin.target, response: { ...response, id: origin.id } as JsonRpcResponse }
  }

  /** The target withdrew its request `requestId` (notifications/cancelled): the ids the client knew it by. */
  withdraw (target: TargetConnection, requestId: unknown): string[] {
    const withdrawn: string[] = []
    for (const [clientSideId, origin] of this.byClientSideId) {
      if (origin.target !== target || origin.id !== requestId) continue
      this.byClientSideId.delete(clientSideId)
      withdrawn.push(clientSideId)
    }
    return withdrawn
  }
}
