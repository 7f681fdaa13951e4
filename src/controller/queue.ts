// The work queue and its runner (controller-runtime's pattern): keys are `namespace/name`, a key is
// never processed by two workers at once, a key added while it is processed runs once more after,
// failures are retried with per-key exponential backoff, and one place owns retry, logging and
// reconcile metrics. Reconcile functions just return (optionally asking to be re-run) or throw.
import type { Logger } from '../log.js';
import { backoffMs } from '../backoff.js';

export interface ReconcileResult {
  requeueAfterMs?: number;
}

export type Reconcile = (key: string) => Promise<ReconcileResult | void>;

export interface QueueMetrics {
  reconciled(controller: string, result: 'success' | 'error' | 'requeue', seconds: number): void;
  depth(controller: string, n: number): void;
}

export interface QueueOptions {
  name: string;
  reconcile: Reconcile;
  logger: Logger;
  workers?: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  metrics?: QueueMetrics;
  /** One line for a failure in the log (default: the error's message). */
  describe?: (err: unknown) => string;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private active = 0;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: QueueOptions) {}

  add(key: string): void {
    if (this.stopped) return;
    const pending = this.delayed.get(key);
    if (pending) {
      clearTimeout(pending.timer);
      this.delayed.delete(key);
    }
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.opts.metrics?.depth(this.opts.name, this.queue.length);
    this.pump();
  }

  /** Adds `key` after `ms`; an earlier pending re-add wins over a later one. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    const due = Date.now() + ms;
    const pending = this.delayed.get(key);
    if (pending) {
      if (pending.due <= due) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { timer, due });
  }

  private pump(): void {
    const max = this.opts.workers ?? 4;
    while (this.active < max && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      this.active++;
      void this.run(key);
    }
    this.opts.metrics?.depth(this.opts.name, this.queue.length);
  }

  private async run(key: string): Promise<void> {
    const start = process.hrtime.bigint();
    let result: 'success' | 'error' | 'requeue' = 'success';
    try {
      const r = await this.opts.reconcile(key);
      this.failures.delete(key);
      if (r && r.requeueAfterMs !== undefined) {
        result = 'requeue';
        this.addAfter(key, r.requeueAfterMs);
      }
    } catch (err) {
      result = 'error';
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = backoffMs(n, this.opts.backoffBaseMs ?? 100, this.opts.backoffMaxMs ?? 30_000);
      this.opts.logger.warn({ controller: this.opts.name, key, attempt: n, retryInMs: delay, err: this.opts.describe ? this.opts.describe(err) : err instanceof Error ? err.message : String(err) }, 'reconcile failed');
      this.addAfter(key, delay);
    } finally {
      this.opts.metrics?.reconciled(this.opts.name, result, Number(process.hrtime.bigint() - start) / 1e9);
      this.processing.delete(key);
      this.active--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
      if (this.active === 0 && this.queue.length === 0) {
        for (const w of this.idleWaiters.splice(0)) w();
      }
    }
  }

  /** Resolves when nothing is queued or running (delayed retries do not count). */
  whenIdle(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    for (const d of this.delayed.values()) clearTimeout(d.timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.queued.clear();
  }
}
