/**
 * One 2026-07-28 client request served by an initialize-era target, between the shared
 * upstream session and the client's POST: ids, progress tokens and result shapes mapped
 * between the revisions, and the target's own requests bridged to the multi-round-trip
 * flow of 2026-07-28.
 *
 * An initialize-era target asks the client for input by sending it a request (sampling,
 * elicitation, roots) while it works on a call; a 2026-07-28 client expects instead a
 * result `{ resultType: 'input_required', inputRequests, requestState }` and retries its
 * request with `inputResponses`. So, for tools/call, prompts/get and resources/read (the
 * methods that may answer input_required):
 *  1. the target's requests are gathered for a moment (it may ask several at once) and
 *     answered to the client as input_required, keyed by the id Portico gave each request;
 *     the upstream call stays open, parked on this replica (ParkedCalls), and the
 *     requestState names it, sealed (AES-GCM under the session key: not forgeable);
 *  2. the retry's inputResponses go to the target as the responses to its requests, and the
 *     retry's POST carries the rest of the call: its result, or the next round of input.
 * Keys the retry lacks are asked again (a new input_required, not an error); unknown keys
 * are ignored; a malformed inputResponses, or a requestState that is not Portico's, names
 * another call or has expired, is -32602. A parked call waits the target's requestTimeout
 * for the client to come back, then is cancelled upstream.
 *
 * Input requests of other methods, and those the client's `clientCapabilities` do not
 * cover, are refused to the target (-32601), as a client without the capability would.
 */

import { randomUUID } from 'node:crypto'
import type { Channel } from './channels.ts'
import type { SessionIdCodec } from './session-id.ts'
import { modernResult } from '../revisions/revision-2026.ts'
import { checkInputResponses, inputKey, inputRefusal, inputRequiredResult, logWanted, modernError } from '../revisions/revision-2026-input.ts'
import {
  errorResponse, INTERNAL_ERROR, isRequest, isResponse, METHOD_NOT_FOUND, resultResponse,
  type JsonRpcId, type JsonRpcMessage, type JsonRpcResponse
} from '../protocol/jsonrpc.ts'

/** A target asking several things at once sends them back to back: gathered this long. */
const GATHER_MS = 15
export const REQUEST_STATE_PREFIX = 'p26s.'
/** A requestState carries the answers given so far (sampling results can be long): bounded all the same. */
const MAX_REQUEST_STATE = 4 * 1024 * 1024

/** What one POST of the call brings: its channel, id, and the `_meta` that may change per retry. */
export interface CallBinding {
  channel: Channel
  clientId: JsonRpcId
  clientToken: unknown
  logLevel: unknown
}

export interface ModernCallOptions {
  upstreamId: string
  method: string
  /** The progress token sent upstream (undefined when the client asked for no progress). */
  upstreamToken: string | undefined
  serverInfo: unknown
  clientCapabilities: Record<string, unknown>
  /** Sends a response to a target's request through the session. */
  answer(message: JsonRpcResponse): void
  /** Parks the call while the client is asked for input; returns the requestState naming it. */
  park(call: ModernCall): string
}

/** An input request of the target's that the client has not answered yet. */
interface AskedInput {
  /** The id the session gave the target's request (its answer goes back under it). */
  id: string
  method: string
  params: Record<string, unknown>
}

export class ModernCall implements Channel {
  private binding: CallBinding | null
  private readonly options: ModernCallOptions
  /** The target's requests waiting for the client's input, by their inputRequests key. */
  readonly asked = new Map<string, AskedInput>()
  /** Every input given in this call so far, by key: sealed into each requestState. */
  readonly answers: Record<string, unknown> = {}
  /** Answers known before the target asks (a call run again on another replica). */
  private readonly prefilled: Map<string, unknown>
  /** How often each question was asked in this call (the occurrence in its key). */
  private readonly seen = new Map<string, number>()
  /** The final answer, kept while the call is parked (the next POST takes it). */
  private final: { result: Record<string, unknown> } | { error: { code: number, message: string, data?: unknown } } | null = null
  private gatherTimer: NodeJS.Timeout | undefined
  /** The final response came from the target. */
  done = false
  /** Set by ParkedCalls: the call's name in requestStates. */
  parkId: string | null = null

  constructor (binding: CallBinding, options: ModernCallOptions, prefilled: Record<string, unknown> = {}) {
    this.binding = binding
    this.options = options
    this.prefilled = new Map(Object.entries(prefilled))
  }

  get upstreamId (): string {
    return this.options.upstreamId
  }

  /** Whether the client's POST for this call is the one given (it may cancel the call by closing). */
  isBoundTo (channel: Channel): boolean {
    return this.binding?.channel === channel
  }

  calling (target: string): void {
    this.binding?.channel.calling?.(target)
  }

  /** Open while the call lives: parked, its messages wait for the next POST. */
  get open (): boolean {
    return !this.done
  }

  deliver (message: JsonRpcMessage): boolean {
    const o = this.options
    if (isResponse(message)) {
      if (message.id !== o.upstreamId) return true
      this.done = true
      clearTimeout(this.gatherTimer)
      if ('result' in message) this.final = { result: modernResult(o.method, message.result, o.serverInfo) }
      else this.final = { error: modernError(message.error) }
      // Input still asked for is moot now.
      this.asked.clear()
      this.flushFinal()
      return true
    }
    if (isRequest(message)) {
      const refusal = inputRefusal(message.method, o.method, o.clientCapabilities)
      if (refusal !== null) {
        o.answer(errorResponse(message.id, METHOD_NOT_FOUND, refusal))
        return true
      }
      const params = message.params ?? {}
      const base = inputKey(message.method, params, 0).slice(0, -2)
      const occurrence = this.seen.get(base) ?? 0
      this.seen.set(base, occurrence + 1)
      const key = `${base}-${occurrence}`
      if (this.prefilled.has(key)) {
        // Answered already (in the rounds before this replica ran the call again).
        const value = this.prefilled.get(key)
        this.prefilled.delete(key)
        this.answers[key] = value
        o.answer({ jsonrpc: '2.0', id: message.id, result: value as Record<string, unknown> })
        return true
      }
      this.asked.set(key, { id: String(message.id), method: message.method, params })
      clearTimeout(this.gatherTimer)
      this.gatherTimer = setTimeout(() => this.askClient(), GATHER_MS)
      return true
    }
    const params = (message.params ?? {}) as Record<string, unknown>
    const b = this.binding
    switch (message.method) {
      case 'notifications/progress':
        if (b === null || o.upstreamToken === undefined || params.progressToken !== o.upstreamToken || b.clientToken === undefined) return true
        return b.channel.deliver({ ...message, params: { ...params, progressToken: b.clientToken } })
      case 'notifications/message':
        if (b === null || !logWanted(params.level, b.logLevel)) return true
        return b.channel.deliver(message)
      case 'notifications/cancelled':
        // The target withdrew one of its requests.
        for (const [key, input] of this.asked) if (input.id === String(params.requestId)) this.asked.delete(key)
        return true
      default:
        return true
    }
  }

  /** Answers the bound POST with input_required for everything asked, and parks the call. */
  private askClient (): void {
    const b = this.binding
    if (b === null || this.done || this.asked.size === 0) return
    const requestState = this.options.park(this)
    this.binding = null
    const inputRequests: Record<string, { method: string, params: Record<string, unknown> }> = {}
    for (const [key, input] of this.asked) inputRequests[key] = { method: input.method, params: input.params }
    b.channel.deliver(resultResponse(b.clientId, inputRequiredResult(inputRequests, requestState, this.options.serverInfo)))
  }

  /**
   * Checks a retry's `inputResponses` before anything is sent: null when usable, else why
   * not (the call stays parked for a proper retry).
   */
  checkResponses (responses: unknown): string | null {
    return checkInputResponses(responses, key => this.asked.get(key)?.method)
  }

  /**
   * A retry of the call (checkResponses passed): the responses go to the target, the POST
   * carries the rest of the call — its final answer if it came meanwhile, input asked
   * again when keys are missing, or whatever the target does next.
   */
  resume (binding: CallBinding, responses: unknown): void {
    this.binding = binding
    if (responses !== undefined) {
      for (const [key, value] of Object.entries(responses as Record<string, unknown>)) {
        const input = this.asked.get(key)
        if (input === undefined) continue
        this.asked.delete(key)
        this.answers[key] = value
        this.options.answer({ jsonrpc: '2.0', id: input.id, result: value as Record<string, unknown> })
      }
    }
    if (this.final !== null) return this.flushFinal()
    if (this.asked.size > 0) {
      clearTimeout(this.gatherTimer)
      this.gatherTimer = setTimeout(() => this.askClient(), GATHER_MS)
    }
  }

  /** The parked call was never taken up again: what the target asked is answered with an error. */
  expire (): void {
    clearTimeout(this.gatherTimer)
    for (const input of this.asked.values()) this.options.answer(errorResponse(input.id, INTERNAL_ERROR, 'the client did not come back with input in time'))
    this.asked.clear()
    this.done = true
  }

  private flushFinal (): void {
    const b = this.binding
    if (b === null || this.final === null) return
    b.channel.deliver('result' in this.final ? resultResponse(b.clientId, this.final.result) : { jsonrpc: '2.0', id: b.clientId, error: this.final.error })
  }
}

/** Where a requestState points: the parked call, what it was for (a retry must match), and the input given so far. */
interface SealedState {
  park: string
  backend: string
  method: string
  name: string
  /** Every answer the client gave in earlier rounds, by key: what another replica needs to run the call again. */
  answers: Record<string, unknown>
}

/** What a retry's requestState leads to: the parked call, a run of the call from the start with the answers so far, or why neither. */
export type Resumption = { call: ModernCall } | { rerun: Record<string, unknown> } | { refused: string }

/**
 * Calls waiting for a client's input on this replica. A requestState is sealed with the
 * session key, so a forged or altered one does not open. One that opens but names a call
 * not parked here (another replica parked it, or this process restarted) is still good: it
 * carries every answer given so far, so the call is run again from the start and the
 * target's questions already answered are answered from it (the keys derive from the
 * questions), the rest asked as usual. That re-runs the target's work before its first
 * question — the multi-round-trip model of 2026-07-28, where a server re-enters its handler.
 */
export class ParkedCalls {
  private readonly codec: SessionIdCodec
  private readonly calls = new Map<string, { call: ModernCall, timer: NodeJS.Timeout }>()

  constructor (codec: SessionIdCodec) {
    this.codec = codec
  }

  get size (): number {
    return this.calls.size
  }

  /** Parks `call` for `timeoutMs` (then `onExpire`); returns the requestState naming it. */
  park (call: ModernCall, what: Omit<SealedState, 'park' | 'answers'>, timeoutMs: number, onExpire: () => void): string {
    call.parkId ??= randomUUID()
    const state: SealedState = { park: call.parkId, ...what, answers: call.answers }
    clearTimeout(this.calls.get(call.parkId)?.timer)
    const timer = setTimeout(() => {
      if (this.calls.get(state.park)?.call !== call) return
      this.calls.delete(state.park)
      call.expire()
      onExpire()
    }, timeoutMs)
    timer.unref()
    this.calls.set(call.parkId, { call, timer })
    return this.codec.seal(REQUEST_STATE_PREFIX, state)
  }

  /**
   * What a retry's requestState leads to (the call stays parked until `unpark`, so a retry
   * that cannot be used leaves it for a proper one): refused when the state is not Portico's,
   * was altered, or names another backend, method or item.
   */
  find (requestState: unknown, expected: Omit<SealedState, 'park' | 'answers'>): Resumption {
    if (typeof requestState !== 'string') return { refused: 'Invalid params: requestState must be a string' }
    const state = this.codec.open(REQUEST_STATE_PREFIX, requestState, MAX_REQUEST_STATE) as SealedState | null
    if (state === null || typeof state.park !== 'string' || state.answers === null || typeof state.answers !== 'object') return { refused: 'Invalid or expired requestState' }
    if (state.backend !== expected.backend || state.method !== expected.method || state.name !== expected.name) {
      return { refused: 'Invalid requestState: it belongs to another request' }
    }
    const entry = this.calls.get(state.park)
    return entry !== undefined ? { call: entry.call } : { rerun: state.answers }
  }

  /** Takes a call off the shelf: a retry carries it on. */
  unpark (call: ModernCall): void {
    if (call.parkId === null) return
    const entry = this.calls.get(call.parkId)
    if (entry?.call !== call) return
    clearTimeout(entry.timer)
    this.calls.delete(call.parkId)
  }

  clear (): void {
    for (const { call, timer } of this.calls.values()) {
      clearTimeout(timer)
      call.expire()
    }
    this.calls.clear()
  }
}
