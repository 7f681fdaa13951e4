// Which replica of a model takes a call: the less busy of two picked at random (least outstanding
// calls, "power of two choices"), leaving out replicas that passive outlier detection ejected or
// active health checks (health.ts) found unhealthy, and the retry budget that keeps retries from
// multiplying an outage. State is kept per replica address
// for as long as the address is in use, so it survives routing-table rebuilds.

/** How replicas are ejected and retries are budgeted (Envoy's outlier detection and retry budget, in spirit). */
export interface BalancerOptions {
  /** Consecutive transport failures (connect, reset, timeout) that eject a replica; 0 turns ejection off. */
  consecutiveFailures: number;
  /** The first ejection lasts this long; each further one in a row lasts one more base time, up to maxEjectionMs. */
  baseEjectionMs: number;
  maxEjectionMs: number;
  /** Most of a model's replicas ejected at once, in percent (at least one of two or more may always go). */
  maxEjectionPercent: number;
  /** Retries in flight may be this share of the calls in flight, in percent (at least minRetries). */
  retryBudgetPercent: number;
  minRetries: number;
  random: () => number;
  /** Milliseconds on a monotonic clock. */
  now: () => number;
}

export const BALANCER_DEFAULTS: Omit<BalancerOptions, 'random' | 'now'> = {
  consecutiveFailures: 5,
  baseEjectionMs: 30_000,
  maxEjectionMs: 300_000,
  maxEjectionPercent: 50,
  retryBudgetPercent: 20,
  minRetries: 3,
};

/** What a finished attempt says about its replica. */
export type Outcome = 'success' | 'failure' | 'neutral';

interface Replica {
  outstanding: number;
  /** Transport failures in a row. */
  failures: number;
  /** Until when it gets no calls (0: in rotation). */
  ejectedUntil: number;
  /** Ejections in a row: the next one lasts this many base times plus one. */
  ejections: number;
  lastUsed: number;
  /** False while active health checks fail it. */
  healthy: boolean;
}

/** How many picks between two sweeps of replica state nobody uses any more. */
const SWEEP_EVERY = 4096;
const IDLE_FORGET_MS = 10 * 60_000;

export interface BalancerStats {
  ejectionsTotal: number;
  retriesTotal: number;
  /** Retries not made because the budget was spent. */
  retriesRefusedTotal: number;
}

export class Balancer {
  private readonly replicas = new Map<string, Replica>();
  private inFlight = 0;
  private retriesInFlight = 0;
  private picks = 0;
  readonly stats: BalancerStats = { ejectionsTotal: 0, retriesTotal: 0, retriesRefusedTotal: 0 };

  constructor(private readonly opts: BalancerOptions) {}

  private replica(address: string): Replica {
    let r = this.replicas.get(address);
    if (!r) {
      r = { outstanding: 0, failures: 0, ejectedUntil: 0, ejections: 0, lastUsed: -Infinity, healthy: true };
      this.replicas.set(address, r);
    }
    return r;
  }

  private inRotation(address: string, now: number): boolean {
    const r = this.replicas.get(address);
    return r === undefined || (r.healthy && r.ejectedUntil <= now);
  }

  private healthy(address: string): boolean {
    return this.replicas.get(address)?.healthy ?? true;
  }

  /** Whether passive ejection has it out now (health aside). */
  private ejected(address: string, now: number): boolean {
    const r = this.replicas.get(address);
    return r !== undefined && r.ejectedUntil > now;
  }

  /**
   * The replica for the next attempt among `addresses`, leaving out `exclude` (the one a retry
   * moves off) and ejected or unhealthy ones. When every candidate is out, the healthy ejected ones
   * are candidates again, and when none is healthy, all of them (better a replica that failed than
   * none). Undefined only when nothing but `exclude` is left.
   */
  pick(addresses: readonly string[], exclude?: string): string | undefined {
    if (++this.picks % SWEEP_EVERY === 0) this.sweep();
    const now = this.opts.now();
    const n = addresses.length;
    if (n === 1) return addresses[0] === exclude ? undefined : addresses[0];
    let eligible = (a: string): boolean => a !== exclude && this.inRotation(a, now);
    let candidates = count(addresses, eligible);
    if (candidates === 0) candidates = count(addresses, (eligible = (a) => a !== exclude && this.healthy(a)));
    if (candidates === 0) candidates = count(addresses, (eligible = (a) => a !== exclude));
    if (candidates === 0) return undefined;
    // Two distinct candidates at random (by rank among the eligible), the less busy one wins.
    const i = Math.floor(this.opts.random() * candidates);
    let j = candidates > 1 ? Math.floor(this.opts.random() * (candidates - 1)) : i;
    if (candidates > 1 && j >= i) j++;
    let first: string | undefined;
    let second: string | undefined;
    let rank = 0;
    for (const a of addresses) {
      if (!eligible(a)) continue;
      if (rank === i) first = a;
      if (rank === j) second = a;
      rank++;
    }
    if (first === undefined || second === undefined) return first ?? second;
    return (this.replicas.get(second)?.outstanding ?? 0) < (this.replicas.get(first)?.outstanding ?? 0) ? second : first;
  }

  /** Whether a replica takes calls now (neither ejected nor failing its health checks). */
  takesCalls(address: string): boolean {
    return this.inRotation(address, this.opts.now());
  }

  /** An attempt on `address` starts. */
  begin(address: string): void {
    const r = this.replica(address);
    r.outstanding++;
    r.lastUsed = this.opts.now();
    this.inFlight++;
  }

  /** An attempt on `address`, one of `addresses` (its model's replicas), ended. */
  end(address: string, addresses: readonly string[], outcome: Outcome): void {
    const r = this.replica(address);
    r.outstanding--;
    this.inFlight--;
    const now = this.opts.now();
    if (outcome === 'success') {
      r.failures = 0;
      // Back and serving for a base time: the next ejection starts from the base again.
      if (r.ejections > 0 && now >= r.ejectedUntil + this.opts.baseEjectionMs) r.ejections = 0;
    } else if (outcome === 'failure') {
      r.failures++;
      if (this.opts.consecutiveFailures > 0 && r.failures >= this.opts.consecutiveFailures && r.ejectedUntil <= now) this.eject(r, addresses, now);
    }
  }

  private eject(r: Replica, addresses: readonly string[], now: number): void {
    const n = addresses.length;
    if (n < 2) return;
    // Replicas out for failed health checks count: ejection never adds to what they took out.
    const ejected = count(addresses, (a) => !this.inRotation(a, now));
    const allowed = Math.max(1, Math.floor((n * this.opts.maxEjectionPercent) / 100));
    if (ejected >= allowed) return;
    r.ejections++;
    r.ejectedUntil = now + Math.min(this.opts.maxEjectionMs, this.opts.baseEjectionMs * r.ejections);
    r.failures = 0;
    this.stats.ejectionsTotal++;
  }

  /** Whether a retry may start now (the budget: a share of the calls in flight); counts it when it may. */
  tryRetry(): boolean {
    const budget = Math.max(this.opts.minRetries, Math.floor((this.inFlight * this.opts.retryBudgetPercent) / 100));
    if (this.retriesInFlight >= budget) {
      this.stats.retriesRefusedTotal++;
      return false;
    }
    this.retriesInFlight++;
    this.stats.retriesTotal++;
    return true;
  }

  retryDone(): void {
    this.retriesInFlight--;
  }

  /** What the active health checks say of a replica (an unknown address is healthy). */
  setHealthy(address: string, healthy: boolean): void {
    if (healthy && !this.replicas.has(address)) return;
    this.replica(address).healthy = healthy;
  }

  /** How many of `addresses` take calls now (not ejected, not unhealthy). */
  inRotationCount(addresses: readonly string[]): number {
    const now = this.opts.now();
    return count(addresses, (a) => this.inRotation(a, now));
  }

  /** When the replica last took a call (monotonic ms; -Infinity if never). */
  lastUsed(address: string): number {
    return this.replicas.get(address)?.lastUsed ?? -Infinity;
  }

  /** Replicas the health checks have out of rotation now (for the metrics). */
  unhealthyNow(): number {
    let n = 0;
    for (const r of this.replicas.values()) if (!r.healthy) n++;
    return n;
  }

  /** Replicas ejected now (for the metrics). */
  ejectedNow(): number {
    const now = this.opts.now();
    let n = 0;
    for (const r of this.replicas.values()) if (r.ejectedUntil > now) n++;
    return n;
  }

  /** Outstanding calls on an address (tests, metrics). */
  outstanding(address: string): number {
    return this.replicas.get(address)?.outstanding ?? 0;
  }

  /** Every replica address with calls on it now, and how many. */
  busy(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [a, r] of this.replicas) if (r.outstanding > 0) out.set(a, r.outstanding);
    return out;
  }

  /** Whether an address is ejected now. */
  isEjected(address: string): boolean {
    return this.ejected(address, this.opts.now());
  }

  /** Forgets replicas nobody has called for a while (pods come and go; their addresses with them). */
  private sweep(): void {
    const now = this.opts.now();
    for (const [a, r] of this.replicas) {
      if (r.outstanding === 0 && r.healthy && r.ejectedUntil <= now && now - r.lastUsed > IDLE_FORGET_MS) this.replicas.delete(a);
    }
  }
}

function count(addresses: readonly string[], pred: (a: string) => boolean): number {
  let n = 0;
  for (const a of addresses) if (pred(a)) n++;
  return n;
}

/**
 * The models among `targets` (replicas with their model) of which a replica took a call within
 * `withinMs` of `now`: all of a busy model's replicas are checked and read at the fast pace, an
 * unhealthy one (which takes no call itself) included.
 */
export function busyModels(targets: Iterable<{ address: string; model: string }>, lastUsed: (address: string) => number, now: number, withinMs: number): Set<string> {
  const busy = new Set<string>();
  for (const t of targets) if (now - lastUsed(t.address) < withinMs) busy.add(t.model);
  return busy;
}
