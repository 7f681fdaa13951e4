// Who may call, as Prometheus metrics (--auth kubernetes): the gate's decisions by result and the
// answers it remembered, read from its counts at scrape time, and the latency of its reviews.
import { Histogram, type Registry } from 'prom-client';
import type { GateStats, ReviewKind, ReviewOutcome } from './kubernetes.js';
import { following } from '../../metrics/following.js';

/**
 * predictgate_auth_decisions_total (by result), predictgate_auth_cache_hits_total (by cache);
 * returns the observer of predictgate_auth_review_duration_seconds (by review and outcome).
 */
export function registerAuthMetrics(registry: Registry, stats: () => GateStats | undefined): (kind: ReviewKind, outcome: ReviewOutcome, seconds: number) => void {
  const stat = (k: keyof GateStats) => () => stats()?.[k] ?? 0;
  following(registry, 'predictgate_auth_decisions_total', 'Calls the gate let in or refused (--auth kubernetes), by result: allowed, denied (403), unauthenticated (401), unavailable (503: the Kubernetes API could not be asked) or throttled (429: AUTH_REVIEWS_PER_SECOND).', {
    label: 'result',
    series: { allowed: stat('allowed'), denied: stat('denied'), unauthenticated: stat('unauthenticated'), unavailable: stat('unavailable'), throttled: stat('throttled') },
  });
  following(registry, 'predictgate_auth_cache_hits_total', 'Checks answered from memory, by cache: token (a remembered TokenReview) or access (a remembered SubjectAccessReview).', {
    label: 'cache',
    series: { token: stat('tokenHits'), access: stat('accessHits') },
  });
  const reviews = new Histogram({
    name: 'predictgate_auth_review_duration_seconds',
    help: 'Time the Kubernetes API took to answer the gate\'s reviews, by review (TokenReview, SubjectAccessReview) and outcome (authenticated, unauthenticated, allowed, denied, error).',
    labelNames: ['review', 'outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  return (kind, outcome, seconds) => reviews.observe({ review: kind, outcome }, seconds);
}
