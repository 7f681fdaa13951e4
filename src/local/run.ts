// Local mode: one process runs the folder store, the local process backend, both reconcilers and
// the gateway, wired exactly as the cluster mode wires the Kubernetes store and backend.
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { keyOf, type DeployedModel } from '../api/types.js';
import { referencedModelKeys } from '../api/references.js';
import { FolderStore } from '../store/folder.js';
import { LocalProcessBackend } from '../workload/local.js';
import { WorkQueue } from '../controller/queue.js';
import { ControllerMetrics } from '../controller/metrics.js';
import { deployedModelReconciler } from '../controller/deployedModel.js';
import { endpointReconciler } from '../controller/endpoint.js';
import { GatewayMetrics } from '../gateway/metrics.js';
import { buildRoutes, type RoutingTable } from '../gateway/routing.js';
import { UpstreamPool } from '../gateway/upstream.js';
import { createGateway } from '../gateway/server.js';
import { mountStatusApi } from './statusApi.js';

export interface LocalOptions {
  dir: string;
  config: Config;
  logger: Logger;
  clock?: () => Date;
  random?: () => number;
  resyncMs?: number;
}

export interface LocalMode {
  port: number;
  store: FolderStore;
  /** Drains the gateway (in-flight calls finish), then stops the model processes. */
  stop(): Promise<void>;
}

export async function runLocal(opts: LocalOptions): Promise<LocalMode> {
  const { config, logger } = opts;
  const clock = opts.clock ?? (() => new Date());
  const store = new FolderStore({ dir: opts.dir, logger, clock });
  const backend = new LocalProcessBackend({ logger, healthIntervalMs: config.healthIntervalMs });
  const metrics = new GatewayMetrics();
  const queueMetrics = new ControllerMetrics(metrics.registry);

  const endpointIdOf = (dm: DeployedModel): string | undefined => {
    if (dm.spec.endpointPath) return dm.spec.endpointPath.split('/').pop();
    const key = keyOf(dm.metadata);
    return store.listEndpoints().filter((ep) => referencedModelKeys(ep).includes(key)).map((ep) => ep.metadata.name).sort()[0];
  };
  const models = new WorkQueue({ name: 'deployedmodel', logger, metrics: queueMetrics, reconcile: deployedModelReconciler({ store, backend, clock, endpointIdOf }) });
  const endpoints = new WorkQueue({ name: 'endpoint', logger, metrics: queueMetrics, reconcile: endpointReconciler({ store, domain: config.endpointDomain, clock }) });

  let table: RoutingTable | null = null;
  const routes = (): RoutingTable =>
    (table ??= buildRoutes(store.listEndpoints(), store.listDeployedModels(), { domain: config.endpointDomain, timeoutMs: config.timeoutSeconds * 1000, maxRequestBytes: config.maxRequestBytes }));

  store.onChange((e) => {
    table = null;
    if (e.kind === 'DeployedModel') {
      models.add(e.key);
      for (const ep of store.listEndpoints()) if (referencedModelKeys(ep).includes(e.key)) endpoints.add(keyOf(ep.metadata));
    } else {
      endpoints.add(e.key);
      const ep = store.getEndpoint(e.key);
      if (ep) for (const k of referencedModelKeys(ep)) models.add(k); // AIP_ENDPOINT_ID may change
    }
  });
  backend.onChange((key) => models.add(key));

  await store.start();
  const resync = setInterval(() => {
    for (const dm of store.listDeployedModels()) models.add(keyOf(dm.metadata));
    for (const ep of store.listEndpoints()) endpoints.add(keyOf(ep.metadata));
  }, opts.resyncMs ?? 30_000);
  resync.unref();

  const upstream = new UpstreamPool({ keepAliveMs: config.upstreamKeepAliveMs, connections: config.upstreamConnections });
  const gateway = createGateway({
    routes,
    upstream,
    metrics,
    logger,
    random: opts.random ?? Math.random,
    maxJsonDepth: config.maxJsonDepth,
    maxResponseBytes: config.maxResponseBytes,
    ready: () => store.loaded,
    extend: (app) => mountStatusApi(app, store),
  });
  const port = await gateway.listen(config.port, config.host);
  logger.info({ port, host: config.host, dir: opts.dir, domain: config.endpointDomain }, 'gateway listening');

  return {
    port,
    store,
    async stop() {
      await gateway.drain(config.drainSeconds * 1000);
      clearInterval(resync);
      models.stop();
      endpoints.stop();
      store.stop();
      await backend.stop();
      await upstream.close();
    },
  };
}
