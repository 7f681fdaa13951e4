// How calls reach models, as Prometheus metrics: the balancer's ejections and retries, the health
// checks and the concurrency limits' queues, read from their own counts at scrape time (none of
// them knows Prometheus).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Balancer, BalancerStats } from '../gateway/upstream/balancer.js';
import type { HealthChecker } from '../gateway/upstream/health.js';
import type { Admission } from '../gateway/admission.js';

/** What the metrics read. */
export interface UpstreamCounts {
  balancer: Pick<Balancer, 'stats' | 'ejectedNow' | 'unhealthyNow'>;
  /** Undefined while active health checks are off. */
  health: Pick<HealthChecker, 'stats'> | undefined;
  admission: Pick<Admission, 'stats' | 'queuedNow'>;
}

/** Counts that only grow: one, or one per value of a label. */
type Counts = (() => number) | { label: string; series: Record<string, () => number> };

/** A counter that follows growing counts: adds what each gained since the last scrape. */
export function following(registry: Registry, name: string, help: string, counts: Counts): void {
  const label = typeof counts === 'function' ? undefined : counts.label;
  const series = typeof counts === 'function' ? { '': counts } : counts.series;
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [registry],
    collect() {
      for (const [value, read] of Object.entries(series)) {
        const n = read();
        const before = seen.get(value) ?? 0;
        if (label) this.inc({ [label]: value }, Math.max(0, n - before));
        else this.inc(Math.max(0, n - before));
        seen.set(value, Math.max(n, before));
      }
    },
  });
}

/**
 * predictgate_upstream_ejections_total, _ejected_replicas, _unhealthy_replicas, _health_checks_total,
 * _health_checks_failed_total, _connection_losses_total, _retries_total and _retries_refused_total; predictgate_queued_calls,
 * _queued_calls_total and _calls_refused_busy_total (by reason).
 */
export function registerUpstreamMetrics(registry: Registry, { balancer, admission, health }: UpstreamCounts): void {
  const stat = (k: keyof BalancerStats) => () => balancer.stats[k];
  following(registry, 'predictgate_upstream_ejections_total', 'Model replicas taken out of rotation after failed connections, resets or timeouts in a row (OUTLIER_CONSECUTIVE_FAILURES).', stat('ejectionsTotal'));
  following(registry, 'predictgate_upstream_retries_total', 'Calls sent to a second replica because the first refused the connection.', stat('retriesTotal'));
  following(registry, 'predictgate_upstream_retries_refused_total', 'Retries not made because the retry budget (RETRY_BUDGET_PERCENT) was spent.', stat('retriesRefusedTotal'));
  gauge(registry, 'predictgate_upstream_ejected_replicas', 'Model replicas out of rotation now after failed calls (outlier detection).', () => balancer.ejectedNow());
  gauge(registry, 'predictgate_upstream_unhealthy_replicas', 'Model replicas out of rotation now because their health checks fail (UPSTREAM_UNHEALTHY_THRESHOLD in a row).', () => balancer.unhealthyNow());
  following(registry, 'predictgate_upstream_health_checks_total', 'Active health checks of model replicas made.', () => health?.stats.checksTotal ?? 0);
  following(registry, 'predictgate_upstream_connection_losses_total', 'Model replicas taken out of rotation at once because a call\'s connection to them was refused or reset, until a health check passes.', () => health?.stats.connectionLossesTotal ?? 0);
  following(registry, 'predictgate_upstream_health_checks_failed_total', 'Active health checks that got no 2xx answer within UPSTREAM_HEALTH_CHECK_TIMEOUT_MS.', () => health?.stats.failedChecksTotal ?? 0);
  gauge(registry, 'predictgate_queued_calls', 'Calls waiting now for a slot of a deployed model at its spec.serving.maxConcurrency.', () => admission.queuedNow());
  following(registry, 'predictgate_queued_calls_total', 'Calls that waited for a slot of a deployed model at its maxConcurrency.', () => admission.stats.queuedTotal);
  following(registry, 'predictgate_calls_refused_busy_total', 'Calls refused with 429 model_busy, by reason: queue_full (maxQueuedCalls) or queue_timeout (queueTimeoutSeconds).', {
    label: 'reason',
    series: { queue_full: () => admission.stats.refusedQueueFullTotal, queue_timeout: () => admission.stats.refusedQueueTimeoutTotal },
  });
}

/** A gauge read at scrape time. */
export function gauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}
