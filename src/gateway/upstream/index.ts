// Calling model replicas (the pool, its two transports and how their failures read), as the rest
// of the gateway sees it.
export { SMALL_BODY_BYTES, UpstreamPool, type UpstreamTarget } from './pool.js';
export { upstreamFailure } from './failures.js';
export type { Cancellation, UpstreamRequest } from './transport.js';
