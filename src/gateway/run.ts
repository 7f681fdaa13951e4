// `predictgate gateway`: the gateway of a cluster. Routes come from DeployedModels and Endpoints
// watched read-only through the Kubernetes API (a status change reaches the table with the watch
// event); each model's pods come from its Service's EndpointSlices (the Service address while none
// is known), optionally rewritten by UPSTREAM_RESOLVE. Callers are checked with the same cluster
// (--auth kubernetes, the default here). With GATEWAY_SERVICE, the gateway's own EndpointSlices say
// how many gateway replicas split each model's maxConcurrency.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { KubeStore } from '../store/kube.js';
import { EndpointSliceCache, ServiceReplicas } from '../store/endpointSlices.js';
import { followShare, ownAddress } from './peers.js';
import { registerWatchMetrics } from '../metrics/watch.js';
import { GatewayMetrics } from './metrics.js';
import { liveRoutes, routingDefaults } from './routing.js';
import { servicesFromConfig } from './call.js';
import { createGateway } from './server.js';
import { waitForKube } from '../kube/backoff.js';
import { gateFromConfig } from './auth/index.js';

export interface ClusterGatewayOptions {
  kc: KubeConfig;
  config: Config;
  logger: Logger;
  random?: () => number;
}

export interface RunningGateway {
  port: number;
  stop(): Promise<void>;
}

export async function runClusterGateway(opts: ClusterGatewayOptions): Promise<RunningGateway> {
  const { kc, config, logger } = opts;
  const store = new KubeStore({ kc, namespaces: config.namespaces, logger });
  const slices = new EndpointSliceCache({ kc, namespaces: config.namespaces, logger });
  const routes = liveRoutes(store, routingDefaults(config), slices);
  const metrics = new GatewayMetrics();
  registerWatchMetrics(metrics.registry, () => store.stats, () => slices.stats);
  const gate = await gateFromConfig(config, metrics.registry, kc);
  const peers = config.gatewayService ? new ServiceReplicas({ kc, service: config.gatewayService, logger }) : undefined;
  // More gateway replicas, or fewer: each one's share of the slots changes, and waiting calls may go.
  let listening = config.port;
  const share = peers ? followShare(peers, ownAddress(() => listening), () => services.admission.recheck()) : undefined;
  const services = servicesFromConfig(config, { routes, metrics, logger, random: opts.random ?? Math.random, gate, share });
  // Calls waiting for a model to wake from zero go once its pods are in its EndpointSlices.
  slices.onChange(() => services.admission.recheck());
  store.onChange(() => services.admission.recheck());
  const gateway = createGateway({
    ...services,
    ready: () => store.loaded && slices.loaded && (peers?.loaded ?? true),
    resources: store,
  });
  const port = await gateway.listen(config.port, config.host);
  listening = port; // before the watches start: the gateway finds itself in its Service's slices by this port
  const probePort = config.probePort ? await gateway.listenProbes(config.probePort, config.host) : undefined;
  const grpcPort = config.grpcPort ? await gateway.listenGrpc(config.grpcPort, config.host, config.maxRequestBytes) : undefined;
  logger.info({ port, probePort, grpcPort, host: config.host, auth: config.auth, domain: config.endpointDomain, namespaces: config.namespaces.length ? config.namespaces : 'all' }, 'gateway listening');
  // Not ready (503 on /readyz) until the apiserver answers and the caches hold their first list.
  await waitForKube(kc, logger);
  await Promise.all([store.start(), slices.start(), peers?.start()]);
  logger.info({ endpoints: store.listEndpoints().length, deployedModels: store.listDeployedModels().length }, 'routing table loaded');
  return {
    port,
    async stop() {
      await gateway.drain(config.drainSeconds * 1000);
      await Promise.all([store.stop(), slices.stop(), peers?.stop()]);
      await services.upstream.close();
    },
  };
}
