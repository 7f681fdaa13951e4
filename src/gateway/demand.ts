// The demand this gateway replica sees for each model whose replicas follow the calls: calls in
// flight now (waiting in the admission queue, held while the model wakes from zero, or running, streams
// for as long as they run) and, as counters that only grow, the calls that arrived and the integral of
// calls in flight over time (call-seconds). The autoscaler differentiates the counters between two
// reads, so it sees the exact average concurrency of the interval however short the calls, and any
// number of readers can read without disturbing each other. A call held at zero is announced at once
// to whoever listens, so a model wakes without waiting for the next read. The report also names the
// model replicas (by address) that have calls on them now, so that a scale-down takes idle ones.
import type { DemandReport, ModelDemand } from '../api/autoscaling.js';

interface Entry extends ModelDemand {
  sinceMs: number;
}

export class Demand {
  private readonly models = new Map<string, Entry>();
  private readonly heldListeners: ((modelKey: string) => void)[] = [];

  /**
   * `now`: a monotonic clock in ms; `busyReplicas`: the replica addresses with calls on them now
   * (streams for as long as they run), and how many.
   */
  constructor(private readonly now: () => number = () => performance.now(), private readonly busyReplicas: () => Map<string, number> = () => new Map()) {}

  private entry(modelKey: string): Entry {
    let e = this.models.get(modelKey);
    if (!e) {
      e = { inFlight: 0, requestsTotal: 0, callSecondsTotal: 0, sinceMs: this.now() };
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
  }

  end(modelKey: string): void {
    const e = this.models.get(modelKey);
    if (!e) return;
    this.advance(e);
    e.inFlight--;
  }

  /** A call of the model (already begun) waits for a replica, the model being at zero: listeners hear it at once. */
  hold(modelKey: string): void {
    for (const l of this.heldListeners) l(modelKey);
  }

  onHeld(listener: (modelKey: string) => void): void {
    this.heldListeners.push(listener);
  }

  /** What GET /stats/demand answers: every model's counters and the busy replicas. */
  report(): DemandReport {
    return { models: Object.fromEntries(this.read()), replicas: Object.fromEntries(this.busyReplicas()) };
  }

  /** Every model seen so far, its counters brought up to now. */
  read(): Map<string, ModelDemand> {
    const out = new Map<string, ModelDemand>();
    for (const [key, e] of this.models) {
      this.advance(e);
      out.set(key, { inFlight: e.inFlight, requestsTotal: e.requestsTotal, callSecondsTotal: e.callSecondsTotal });
    }
    return out;
  }
}
