// The demand this gateway replica sees for each model whose replicas follow the calls: calls in
// flight now (waiting in the admission queue, held while the model wakes from zero, or running, streams
// for as long as they run) and, as counters that only grow, the calls that arrived and the integral of
// calls in flight over time (call-seconds). The autoscaler differentiates the counters between two
// reads, so it sees the exact average concurrency of the interval however short the calls, and any
// number of readers can read without disturbing each other. A call held at zero is announced at once
// to whoever listens, so a model wakes without waiting for the next read: in local mode by a
// listener, in a cluster by a read that waits (GET /stats/demand?heldAfter=N answers once this
// gateway has held more than N calls, or after a while, or at once when it drains). The report also
// names the model replicas (by address) that have calls on them now, so that a scale-down takes idle ones.
import type { DemandReport, ModelDemand } from '../api/autoscaling.js';

interface Entry extends ModelDemand {
  sinceMs: number;
  /** When its last call began or ended. */
  lastCallMs: number;
}

/**
 * A model without a call for this long is forgotten (a deleted model's counters go with it); its
 * counters start from zero again at its next call, which the autoscaler takes as a restart.
 */
export const FORGET_IDLE_MS = 10 * 60_000;

/** How long a read that waits for a held call waits at most before it answers all the same. */
export const HELD_WAIT_MS = 20_000;

export class Demand {
  private readonly models = new Map<string, Entry>();
  private readonly heldListeners = new Set<(modelKey: string) => void>();
  /** Calls held since the gateway started (a wake for each), and who waits for the next. */
  private held = 0;
  private readonly heldWaiters = new Set<() => void>();
  private released = false;

  /**
   * `now`: a monotonic clock in ms; `busyReplicas`: the replica addresses with calls on them now
   * (streams for as long as they run), and how many.
   */
  constructor(private readonly now: () => number = () => performance.now(), private readonly busyReplicas: () => Map<string, number> = () => new Map()) {}

  private entry(modelKey: string): Entry {
    let e = this.models.get(modelKey);
    if (!e) {
      const t = this.now();
      e = { inFlight: 0, requestsTotal: 0, callSecondsTotal: 0, sinceMs: t, lastCallMs: t };
      this.models.set(modelKey, e);
    }
    return e;
  }

  private advance(e: Entry): void {
    const t = this.now();
    e.callSecondsTotal += (e.inFlight * (t - e.sinceMs)) / 1000;
    e.sinceMs = t;
  }

  /** A call for the model arrived; `end` must follow once it is over, whatever happened to it. */
  begin(modelKey: string): void {
    const e = this.entry(modelKey);
    this.advance(e);
    e.inFlight++;
    e.requestsTotal++;
    e.lastCallMs = e.sinceMs;
  }

  end(modelKey: string): void {
    const e = this.models.get(modelKey);
    if (!e) return;
    this.advance(e);
    e.inFlight--;
    e.lastCallMs = e.sinceMs;
  }

  /** A call of the model (already begun) waits for a replica, the model being at zero: listeners hear it at once. */
  hold(modelKey: string): void {
    this.held++;
    for (const l of this.heldListeners) l(modelKey);
    for (const w of [...this.heldWaiters]) w();
  }

  /** Listens for held calls; returns what stops listening. */
  onHeld(listener: (modelKey: string) => void): () => void {
    this.heldListeners.add(listener);
    return () => void this.heldListeners.delete(listener);
  }

  /**
   * Resolves once more than `after` calls were held, after `timeoutMs`, when `gone` closes (the
   * reader left) or when the gateway drains (release), whichever comes first.
   */
  waitForHeld(after: number, timeoutMs: number, gone?: { once(event: 'close', fn: () => void): unknown; off(event: 'close', fn: () => void): unknown }): Promise<void> {
    if (this.released || this.held > after) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.heldWaiters.delete(done);
        gone?.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.heldWaiters.add(done);
      gone?.once('close', done);
    });
  }

  /** Reads waiting for a held call now. */
  get waiting(): number {
    return this.heldWaiters.size;
  }

  /** Draining: every wait ends now, and later ones do not wait. */
  release(): void {
    this.released = true;
    for (const w of [...this.heldWaiters]) w();
  }

  /** What GET /stats/demand answers: every model's counters and the busy replicas. */
  report(): DemandReport {
    return { models: Object.fromEntries(this.read()), replicas: Object.fromEntries(this.busyReplicas()), held: this.held };
  }

  /** Every model with a call in the last FORGET_IDLE_MS, its counters brought up to now; the others are forgotten. */
  read(): Map<string, ModelDemand> {
    const out = new Map<string, ModelDemand>();
    for (const [key, e] of this.models) {
      this.advance(e);
      if (e.inFlight === 0 && e.sinceMs - e.lastCallMs >= FORGET_IDLE_MS) {
        this.models.delete(key);
        continue;
      }
      out.set(key, { inFlight: e.inFlight, requestsTotal: e.requestsTotal, callSecondsTotal: e.callSecondsTotal, clockSeconds: e.sinceMs / 1000 });
    }
    return out;
  }
}
