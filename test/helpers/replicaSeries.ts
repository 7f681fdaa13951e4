// A model's replicas over time as a test or bench saw them: points of the Deployment's spec.replicas
// and ready replicas on one clock, and what is asked of them (the values written over a span, the
// replica-seconds used, a wait for a state). The request autoscaler's watch (autoscale.ts ReplicaLog)
// and the CPU HPA's recorder (hpa.ts HpaRecorder) keep their points here.
import { waitFor } from './cluster.js';

export interface ReplicaPoint {
  /** When it was seen, on the series' clock (performance.now() unless told). */
  at: number;
  /** The Deployment's spec.replicas (the last count written). */
  spec: number;
  /** Its ready replicas. */
  ready: number;
}

export class ReplicaSeries<P extends ReplicaPoint = ReplicaPoint> {
  readonly points: P[] = [];

  /** `name` names the model in a wait's message; `waitPollMs` is how often a wait looks. */
  constructor(readonly name: string, private readonly waitPollMs = 50) {}

  get last(): P | undefined {
    return this.points.at(-1);
  }

  /** The points from `t0` on, led by the one in force at `t0`. */
  since(t0: number): P[] {
    const i = this.points.findIndex((p) => p.at > t0);
    const from = i < 0 ? this.points.length - 1 : Math.max(0, i - 1);
    return this.points.slice(from);
  }

  /** The spec.replicas values in force over [t0, t1], the one at `t0` first (repeats merged). */
  specsBetween(t0: number, t1: number): number[] {
    const out: number[] = [];
    for (const p of this.since(t0)) if (p.at <= t1 && out.at(-1) !== p.spec) out.push(p.spec);
    return out;
  }

  /** ∫ spec.replicas dt and ∫ ready replicas dt over [t0, t1], in replica-seconds (a step function between points). */
  integral(t0: number, t1: number): { spec: number; ready: number } {
    let spec = 0;
    let ready = 0;
    const ps = this.since(t0);
    for (let i = 0; i < ps.length; i++) {
      const a = Math.max(ps[i].at, t0);
      const b = Math.min(ps[i + 1]?.at ?? t1, t1);
      if (b <= a) continue;
      spec += (ps[i].spec * (b - a)) / 1000;
      ready += (ps[i].ready * (b - a)) / 1000;
    }
    return { spec, ready };
  }

  /** Waits until the latest point satisfies `pred`. */
  until(what: string, pred: (p: P) => boolean, timeoutMs: number): Promise<P> {
    return waitFor(async () => {
      const p = this.last;
      return p && pred(p) ? p : undefined;
    }, `${this.name}: ${what}`, timeoutMs, this.waitPollMs);
  }
}
