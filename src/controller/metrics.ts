// Reconcile metrics (count by result, duration, queue depth) on a given prom-client registry; the
// controller label is the work queue's name (deployedmodel or endpoint), see docs/metrics.md.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { QueueMetrics } from './queue.js';

export class ControllerMetrics implements QueueMetrics {
  private readonly total: Counter;
  private readonly duration: Histogram;
  private readonly queueDepth: Gauge;

  constructor(registry: Registry) {
    this.total = new Counter({ name: 'predictgate_reconcile_total', help: 'Reconciles by controller (deployedmodel, endpoint) and result (success, error, requeue).', labelNames: ['controller', 'result'], registers: [registry] });
    this.duration = new Histogram({ name: 'predictgate_reconcile_duration_seconds', help: 'Reconcile duration by controller (deployedmodel, endpoint).', labelNames: ['controller'], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registers: [registry] });
    this.queueDepth = new Gauge({ name: 'predictgate_workqueue_depth', help: 'Keys waiting in the work queue, by controller (deployedmodel, endpoint).', labelNames: ['controller'], registers: [registry] });
  }

  reconciled(controller: string, result: 'success' | 'error' | 'requeue', seconds: number): void {
    this.total.labels(controller, result).inc();
    this.duration.labels(controller).observe(seconds);
  }

  depth(controller: string, n: number): void {
    this.queueDepth.labels(controller).set(n);
  }
}
