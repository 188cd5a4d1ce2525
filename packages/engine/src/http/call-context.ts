/**
 * What the backend call reads and writes of one request's state. request/context.ts
 * RequestContext has all of it; it is declared here, by the side that uses it, so http/
 * does not import the pipeline (the pipeline passes its context and hooks in).
 */

import type { InboundRequest, InboundResponse } from './inbound.ts'
import type { Duplex } from 'node:stream'
import type { BackendIR, RouteTimeoutsIR } from '../ir/types.ts'
import type { HeaderMap } from '../ir/header-map.ts'
import type { CallTraceContext } from '../trace/backend-call.ts'
import type { BodyContext } from './request-body.ts'
import type { InterceptContext } from './response-intercept.ts'
import type { GrpcCall } from './grpc.ts'
import type { FrontendSettings } from './frontend.ts'

export interface CallContext extends CallTraceContext, BodyContext, InterceptContext {
  readonly req: InboundRequest
  readonly res: InboundResponse
  readonly method: string
  readonly pathAndQuery: string
  /** Monotonic start of the request (ms): the request timeout counts from it. */
  readonly startMono: number
  readonly listener: { readonly frontend: Pick<FrontendSettings, 'requestBodyIdleTimeoutMs' | 'requestBodyMinRate' | 'backendRequestTimeoutMs' | 'streamIdleTimeoutMs'> }
  readonly route: { readonly ir: { readonly timeouts?: RouteTimeoutsIR } } | null
  readonly backend: BackendIR | null
  /** Request headers sent upstream. */
  readonly headers: HeaderMap
  readonly upgrade: { socket: Duplex, head: Buffer } | null
  upgraded: boolean
  status: number
  reason: string
  error: string | null
  responseHeaders: HeaderMap
  /** A replacement for the backend's response body, set by a response policy. */
  responseBody: Buffer | null
  upstreamStart: number
  upstreamHeadersAt: number
  /** Bytes of the backend's response body passed to the client (metrics). */
  responseBytes: number
  /** Cancels the call in progress (the client left). */
  abortUpstream: (() => void) | null
  /** A gRPC request: its call, whose status the answer fills in. */
  readonly grpc: GrpcCall | null
}

/**
 * What the backend call hands back to the pipeline that runs it. The functions take the
 * pipeline's runtime and context as they were given to callUpstream, so one constant hooks
 * object serves every request (nothing allocated per call).
 */
export interface UpstreamHooks<R, C extends CallContext> {
  /** Answer from the proxy: the call could not be made or failed before the backend answered. */
  respondLocal(rt: R, ctx: C, status: number, body: string, reason: string, error?: string | null, headers?: HeaderMap): void
  /**
   * The backend's head arrived (`ctx.status`, `ctx.responseHeaders` end-to-end): the response
   * policies and the trace's response snapshots. `ctx.responseHeaders` is final after.
   */
  responseHead(rt: R, ctx: C): void
  /** The backend accepted an upgrade (101): the trace's response snapshots. */
  upgradeHead(rt: R, ctx: C): void
}
