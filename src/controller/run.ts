// `predictgate controller`: the Kubernetes store and workload backend, the shared reconcile wiring,
// Events, leader election, and a small HTTP server for probes and metrics. Caches fill while the
// process waits for the Lease (a standby is warm); only the leader reconciles.
import { hostname } from 'node:os';
import express from 'express';
import type { Server } from 'node:http';
import { Registry, Gauge } from 'prom-client';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { KubeStore } from '../store/kube.js';
import { KubeWorkloadBackend } from '../workload/kube.js';
import { kubeEvents } from '../kube/events.js';
import { collectProcessMetrics } from '../metrics/process.js';
import { registerWatchMetrics } from '../metrics/watch.js';
import { waitForKube } from '../kube/backoff.js';
import { ControllerMetrics } from './metrics.js';
import { startManager, type Manager } from './manager.js';
import { LeaderElector, candidateIdentity } from './leader.js';
import { Autoscaler } from '../autoscale/autoscaler.js';
import { windowsOf } from '../autoscale/decide.js';
import { GatewayDemand } from '../autoscale/gatewayDemand.js';

export const LEASE_NAME = 'predictgate-controller';

/**
 * Reconciles run at once per kind. A cluster reconcile waits on the apiserver (a server-side apply or
 * a status patch is a round trip of tens of milliseconds under load), so more of them run than in
 * local mode's in-process queue; the API connection pool (32) still bounds the calls in flight.
 */
export const CLUSTER_WORKERS = 16;

export interface ControllerOptions {
  kc: KubeConfig;
  config: Config;
  logger: Logger;
  clock?: () => Date;
  /** Called when leadership is lost (the process should exit: its caches may be stale). */
  onLostLeadership?: () => void;
}

export interface RunningController {
  port: number;
  isLeader(): boolean;
  stop(): Promise<void>;
}

export async function runController(opts: ControllerOptions): Promise<RunningController> {
  const { kc, config, logger } = opts;
  const clock = opts.clock ?? (() => new Date());
  const store = new KubeStore({ kc, namespaces: config.namespaces, logger });
  const backend = new KubeWorkloadBackend({ kc, namespaces: config.namespaces, logger });
  const registry = new Registry();
  collectProcessMetrics(registry);
  const queueMetrics = new ControllerMetrics(registry);
  const leaderGauge = new Gauge({ name: 'predictgate_controller_leader', help: '1 while this replica holds the Lease, else 0.', registers: [registry] });
  registerWatchMetrics(registry, () => store.stats, () => backend.stats);
  let synced = false;
  let manager: Manager | undefined;
  let stopping = false;

  const events = kubeEvents(kc, logger, clock);
  // The request autoscaler reads every gateway replica's demand; it decides only while this replica leads.
  const demand = config.gatewayService ? new GatewayDemand({ kc, service: config.gatewayService, logger, timeoutMs: Math.min(1000, config.autoscaleIntervalMs) }) : undefined;
  let autoscaler: Autoscaler | undefined;

  const startReconciling = (): void => {
    if (manager || stopping) return;
    leaderGauge.set(1);
    if (demand) {
      autoscaler = new Autoscaler({ models: store, target: backend, demand, events, logger, intervalMs: config.autoscaleIntervalMs, windows: windowsOf(config.autoscaleStableWindowSeconds), now: () => performance.now(), clock });
      autoscaler.start();
    }
    manager = startManager({
      store, backend, events, domain: config.endpointDomain, clock, logger, metrics: queueMetrics, resyncMs: config.resyncSeconds * 1000, workers: CLUSTER_WORKERS,
      scaledOf: (key) => autoscaler?.statusOf(key),
    });
    manager.resyncAll();
  };

  const identity = candidateIdentity(process.env.POD_NAME ?? hostname());
  const elector = config.leaderElection
    ? new LeaderElector({
        kc,
        namespace: config.leaderElectionNamespace,
        name: LEASE_NAME,
        identity,
        leaseDurationMs: config.leaseDurationSeconds * 1000,
        clock,
        logger,
        onStartedLeading: startReconciling,
        onStoppedLeading: () => {
          leaderGauge.set(0);
          autoscaler?.stop();
          manager?.stop();
          opts.onLostLeadership?.();
        },
      })
    : undefined;

  const app = express();
  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/readyz', (_req, res) => void res.status(synced ? 200 : 503).json({ status: synced ? 'ready' : 'syncing caches' }));
  app.get('/metrics', async (_req, res) => void res.type(registry.contentType).send(await registry.metrics()));
  const server: Server = await new Promise((resolve, reject) => {
    // Express calls back with the listen error, if any.
    const s = app.listen(config.port, config.host, (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  const port = (server.address() as { port: number }).port;
  logger.info({ port, identity, namespaces: config.namespaces.length ? config.namespaces : 'all', leaderElection: config.leaderElection }, 'controller started');

  await waitForKube(kc, logger);
  await Promise.all([store.start(), backend.start(), demand?.start()]);
  synced = true;
  logger.info({ deployedModels: store.listDeployedModels().length, endpoints: store.listEndpoints().length }, 'caches synced');
  // Campaign only with warm caches: a leader that cannot sync would hold the Lease and do nothing.
  if (elector) elector.start();
  else startReconciling();

  return {
    port,
    isLeader: () => manager !== undefined,
    async stop() {
      stopping = true;
      autoscaler?.stop();
      manager?.stop();
      // Reconciles already running finish before the Lease goes to a standby (bounded: a hung API call must not block exit).
      if (manager) await Promise.race([manager.whenIdle(), new Promise((r) => setTimeout(r, 10_000).unref())]);
      await elector?.stop();
      await new Promise<void>((r) => server.close(() => r()));
      await Promise.all([store.stop(), backend.stop(), demand?.stop()]);
    },
  };
}
