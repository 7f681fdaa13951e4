// The controller's wiring, shared by local mode and `predictgate controller`: one work queue per
// resource kind, what enqueues what (a DeployedModel change re-enqueues the Endpoints that name it;
// an Endpoint change re-enqueues its DeployedModels, whose AIP_ENDPOINT_ID may change; a workload
// change re-enqueues its DeployedModel), and a periodic resync of every object. Which Endpoints name
// which models is kept in an index (endpointIndex.ts), so no event or reconcile reads every Endpoint.
import { keyOf, type AutoscalingStatus, type DeployedModel } from '../api/types.js';
import { referencedModelKeys } from '../api/references.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/store.js';
import type { WorkloadBackend } from '../workload/workload.js';
import { WorkQueue, type QueueMetrics } from './queue.js';
import { deployedModelReconciler } from './deployedModel.js';
import { endpointReconciler } from './endpoint.js';
import type { EventRecorder } from '../api/events.js';
import { describeApiError } from '../kube/errors.js';
import { EndpointIndex } from './endpointIndex.js';

export interface ManagerOptions {
  store: Store;
  backend: WorkloadBackend;
  events: EventRecorder;
  domain: string;
  clock: () => Date;
  logger: Logger;
  metrics?: QueueMetrics;
  resyncMs: number;
  workers?: number;
  /** The request autoscaler's last decision for a model, where one runs (its status carries it). */
  scaledOf?(key: string): AutoscalingStatus | undefined;
}

export interface Manager {
  /** Enqueues every object (also done every resyncMs). */
  resyncAll(): void;
  /** Resolves when both queues are idle. */
  whenIdle(): Promise<void>;
  stop(): void;
}

export function startManager(opts: ManagerOptions): Manager {
  const { store, backend, clock, logger } = opts;
  // Filled from the store as it is now; kept up to date by the change events below (registered in
  // the same turn, so none is missed).
  const index = new EndpointIndex();
  for (const ep of store.listEndpoints()) index.set(keyOf(ep.metadata), referencedModelKeys(ep));
  const endpointIdOf = (dm: DeployedModel): string | undefined => {
    if (dm.spec.endpointPath) return dm.spec.endpointPath.split('/').pop();
    return index.firstEndpointName(keyOf(dm.metadata));
  };
  const common = { logger, metrics: opts.metrics, workers: opts.workers, describe: describeApiError };
  const models = new WorkQueue({ ...common, name: 'deployedmodel', reconcile: deployedModelReconciler({ store, backend, clock, events: opts.events, endpointIdOf, scaledOf: opts.scaledOf }) });
  const endpoints = new WorkQueue({ ...common, name: 'endpoint', reconcile: endpointReconciler({ store, domain: opts.domain, clock, events: opts.events }) });

  store.onChange((e) => {
    if (e.kind === 'DeployedModel') {
      models.add(e.key);
      for (const k of index.endpointsNaming(e.key)) endpoints.add(k);
    } else {
      endpoints.add(e.key);
      const ep = store.getEndpoint(e.key);
      const now = ep ? referencedModelKeys(ep) : [];
      const before = ep ? index.set(e.key, now) : index.delete(e.key);
      // The models it names, and those it no longer names: either one's AIP_ENDPOINT_ID may change.
      for (const k of new Set([...now, ...before])) models.add(k);
    }
  });
  backend.onChange((key) => models.add(key));

  const resyncAll = (): void => {
    for (const dm of store.listDeployedModels()) models.add(keyOf(dm.metadata));
    for (const ep of store.listEndpoints()) endpoints.add(keyOf(ep.metadata));
  };
  const timer = setInterval(resyncAll, opts.resyncMs);
  timer.unref();
  return {
    resyncAll,
    async whenIdle() {
      await Promise.all([models.whenIdle(), endpoints.whenIdle()]);
    },
    stop() {
      clearInterval(timer);
      models.stop();
      endpoints.stop();
    },
  };
}
