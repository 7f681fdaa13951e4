// The request autoscaler's decision for one DeployedModel, after Knative's KPA: the calls in flight
// (queued and held included) and arriving, summed over every gateway replica, averaged over a stable
// window (60 s by default, AUTOSCALE_STABLE_WINDOW_SECONDS) and a panic window (a tenth of it, 6 s, as
// Knative's panic-window-percentage). Desired = ceil(load / target), the larger of the
// concurrency and rate answers. A burst whose panic answer reaches twice the ready replicas starts
// panic mode, which follows the burst at once and scales down not at all until the stable window has
// been calm. Out of panic, scale-down is rate-limited (at most half the replicas per decision), goes
// no lower than the panic window asks for (the calls of the last moments), and waits for a full
// stable window of history (a new or restarted autoscaler does not shrink a model it has not watched
// for long). A model with a scaleToZeroSpec goes to zero at once when idleScaledownPeriod has passed
// without a call and minScaleupPeriod since the last wake, and wakes on its first call.
// Deterministic: time comes in with the samples.
import type { RequestAutoscaling } from '../api/autoscaling.js';

/** The windows the averages are taken over. */
export interface Windows {
  stableMs: number;
  panicMs: number;
}

/** Knative's defaults: a 60 s stable window, and a panic window a tenth of it. */
export const DEFAULT_STABLE_WINDOW_SECONDS = 60;
/** The panic window's share of the stable window (Knative's panic-window-percentage, 10). */
export const PANIC_WINDOW_SHARE = 0.1;

export function windowsOf(stableSeconds: number): Windows {
  return { stableMs: stableSeconds * 1000, panicMs: stableSeconds * 1000 * PANIC_WINDOW_SHARE };
}
/** Panic when the panic window asks for this many times the ready replicas. */
export const PANIC_THRESHOLD = 2;
/** At most this factor down per decision. */
export const MAX_SCALE_DOWN_RATE = 2;

/** The demand for one model over one interval, summed over the gateway replicas. */
export interface DemandSample {
  /** End of the interval (ms, the autoscaler's clock). */
  atMs: number;
  /** Its length (ms): averages weigh each sample by it. */
  spanMs: number;
  /** Average calls in flight over the interval (queued and held calls included). */
  concurrency: number;
  /** Calls that arrived, per second over the interval. */
  rate: number;
  /** Calls in flight at its end: at zero, a held call wakes the model. */
  current: number;
}

/** Average calls in flight and calls per second over a window. */
interface Load {
  concurrency: number;
  rate: number;
}

export type ScaleReason = 'ScaledUp' | 'ScaledDown' | 'ScaledToZero' | 'ScaledFromZero';

export interface Decision {
  replicas: number;
  reason: ScaleReason;
  message: string;
}

/** A float above an integer by rounding error only is that integer. */
function ceilish(x: number): number {
  return Math.max(0, Math.ceil(x - 1e-9));
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

/** One model's window of demand and the memory of its last panic and wake. */
export class ModelScaler {
  private samples: DemandSample[] = [];
  private panicUntilMs = -Infinity;
  private lastActiveMs: number;
  private wokeAtMs = -Infinity;

  /** `sinceMs`: when watching began (no scale-down before a stable window of it). */
  constructor(private readonly sinceMs: number, private readonly windows: Windows = windowsOf(DEFAULT_STABLE_WINDOW_SECONDS)) {
    this.lastActiveMs = sinceMs;
  }

  observe(sample: DemandSample): void {
    this.samples.push(sample);
    const oldest = sample.atMs - this.windows.stableMs;
    let drop = 0;
    while (drop < this.samples.length && this.samples[drop].atMs <= oldest) drop++;
    if (drop) this.samples.splice(0, drop);
    if (sample.current > 0 || sample.concurrency > 0 || sample.rate > 0) this.lastActiveMs = sample.atMs;
  }

  /** Calls in flight right now, as the latest sample says. */
  get current(): number {
    return this.samples.at(-1)?.current ?? 0;
  }

  private average(nowMs: number, windowMs: number): Load {
    let c = 0;
    let r = 0;
    let span = 0;
    for (let i = this.samples.length - 1; i >= 0 && this.samples[i].atMs > nowMs - windowMs; i--) {
      const s = this.samples[i];
      c += s.concurrency * s.spanMs;
      r += s.rate * s.spanMs;
      span += s.spanMs;
    }
    return span > 0 ? { concurrency: c / span, rate: r / span } : { concurrency: 0, rate: 0 };
  }

  /**
   * What `policy` asks for now, given `replicas` asked for and `ready` of them ready; undefined when
   * it asks for what there is.
   */
  decide(policy: RequestAutoscaling, nowMs: number, replicas: number, ready: number): Decision | undefined {
    const { stableMs, panicMs } = this.windows;
    const stable = this.average(nowMs, stableMs);
    const panic = this.average(nowMs, panicMs);
    const want = (load: Load): number => Math.max(
      policy.targetConcurrency ? ceilish(load.concurrency / policy.targetConcurrency) : 0,
      policy.targetRequestsPerSecond ? ceilish(load.rate / policy.targetRequestsPerSecond) : 0,
    );
    const desiredStable = want(stable);
    const desiredPanic = want(panic);
    if (desiredPanic >= PANIC_THRESHOLD * Math.max(ready, 1) && desiredPanic > replicas) this.panicUntilMs = nowMs + stableMs;
    const panicking = nowMs < this.panicUntilMs;
    let desired = panicking ? Math.max(replicas, desiredPanic, desiredStable) : desiredStable;
    if (this.current > 0) desired = Math.max(desired, 1);
    // At zero only a call wakes the model: the windows still remember the calls of before it went idle.
    else if (replicas === 0) desired = 0;
    if (desired < replicas) {
      // Down only as far as the last moments' calls allow too: a stable average still catching up
      // with a rising load would otherwise take replicas away that the calls in flight need.
      desired = Math.max(desired, desiredPanic);
      if (nowMs - this.sinceMs < stableMs) desired = replicas;
      else if (replicas > 1) desired = Math.max(desired, Math.ceil(replicas / MAX_SCALE_DOWN_RATE));
    }
    const zero = policy.scaleToZero;
    let floor = policy.min;
    const idleFor = nowMs - this.lastActiveMs;
    if (zero && replicas > 0) {
      // The periods keep a running model up; once both have passed without a call, the model is
      // idle and goes to zero at once, whatever the stable window still remembers (Vertex AI's
      // idleScaledownPeriod: no traffic for that long, zero), and not before a stable window of
      // watching. A model already at zero stays there until a call comes (an autoscaler that just
      // started has no history to wake it for).
      const idle = idleFor >= zero.idleMs && nowMs - this.wokeAtMs >= zero.minScaleupMs;
      if (!idle) floor = Math.max(floor, 1);
      else if (nowMs - this.sinceMs >= stableMs) desired = 0;
    }
    desired = Math.min(Math.max(desired, floor), policy.max);
    if (desired === replicas) return undefined;
    const reason: ScaleReason = replicas === 0 ? 'ScaledFromZero' : desired === 0 ? 'ScaledToZero' : desired > replicas ? 'ScaledUp' : 'ScaledDown';
    if (reason === 'ScaledFromZero') this.wokeAtMs = nowMs;
    return { replicas: desired, reason, message: `${replicas} → ${desired} replicas: ${this.why(policy, reason, desired, stable, panic, panicking, Math.max(0, idleFor))}` };
  }

  /** A decision's cause in words: the idle time, the calls waiting, or the load against the targets. */
  private why(policy: RequestAutoscaling, reason: ScaleReason, desired: number, stable: Load, panic: Load, panicking: boolean, idleFor: number): string {
    if (reason === 'ScaledToZero') return `no call for ${Math.round(idleFor / 1000)} s (idleScaledownPeriod ${policy.scaleToZero!.idleMs / 1000} s)`;
    const waiting = this.current;
    if (reason === 'ScaledFromZero' && desired === 1 && waiting > 0) return `${waiting} call${waiting === 1 ? '' : 's'} waiting`;
    const over = `over ${fmt(this.windows.stableMs / 1000)} s`;
    const overPanic = `over ${fmt(this.windows.panicMs / 1000)} s`;
    const load = [
      policy.targetConcurrency !== undefined ? `${fmt(stable.concurrency)} calls in flight ${over}, ${fmt(panic.concurrency)} ${overPanic}, target ${fmt(policy.targetConcurrency)} per replica` : '',
      policy.targetRequestsPerSecond !== undefined ? `${fmt(stable.rate)} calls/s ${over}, ${fmt(panic.rate)} ${overPanic}, target ${fmt(policy.targetRequestsPerSecond)} per replica` : '',
    ].filter(Boolean).join('; ');
    return `${load}${panicking ? ' (panic mode)' : ''}`;
  }
}
