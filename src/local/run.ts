// Local mode: one process runs the folder store, the local process backend, both reconcilers and
// the gateway, wired exactly as the cluster mode wires the Kubernetes store and backend.
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { FolderStore } from '../store/folder.js';
import { LocalProcessBackend } from '../workload/local.js';
import { ControllerMetrics } from '../controller/metrics.js';
import { Autoscaler } from '../autoscale/autoscaler.js';
import { windowsOf } from '../autoscale/decide.js';
import { startManager } from '../controller/manager.js';
import { logEvents } from '../controller/events.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import { liveRoutes, routingDefaults } from '../gateway/routing.js';
import { servicesFromConfig } from '../gateway/call.js';
import { createGateway, type Gateway } from '../gateway/server.js';
import { statusApi } from './statusApi.js';
import { gateFromConfig } from '../gateway/auth/index.js';

export interface LocalOptions {
  dir: string;
  config: Config;
  logger: Logger;
  clock?: () => Date;
  random?: () => number;
  /** A monotonic clock in ms (the autoscaler's windows and the gateway's demand counters). */
  now?: () => number;
  resyncMs?: number;
}

export interface LocalMode {
  port: number;
  /** The gRPC surface's port (GRPC_PORT), when it listens. */
  grpcPort: number | undefined;
  store: FolderStore;
  /** The request autoscaler of the models whose replicas follow the calls. */
  autoscaler: Autoscaler;
  /** Prediction calls started and in flight. */
  calls: Gateway['calls'];
  /** Drains the gateway (in-flight calls finish), then stops the model processes. */
  stop(): Promise<void>;
}

export async function runLocal(opts: LocalOptions): Promise<LocalMode> {
  const { config, logger } = opts;
  const clock = opts.clock ?? (() => new Date());
  const store = new FolderStore({ dir: opts.dir, logger, clock });
  const now = opts.now ?? (() => performance.now());
  // A replica leaving (scale-down, rollout) runs on while the gateway has calls in flight to it, up to
  // a stream's deadline.
  let busy: (address: string) => boolean = () => false;
  const backend = new LocalProcessBackend({ logger, healthIntervalMs: config.healthIntervalMs, busy: (a) => busy(a), busyGraceMs: config.streamTimeoutSeconds * 1000 });
  const metrics = new GatewayMetrics();
  // --auth kubernetes asks the cluster of the kubeconfig (KUBECONFIG, ~/.kube/config) about callers;
  // a missing kubeconfig stops the start here, before anything runs.
  const gate = await gateFromConfig(config, metrics.registry);
  const queueMetrics = new ControllerMetrics(metrics.registry);

  const events = logEvents(logger);
  const routes = liveRoutes(store, routingDefaults(config));
  const services = servicesFromConfig(config, { routes, metrics, logger, random: opts.random ?? Math.random, gate, now });
  busy = (address) => services.upstream.balancer.outstanding(address) > 0;
  // Calls waiting for a model to wake go once its replicas are in the status.
  store.onChange(() => services.admission.recheck());
  // The request autoscaler reads this gateway's demand and scales the model processes.
  const autoscaler = new Autoscaler({
    models: store,
    target: backend,
    demand: { read: () => new Map([['local', services.demand.read()]]), onHeld: (l) => services.demand.onHeld(l), replicasInFlight: () => services.upstream.balancer.busy() },
    events,
    logger,
    intervalMs: config.autoscaleIntervalMs,
    windows: windowsOf(config.autoscaleStableWindowSeconds),
    now,
    clock,
  });
  const manager = startManager({ store, backend, events, domain: config.endpointDomain, clock, logger, metrics: queueMetrics, resyncMs: opts.resyncMs ?? 30_000, scaledOf: (key) => autoscaler.statusOf(key) });

  const gateway = createGateway({
    ...services,
    ready: () => store.loaded,
    statusApi: statusApi(store),
    resources: store,
  });
  const stop = async (): Promise<void> => {
    await gateway.drain(config.drainSeconds * 1000);
    autoscaler.stop();
    manager.stop();
    store.stop();
    await backend.stop();
    await services.upstream.close();
  };
  let port: number;
  let grpcPort: number | undefined;
  try {
    port = await gateway.listen(config.port, config.host);
    const probePort = config.probePort ? await gateway.listenProbes(config.probePort, config.host) : undefined;
    grpcPort = config.grpcPort ? await gateway.listenGrpc(config.grpcPort, config.host, config.maxRequestBytes) : undefined;
    logger.info({ port, probePort, grpcPort, host: config.host, auth: config.auth, dir: opts.dir, domain: config.endpointDomain }, 'gateway listening');
    // Not ready (503 on /readyz) until the manifests are loaded.
    await store.start();
    logger.info({ endpoints: store.listEndpoints().length, deployedModels: store.listDeployedModels().length }, 'manifests loaded');
    autoscaler.start();
  } catch (err) {
    await stop();
    throw err;
  }

  return { port, grpcPort, store, autoscaler, calls: gateway.calls, stop };
}
