// How calls reach models, as Prometheus metrics: the balancer's ejections and retries, the health
// checks and the concurrency limits' queues, read from their own counts at scrape time (none of
// them knows Prometheus).
import type { Registry } from 'prom-client';
import { following, gauge } from '../../metrics/following.js';
import type { Balancer, BalancerStats } from './balancer.js';
import type { HealthChecker } from './health.js';
import type { Admission } from '../admission.js';
import type { LoadScraper } from './load.js';

/** What the metrics read. */
export interface UpstreamCounts {
  balancer: Pick<Balancer, 'stats' | 'ejectedNow' | 'unhealthyNow'>;
  /** Undefined while active health checks are off. */
  health: Pick<HealthChecker, 'stats'> | undefined;
  admission: Pick<Admission, 'stats' | 'queuedNow' | 'fleet'>;
  /** Undefined while load-aware picks are off. */
  load?: Pick<LoadScraper, 'stats'>;
}

/**
 * predictgate_upstream_ejections_total, _ejected_replicas, _unhealthy_replicas, _health_checks_total,
 * _health_checks_failed_total, _connection_losses_total, _retries_total and _retries_refused_total; predictgate_queued_calls,
 * _queued_calls_total and _calls_refused_busy_total (by reason).
 */
export function registerUpstreamMetrics(registry: Registry, { balancer, admission, health, load }: UpstreamCounts): void {
  const stat = (k: keyof BalancerStats) => () => balancer.stats[k];
  following(registry, 'predictgate_upstream_ejections_total', 'Model replicas taken out of rotation after failed connections, resets or timeouts in a row (OUTLIER_CONSECUTIVE_FAILURES).', stat('ejectionsTotal'));
  following(registry, 'predictgate_upstream_retries_total', 'Calls sent to a second replica because the first refused the connection.', stat('retriesTotal'));
  following(registry, 'predictgate_upstream_retries_refused_total', 'Retries not made because the retry budget (RETRY_BUDGET_PERCENT) was spent.', stat('retriesRefusedTotal'));
  gauge(registry, 'predictgate_upstream_ejected_replicas', 'Model replicas out of rotation now after failed calls (outlier detection).', () => balancer.ejectedNow());
  gauge(registry, 'predictgate_upstream_unhealthy_replicas', 'Model replicas out of rotation now because their health checks fail (UPSTREAM_UNHEALTHY_THRESHOLD in a row).', () => balancer.unhealthyNow());
  following(registry, 'predictgate_upstream_health_checks_total', 'Active health checks of model replicas made.', () => health?.stats.checksTotal ?? 0);
  following(registry, 'predictgate_upstream_connection_losses_total', 'Model replicas taken out of rotation at once because a call\'s connection to them was refused or reset, until a health check passes.', () => health?.stats.connectionLossesTotal ?? 0);
  following(registry, 'predictgate_upstream_health_checks_failed_total', 'Active health checks that got no 2xx answer within UPSTREAM_HEALTH_CHECK_TIMEOUT_MS.', () => health?.stats.failedChecksTotal ?? 0);
  following(registry, 'predictgate_upstream_load_picks_total', 'Replica picks for models that report their load, by how: load (by queue and cache, every candidate\'s report fresh), prefix (every report fresh, to the replica holding the prompt\'s longest known prefix, which had room) or fallback (least-request, a report missing or stale).', {
    label: 'kind',
    series: { load: () => load?.stats.loadPicksTotal ?? 0, prefix: () => load?.stats.prefixPicksTotal ?? 0, fallback: () => load?.stats.fallbackPicksTotal ?? 0 },
  });
  following(registry, 'predictgate_upstream_load_reports_total', 'Reads of a replica\'s load metrics that gave a usable report (its waiting and running counts).', () => load?.stats.reportsTotal ?? 0);
  following(registry, 'predictgate_upstream_load_scrapes_failed_total', 'Reads of a replica\'s load metrics that got no usable report (no 200 in time, or no waiting and running counts).', () => load?.stats.scrapesFailedTotal ?? 0);
  gauge(registry, 'predictgate_queued_calls', 'Calls waiting now in the gateway\'s queues: for a slot of a deployed model at its spec.serving.maxConcurrency, or held for a model that scales to zero until a replica of it is ready.', () => admission.queuedNow());
  following(registry, 'predictgate_queued_calls_total', 'Calls that waited in those queues (for a slot, or for a model waking from zero), then went or were refused.', () => admission.stats.queuedTotal);
  following(registry, 'predictgate_calls_refused_busy_total', 'Calls refused before they reached the model, by reason: queue_full (429 model_busy: maxQueuedCalls waiting, or COLD_START_QUEUE calls held for a model waking from zero) or queue_timeout (429 model_busy: no slot within queueTimeoutSeconds; 503 model_starting: no replica of a model waking from zero ready within the call\'s deadline).', {
    label: 'reason',
    series: { queue_full: () => admission.stats.refusedQueueFullTotal, queue_timeout: () => admission.stats.refusedQueueTimeoutTotal },
  });
  gauge(registry, 'predictgate_gateway_replicas', 'Gateway replicas that split each model\'s maxConcurrency and maxQueuedCalls, as this one counts them in the EndpointSlices of GATEWAY_SERVICE (1: it admits the whole limit).', () => admission.fleet().replicas);
}
