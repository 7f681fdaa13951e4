// The balancer's ejections and retries as Prometheus metrics, read from its own counts at scrape
// time (the balancer knows nothing of Prometheus).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Balancer, BalancerStats } from '../gateway/upstream/balancer.js';

/** A counter that follows a growing count: adds what it gained since the last scrape. */
function following(registry: Registry, name: string, help: string, read: () => number): void {
  let seen = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const n = read();
      this.inc(Math.max(0, n - seen));
      seen = Math.max(n, seen);
    },
  });
}

/** predictgate_upstream_ejections_total, _ejected_replicas, _retries_total and _retries_refused_total. */
export function registerBalancerMetrics(registry: Registry, balancer: Balancer): void {
  const stat = (k: keyof BalancerStats) => () => balancer.stats[k];
  following(registry, 'predictgate_upstream_ejections_total', 'Model replicas taken out of rotation after failed connections, resets or timeouts in a row (OUTLIER_CONSECUTIVE_FAILURES).', stat('ejectionsTotal'));
  following(registry, 'predictgate_upstream_retries_total', 'Calls sent to a second replica because the first refused the connection.', stat('retriesTotal'));
  following(registry, 'predictgate_upstream_retries_refused_total', 'Retries not made because the retry budget (RETRY_BUDGET_PERCENT) was spent.', stat('retriesRefusedTotal'));
  new Gauge({
    name: 'predictgate_upstream_ejected_replicas',
    help: 'Model replicas out of rotation now.',
    registers: [registry],
    collect() {
      this.set(balancer.ejectedNow());
    },
  });
}
