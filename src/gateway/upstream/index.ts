// Calling model replicas (the pool, its two transports and how their failures read), as the rest
// of the gateway sees it.
export { SMALL_BODY_BYTES, UpstreamPool } from './pool.js';
export { isConnectFailure, upstreamFailure } from './failures.js';
export type { PoolOptions as UpstreamOptions } from './nodeHttp.js';
export type { AnswerReading, Cancellation, OpenResponse, Transport, UpstreamRequest, WholeAnswer } from './transport.js';
