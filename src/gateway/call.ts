// What one call carries through the gateway (its context, handed whole to its handler) and the
// services handlers use. Handlers are short: parse → resolve → adapt → forward → respond; they
// throw ApiError and never format one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiError, Dialect } from '../errors.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from './metrics.js';
import type { ModelRoute, Route, RouteDestination, RoutingTable } from './routing.js';
import type { Config } from '../config.js';
import type { Params } from './routes.js';
import { UpstreamPool, type Cancellation } from './upstream/index.js';
import { NO_TRAFFIC_INTERVAL_MS } from './upstream/index.js';
import { Admission, type GatewayShare } from './admission.js';
import { Demand } from './demand.js';
import { BodyMemory, type BodyLease } from './bodyMemory.js';
import type { AnswerCompression } from './respond.js';
import { registerUpstreamMetrics } from './upstream/metrics.js';
import { OPEN_GATE, type Gate } from './auth/gate.js';
import { defaultMaxConnections, readProcessLimits } from './connections.js';

import type { Verb } from './routes.js';
import type { CuttableStream } from './stream/relay.js';

export type CallMethod = Verb | 'tfserving';

export interface HandlerServices {
  routes(): RoutingTable;
  upstream: UpstreamPool;
  /** Per-model concurrency limits (spec.serving.maxConcurrency), and the hold of models waking from zero. */
  admission: Admission;
  /** The calls of models that scale on calls, for the autoscaler. */
  demand: Demand;
  metrics: GatewayMetrics;
  logger: Logger;
  random(): number;
  maxJsonDepth: number;
  maxResponseBytes: number;
  /** Which answers go gzip-compressed (RESPONSE_GZIP_MIN_BYTES). */
  compression: AnswerCompression;
  /** Prefix affinity's block size (PREFIX_AFFINITY_BLOCK_CHARS); 0: none. */
  prefixBlockChars: number;
  /** The longest pause between two parts of a streamed answer (UPSTREAM_IDLE_TIMEOUT_SECONDS). */
  idleTimeoutMs: number;
  memory: BodyMemory;
  /** Who may call (--auth): every guarded call passes it before anything else. */
  gate: Gate;
  /** What clients must keep to (HEADERS_TIMEOUT_SECONDS and the settings after it). */
  clients: ClientLimits;
}

/** The limits on clients: how fast they send, how many connections they hold. */
export interface ClientLimits {
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  bodyMinBytesPerSecond: number;
  maxConnections: number;
  /** 0: none. */
  maxConnectionsPerClient: number;
}

/** One call's context: made by the lifecycle (lifecycle.ts), resolved by resolve.ts, used by one handler. */
export interface CallContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly svc: HandlerServices;
  /** The route's path parameters. */
  readonly params: Params;
  /** The X-Request-Id: the client's when it sent a sane one, else a fresh UUID. */
  readonly id: string;
  /** The caller once the gate let the call in (logs carry it); '-' before, or with --auth none. */
  user: string;
  /** The dialect its errors speak (a graphstorm model's predict switches it to 'graphstorm'). */
  dialect: Dialect;
  readonly method: CallMethod;
  /**
   * It came through the gRPC surface (grpc/): a stream the gateway cuts ends with a trailer that
   * the surface turns into the call's status, not with an error event.
   */
  readonly viaGrpc: boolean;
  /** `namespace/name` of the Endpoint, or UNRESOLVED (before it is resolved, and always on the TF Serving surface). */
  endpoint: string;
  /** `namespace/name` of the DeployedModel, or UNRESOLVED before it is resolved (set with `deployedModelId` by sendTo). */
  modelKey: string;
  deployedModelId: string;
  readonly startNs: bigint;
  requestBytes: number;
  responseBytes: number | undefined;
  /** This call's share of the memory for bodies held whole (see bodyMemory.ts). */
  readonly lease: BodyLease;
  /** Requested when the client leaves before its answer started: the model call is cancelled. */
  readonly cancel: Cancellation;
  /** Set once resolved: the Endpoint and the deployed model the call goes to (Endpoint calls). */
  route: Route | undefined;
  dest: RouteDestination | undefined;
  /** Set once resolved: the DeployedModel and its TF Serving path and query (TF Serving calls). */
  model: ModelRoute | undefined;
  modelPath: string | undefined;
  /** Set when the call was cut because its body broke the pace (bodyWatch.ts): its one answer. */
  cut: ApiError | undefined;
  /** Set while a streamed answer is under way: the drain ends it with an error event when its time runs out. */
  stream: CuttableStream | undefined;
}

/** A call on an Endpoint, resolved to its route and destination. */
export interface EndpointCall extends CallContext {
  route: Route;
  dest: RouteDestination;
}

/** A call on the TF Serving surface of one DeployedModel, resolved. */
export interface ModelCall extends CallContext {
  model: ModelRoute;
  modelPath: string;
}

export type EndpointHandler = (call: EndpointCall) => Promise<void>;

/** Points an Endpoint call at one of its deployed models: the destination and the ids its metrics and logs carry. */
export function sendTo(call: CallContext, dest: RouteDestination): void {
  call.dest = dest;
  call.deployedModelId = dest.deployedModelId;
  call.modelKey = dest.modelKey;
}

/** The services of a gateway from its settings (local mode and the cluster gateway build them alike). */
export function servicesFromConfig(config: Config, parts: Pick<HandlerServices, 'routes' | 'metrics' | 'logger' | 'random'> & { gate?: Gate; now?: () => number; share?: () => GatewayShare }): HandlerServices {
  const upstream = new UpstreamPool({
    keepAliveMs: config.upstreamKeepAliveMs,
    connections: config.upstreamConnections,
    streamConnections: config.upstreamStreamConnections,
    balancer: {
      consecutiveFailures: config.outlierConsecutiveFailures,
      baseEjectionMs: config.outlierEjectionSeconds * 1000,
      maxEjectionPercent: config.outlierMaxEjectionPercent,
      retryBudgetPercent: config.retryBudgetPercent,
      random: parts.random,
    },
    healthTargets: () => parts.routes().healthTargets(),
    healthChecks: { intervalMs: config.healthCheckIntervalMs, timeoutMs: config.healthCheckTimeoutMs, unhealthyThreshold: config.unhealthyThreshold, noTrafficIntervalMs: NO_TRAFFIC_INTERVAL_MS },
    loadTargets: () => parts.routes().loadTargets(),
    // A report is fresh for four intervals, and at least a second (a busy gateway's scrapes run late); a scrape gets at most one second.
    load: { intervalMs: config.loadScrapeIntervalMs, staleMs: Math.max(1000, 4 * config.loadScrapeIntervalMs), timeoutMs: Math.min(1000, 4 * config.loadScrapeIntervalMs) },
  });
  const admission = new Admission(undefined, parts.share);
  registerUpstreamMetrics(parts.metrics.registry, { balancer: upstream.balancer, health: upstream.health, load: upstream.load, admission });
  return {
    ...parts,
    gate: parts.gate ?? OPEN_GATE,
    upstream,
    admission,
    demand: new Demand(parts.now, () => upstream.balancer.busy()),
    maxJsonDepth: config.maxJsonDepth,
    maxResponseBytes: config.maxResponseBytes,
    compression: { minBytes: config.responseGzipMinBytes },
    prefixBlockChars: config.prefixAffinityBlockChars,
    idleTimeoutMs: config.idleTimeoutSeconds * 1000,
    memory: new BodyMemory(config.bufferedBodyBytes),
    clients: {
      headersTimeoutMs: config.headersTimeoutSeconds * 1000,
      bodyTimeoutMs: config.bodyTimeoutSeconds * 1000,
      bodyMinBytesPerSecond: config.bodyMinBytesPerSecond,
      maxConnections: config.maxConnections || defaultMaxConnections(readProcessLimits()),
      maxConnectionsPerClient: config.maxConnectionsPerClient,
    },
  };
}
