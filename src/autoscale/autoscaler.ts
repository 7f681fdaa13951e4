// The request autoscaler: every interval it reads the gateways' demand (a DemandSource), feeds each
// model that scales on calls its sample, and writes what decide.ts asks for through the workload
// backend's scale, with an Event for each decision; the model's status then carries the decision
// (statusOf). A call held for a model at zero replicas is heard at once and decided on without
// waiting for the next interval. A scale-down goes to the target with the calls in flight on each
// model replica, so that it takes idle replicas and keeps those with calls (streams that run for
// minutes). One instance runs where the controller leads (local mode: the one process); it never runs
// on a call's path.
import { requestAutoscalingOf, type ModelDemand } from '../api/autoscaling.js';
import { rfc3339 } from '../api/conditions.js';
import { keyOf, type AutoscalingStatus, type DeployedModel } from '../api/types.js';
import type { EventRecorder } from '../api/events.js';
import type { Logger } from '../log.js';
import type { WorkloadObservation } from '../workload/workload.js';
import { ModelScaler, type DemandSample, type Windows } from './decide.js';

/** The demand of every gateway replica, read whole. */
export interface DemandSource {
  /** Per gateway replica (any stable id), its models' demand. */
  read(): Promise<Map<string, Map<string, ModelDemand>>> | Map<string, Map<string, ModelDemand>>;
  /**
   * Called when a gateway holds a call for a model at zero (with the model's key where known); returns
   * what stops listening.
   */
  onHeld(listener: (modelKey: string) => void): () => void;
  /**
   * Per model replica address (http://ip:port), its calls in flight summed over the gateways, as of
   * the last read; undefined when some gateway did not answer it (then nothing scales down).
   */
  replicasInFlight(): ReadonlyMap<string, number> | undefined;
}

/** Where replicas are asked for: the workload backend. */
export interface ScaleTarget {
  observe(key: string): WorkloadObservation | undefined;
  /**
   * Asks for `replicas`; a scale-down takes replicas without calls in flight (`inFlight`, by address)
   * and keeps the others. Resolves to the count asked for now, which is more than `replicas` when
   * busy replicas were kept.
   */
  scale(key: string, replicas: number, inFlight: ReadonlyMap<string, number>): Promise<number>;
}

export interface AutoscalerOptions {
  models: { listDeployedModels(): DeployedModel[]; getDeployedModel(key: string): DeployedModel | undefined };
  target: ScaleTarget;
  demand: DemandSource;
  events: EventRecorder;
  logger: Logger;
  intervalMs: number;
  /** The stable and panic windows (decide.ts). */
  windows: Windows;
  /** Monotonic ms. */
  now(): number;
  /** Wall time for status timestamps. */
  clock(): Date;
  timers?: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: unknown): void };
}

interface Previous {
  requestsTotal: number;
  callSecondsTotal: number;
  clockSeconds?: number;
}

/** Turns counters read at intervals into one sample per model, summed over the gateways; a gateway whose counters went back (restarted) is differenced from zero. */
export class DemandRates {
  private readonly last = new Map<string, Previous>();
  private lastAtMs: number | undefined;
  /** The length of the interval the last read stood for. */
  private spanMs = 0;

  /** `firstSpanMs`: the length the first read stands for (the interval). */
  sample(read: Map<string, Map<string, ModelDemand>>, atMs: number, firstSpanMs: number): Map<string, DemandSample> {
    const dt = this.lastAtMs === undefined ? 0 : (atMs - this.lastAtMs) / 1000;
    const spanMs = (this.spanMs = dt > 0 ? dt * 1000 : firstSpanMs);
    this.lastAtMs = atMs;
    const out = new Map<string, DemandSample>();
    const seen = new Set<string>();
    for (const [gateway, models] of read) {
      for (const [model, d] of models) {
        const id = `${gateway}\u0000${model}`;
        seen.add(id);
        const prev = this.last.get(id);
        this.last.set(id, { requestsTotal: d.requestsTotal, callSecondsTotal: d.callSecondsTotal, clockSeconds: d.clockSeconds });
        // Counters that went back: the gateway restarted, and counts from zero since (as Prometheus' rate() takes a reset).
        const restarted = prev !== undefined && (d.requestsTotal < prev.requestsTotal || d.callSecondsTotal < prev.callSecondsTotal);
        const base: Previous | undefined = restarted ? { requestsTotal: 0, callSecondsTotal: 0 } : prev;
        const s = out.get(model) ?? { atMs, spanMs, concurrency: 0, rate: 0, current: 0 };
        s.current += d.inFlight;
        // Over the gateway's own time between the two readings when it says it: the controller's reads
        // reach the gateways a varying moment after it starts them (a call held a whole interval would
        // otherwise read as 1.01 calls, and ask for two replicas); else the controller's.
        const own = d.clockSeconds !== undefined && base?.clockSeconds !== undefined ? d.clockSeconds - base.clockSeconds : 0;
        const over = own > 0 ? own : dt;
        if (over > 0 && base) {
          s.concurrency += (d.callSecondsTotal - base.callSecondsTotal) / over;
          s.rate += (d.requestsTotal - base.requestsTotal) / over;
        } else {
          // No earlier read of this gateway to difference against: what is in flight now stands for the interval.
          s.concurrency += d.inFlight;
        }
        out.set(model, s);
      }
    }
    for (const id of this.last.keys()) if (!seen.has(id)) this.last.delete(id);
    return out;
  }

  /** The sample of a model no gateway reported at the last read: no call over its interval. */
  idle(atMs: number): DemandSample {
    return { atMs, spanMs: this.spanMs, concurrency: 0, rate: 0, current: 0 };
  }
}

export class Autoscaler {
  private readonly scalers = new Map<string, ModelScaler>();
  private readonly decisions = new Map<string, AutoscalingStatus>();
  private readonly rates = new DemandRates();
  private readonly timers: NonNullable<AutoscalerOptions['timers']>;
  private timer: unknown;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private unlisten: (() => void) | undefined;
  /** Ticks begun and ticks over, and who waits for a tick to be over (afterNextTick). */
  private ticksBegun = 0;
  private ticksOver = 0;
  private tickWaiters: { after: number; resolve: () => void }[] = [];

  constructor(private readonly opts: AutoscalerOptions) {
    this.timers = opts.timers ?? { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) };
  }

  start(): void {
    this.unlisten = this.opts.demand.onHeld(() => this.tickSoon());
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.unlisten?.();
    this.timers.clearTimeout(this.timer);
  }

  /** Resolves once a tick that starts after this call is over (its decisions written). */
  afterNextTick(): Promise<void> {
    return new Promise((resolve) => this.tickWaiters.push({ after: this.ticksBegun + 1, resolve }));
  }

  /** The last decision for a model, for its status; undefined before any. */
  statusOf(key: string): AutoscalingStatus | undefined {
    return this.decisions.get(key);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timers.clearTimeout(this.timer);
    this.timer = this.timers.setTimeout(() => this.tickSoon(), this.opts.intervalMs);
  }

  /** Runs a tick now, or right after the one running. */
  private tickSoon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.ticksBegun++;
    this.running = this.tick()
      .catch((err: unknown) => this.opts.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'autoscaler tick failed'))
      .finally(() => {
        this.running = undefined;
        this.ticksOver++;
        const due = this.tickWaiters.filter((w) => w.after <= this.ticksOver);
        this.tickWaiters = this.tickWaiters.filter((w) => w.after > this.ticksOver);
        for (const w of due) w.resolve();
        if (this.again) {
          this.again = false;
          this.tickSoon();
        } else this.schedule();
      });
  }

  /** Reads the demand once and decides for every model that scales on calls. */
  async tick(): Promise<void> {
    const read = await this.opts.demand.read();
    const nowMs = this.opts.now();
    const samples = this.rates.sample(read, nowMs, this.opts.intervalMs);
    const live = new Set<string>();
    for (const dm of this.opts.models.listDeployedModels()) {
      const policy = requestAutoscalingOf(dm);
      if (!policy) continue;
      const key = keyOf(dm.metadata);
      const obs = this.opts.target.observe(key);
      if (!obs) continue;
      live.add(key);
      let scaler = this.scalers.get(key);
      if (!scaler) this.scalers.set(key, (scaler = new ModelScaler(nowMs, this.opts.windows)));
      scaler.observe(samples.get(key) ?? this.rates.idle(nowMs));
      const decision = scaler.decide(policy, nowMs, obs.replicas, obs.readyReplicas);
      if (!decision) continue;
      // The decision first: the status written when the replicas change carries it.
      const inFlight = this.opts.demand.replicasInFlight();
      if (decision.replicas < obs.replicas && !inFlight) continue;
      const previous = this.decisions.get(key);
      this.decisions.set(key, { desiredReplicas: decision.replicas, lastScaleReason: decision.reason, lastScaleMessage: decision.message, lastScaleTime: rfc3339(this.opts.clock()) });
      const asked = await this.opts.target.scale(key, decision.replicas, inFlight ?? new Map());
      if (asked !== decision.replicas) {
        // Busy replicas kept: the count the target took is the decision; none taken, no decision.
        if (asked === obs.replicas) {
          if (previous) this.decisions.set(key, previous);
          else this.decisions.delete(key);
          this.opts.logger.debug({ model: key, wanted: decision.replicas, replicas: asked }, 'scale-down deferred: every replica it could take has calls in flight');
          continue;
        }
        // The count the decider wrote in its message is the one asked for, not the one taken.
        decision.message = decision.message.replace(`${obs.replicas} → ${decision.replicas} replicas`, `${obs.replicas} → ${asked} replicas (${decision.replicas} asked for; ${asked - decision.replicas} kept for their calls in flight)`);
        decision.replicas = asked;
        this.decisions.set(key, { desiredReplicas: asked, lastScaleReason: decision.reason, lastScaleMessage: decision.message, lastScaleTime: rfc3339(this.opts.clock()) });
      }
      this.opts.events.record(dm, { type: 'Normal', reason: decision.reason, message: decision.message });
    }
    for (const key of this.scalers.keys()) {
      if (live.has(key)) continue;
      this.scalers.delete(key);
      this.decisions.delete(key);
    }
  }
}
