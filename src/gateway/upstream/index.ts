// Calling model replicas (the pool, its two transports, its balancer and health checks, and how
// their failures read), as the rest of the gateway sees it.
export { SMALL_BODY_BYTES, UpstreamPool, type UpstreamPoolOptions, type UpstreamTarget } from './pool.js';
export { upstreamFailure } from './failures.js';
export { clientAborted, type Cancellation, type UpstreamRequest } from './transport.js';
export { NO_TRAFFIC_INTERVAL_MS, type HealthTarget } from './health.js';
export type { LoadTarget } from './load.js';
