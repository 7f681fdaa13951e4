// The process and Node.js metrics of prom-client under their standard names, unprefixed
// (process_cpu_seconds_total, process_resident_memory_bytes, nodejs_heap_size_used_bytes,
// nodejs_eventloop_lag_seconds, ...), as the common Node.js dashboards read them, and the heap's limit.
import { getHeapStatistics } from 'node:v8';
import { collectDefaultMetrics, Gauge, type Registry } from 'prom-client';

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
  // Fixed at start: by --max-old-space-size(-percentage) in NODE_OPTIONS, else by V8 from the memory
  // limit Node finds (the container's cgroup) or the machine's memory.
  new Gauge({
    name: 'predictgate_heap_limit_bytes',
    help: 'Most bytes the V8 heap may grow to (its old generation limit and the young generation); past it the process stops with a heap out of memory error.',
    registers: [registry],
  }).set(getHeapStatistics().heap_size_limit);
}
