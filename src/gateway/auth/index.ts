// The gate a gateway's settings ask for (--auth): the open one, or the Kubernetes one asking the
// cluster of a kubeconfig, with its metrics. The Kubernetes client is loaded only for the latter.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Config } from '../../config.js';
import { OPEN_GATE, type Gate } from './gate.js';
import { KubernetesGate } from './kubernetes.js';
import { registerAuthMetrics } from './metrics.js';

export { OPEN_GATE, type Gate, type Identity } from './gate.js';
export * from './access.js';

/** `kc` is the cluster asked for --auth kubernetes (loaded when needed when not given). */
export async function gateFromConfig(config: Config, registry: Registry, kc?: KubeConfig): Promise<Gate> {
  if (config.auth === 'none') return OPEN_GATE;
  const { kubeReviewer } = await import('./reviews.js');
  const { loadKubeConfig } = await import('../../kube/client.js');
  let gate: KubernetesGate | undefined;
  const onReview = registerAuthMetrics(registry, () => gate?.stats);
  gate = new KubernetesGate({
    reviewer: kubeReviewer(kc ?? loadKubeConfig()),
    audiences: config.authAudiences,
    allowTtlMs: config.authAllowTtlSeconds * 1000,
    denyTtlMs: config.authDenyTtlSeconds * 1000,
    cacheSize: config.authCacheSize,
    reviewsPerSecond: config.authReviewsPerSecond,
    onReview,
  });
  return gate;
}
