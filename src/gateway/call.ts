// What one prediction call carries through the gateway, and the services handlers use. Handlers
// are short: parse → resolve → adapt → forward → respond; they throw ApiError and never format one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dialect } from '../errors.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from './metrics.js';
import type { Route, RouteDestination, RoutingTable } from './routing.js';
import type { Config } from '../config.js';
import { UpstreamPool, type Cancellation } from './upstream.js';
import { BodyMemory, type BodyLease } from './bodyMemory.js';

export type CallMethod = 'predict' | 'rawPredict' | 'explain' | 'tfserving';

export interface Call {
  id: string;
  dialect: Dialect;
  method: CallMethod;
  /** `namespace/name` of the Endpoint, or '-' before it is resolved. */
  endpoint: string;
  /** `namespace/name` of the DeployedModel, or '-' before it is resolved. */
  modelKey: string;
  deployedModelId: string;
  startNs: bigint;
  requestBytes: number;
  responseBytes?: number;
  /** This call's share of the memory for bodies held whole (see bodyMemory.ts). */
  lease: BodyLease;
  /** Requested when the client leaves before its answer started: the model call is cancelled. */
  cancel: Cancellation;
}

export interface HandlerServices {
  routes(): RoutingTable;
  upstream: UpstreamPool;
  metrics: GatewayMetrics;
  logger: Logger;
  random(): number;
  maxJsonDepth: number;
  maxResponseBytes: number;
  memory: BodyMemory;
}

/** The services of a gateway from its settings (local mode and the cluster gateway build them alike). */
export function servicesFromConfig(config: Config, parts: Pick<HandlerServices, 'routes' | 'metrics' | 'logger' | 'random'>): HandlerServices {
  return {
    ...parts,
    upstream: new UpstreamPool({ keepAliveMs: config.upstreamKeepAliveMs, connections: config.upstreamConnections, maxAgeMs: config.upstreamConnectionMaxAgeMs }),
    maxJsonDepth: config.maxJsonDepth,
    maxResponseBytes: config.maxResponseBytes,
    memory: new BodyMemory(config.bufferedBodyBytes),
  };
}

export type Handler = (req: IncomingMessage, res: ServerResponse, call: Call, route: Route, dest: RouteDestination, svc: HandlerServices) => Promise<void>;
