// The watched caches' full lists and restarts as Prometheus counters by resource, read from the
// caches' own counts at scrape time (the caches know nothing of Prometheus).
import type { Registry } from 'prom-client';
import { following } from './following.js';

/** A watched cache's counts since it started; both only grow. */
export interface WatchCounts {
  lists: number;
  restarts: number;
}

/** Counts of each watched resource, by its plural (e.g. "deployments"). */
export type WatchCountsByResource = () => Record<string, WatchCounts>;

/** predictgate_watch_lists_total and predictgate_watch_restarts_total over the given caches. */
export function registerWatchMetrics(registry: Registry, ...sources: WatchCountsByResource[]): void {
  const counts = (field: keyof WatchCounts) => (): Map<string, number> => {
    const out = new Map<string, number>();
    for (const source of sources) for (const [resource, c] of Object.entries(source())) out.set(resource, (out.get(resource) ?? 0) + c[field]);
    return out;
  };
  following(registry, 'predictgate_watch_lists_total', 'Full lists made by the watched caches, by resource: one per watched namespace at start, then one after every 410 Gone.', { label: 'resource', read: counts('lists') });
  following(registry, 'predictgate_watch_restarts_total', 'Watches restarted (with backoff) after an error other than 410 Gone, by resource.', { label: 'resource', read: counts('restarts') });
}
