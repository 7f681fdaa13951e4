// The process and Node.js metrics of prom-client under their standard names, unprefixed
// (process_cpu_seconds_total, process_resident_memory_bytes, nodejs_heap_size_used_bytes,
// nodejs_eventloop_lag_seconds, ...), as the common Node.js dashboards read them.
import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's gauges whose names end in `_total`, a suffix Prometheus keeps for counters
 * (`promtool check metrics` refuses them). Each is the sum over the `type` label of the gauge of the
 * same name without the suffix (nodejs_active_handles, ...), which stays.
 */
export const OMITTED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** Registers the process and Node.js metrics on `registry`. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of OMITTED_DEFAULT_METRICS) registry.removeSingleMetric(name);
}
