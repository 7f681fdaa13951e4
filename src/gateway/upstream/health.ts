// Active health checks of model replicas: each replica is asked for its health route on a
// connection of its own with a short timeout, and one that fails `unhealthyThreshold` checks in a
// row is out of rotation until a check passes (Envoy's active health checking, in spirit). Passive
// ejection (balancer.ts) needs calls to fail; this catches a replica that accepts connections and
// never answers before calls wait out their deadline on it. The replicas of a model that took no call
// for a while are checked at a slower pace, failing ones too (Envoy's no_traffic_interval and
// no_traffic_unhealthy_interval), so thousands of idle models cost little even when their replicas
// are unreachable; a call to the model brings all of its replicas back to the fast pace.
// A replica whose connection was refused or broken is out at once until a check passes (Finagle's
// fail-fast): a killed pod takes no more calls on connections that died with it. A replica that
// leaves the table with failed checks and comes back within the slow interval (its Ready condition
// flapping, as a frozen pod's may) resumes with them: only a passing check brings it back.
import { Agent, request } from 'undici';
import { busyModels, type Balancer } from './balancer.js';

/** A replica and the route that says it is healthy. */
export interface HealthTarget {
  /** The replica's base URL, as the balancer knows it. */
  address: string;
  path: string;
  /** The model it serves (namespace/name): the pace of its checks follows the model's calls. */
  model: string;
}

export interface HealthCheckOptions {
  /** How often a replica of a model that had calls lately is checked; 0 turns active checks off. */
  intervalMs: number;
  /** A check not answered 2xx within this long fails. */
  timeoutMs: number;
  /** Failed checks in a row that take a replica out of rotation. */
  unhealthyThreshold: number;
  /** How often a replica of a model with no call in this long is checked (NO_TRAFFIC_INTERVAL_MS). */
  noTrafficIntervalMs: number;
  /** How long a probe's idle connection stays open (the pool's UPSTREAM_KEEPALIVE_MS, which model servers' keep-alive outlasts). */
  keepAliveMs?: number;
}

/** Envoy's no_traffic_interval default. */
export const NO_TRAFFIC_INTERVAL_MS = 60_000;

/** Asks one replica; resolves true when it answered 2xx within the timeout, never rejects. */
export type Probe = (target: HealthTarget, timeoutMs: number) => Promise<boolean>;

export interface Clock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Calls `fn` every `ms` until the returned stop is called. */
  every(ms: number, fn: () => void): () => void;
}

interface Checked {
  path: string;
  /** Failed checks in a row. */
  failures: number;
  /** When the last check started. */
  lastAt: number;
  checking: boolean;
}

export interface HealthStats {
  checksTotal: number;
  failedChecksTotal: number;
  /** Replicas taken out by a lost connection (suspect). */
  connectionLossesTotal: number;
}

/** A replica that left the table with failed checks in a row, and when. */
interface Departed {
  path: string;
  failures: number;
  leftAt: number;
}

export class HealthChecker {
  private readonly checked = new Map<string, Checked>();
  /** Replicas that left the table lately with failed checks: one back within a slow interval resumes with them. */
  private readonly departed = new Map<string, Departed>();
  private stopTicking: (() => void) | undefined;
  /** The list the last tick saw: replicas are forgotten only when it changes, not on every tick. */
  private lastTargets: readonly HealthTarget[] | undefined;
  private readonly agent: Agent | undefined;
  private readonly probe: Probe;
  readonly stats: HealthStats = { checksTotal: 0, failedChecksTotal: 0, connectionLossesTotal: 0 };

  constructor(
    /** The replicas to check: a new list whenever they change (the routing table makes one per change). */
    private readonly targets: () => readonly HealthTarget[],
    private readonly balancer: Balancer,
    private readonly opts: HealthCheckOptions,
    probe?: Probe,
    private readonly clock: Clock = realClock,
    /** Spreads the first checks of replicas seen together (a gateway starting, a large model scaling up). */
    private readonly random: () => number = Math.random,
  ) {
    if (probe) this.probe = probe;
    else {
      const keepAlive = opts.keepAliveMs ?? 4000;
      const agent = new Agent({ connections: 1, pipelining: 1, keepAliveTimeout: keepAlive, keepAliveMaxTimeout: keepAlive, connect: { timeout: opts.timeoutMs } });
      this.agent = agent;
      this.probe = (target, timeoutMs) => probeWith(agent, target, timeoutMs);
    }
  }

  /** Starts checking; a checker is started once and stopped once. */
  start(): void {
    // Ticks at a fraction of the interval, so a check is at most that late.
    this.stopTicking ??= this.clock.every(Math.max(10, Math.floor(this.opts.intervalMs / 4)), () => this.tick());
  }

  /** Stops checking; resolves once the probes' connections are closed. */
  async stop(): Promise<void> {
    this.stopTicking?.();
    this.stopTicking = () => undefined;
    await this.agent?.destroy().catch(() => undefined);
  }

  /** Starts the checks that are due (a replica listed twice gets one: its check is then under way); forgets replicas no model has any more. */
  tick(): void {
    const now = this.clock.now();
    const targets = this.targets();
    if (targets !== this.lastTargets) this.forgetAllBut(targets, now);
    this.lastTargets = targets;
    const busy = busyModels(targets, (a) => this.balancer.lastUsed(a), now, this.opts.noTrafficIntervalMs);
    for (const target of targets) {
      let c = this.checked.get(target.address);
      if (!c || c.path !== target.path) {
        const back = this.departed.get(target.address);
        this.departed.delete(target.address);
        if (back && back.path === target.path && now - back.leftAt < this.opts.noTrafficIntervalMs) {
          // Back after a flap: its failed checks stand, and it is checked now.
          c = { path: target.path, failures: back.failures, lastAt: now - this.opts.intervalMs, checking: false };
          if (c.failures >= this.opts.unhealthyThreshold) this.balancer.setHealthy(target.address, false);
        } else {
          // As if last checked up to a slow interval ago: thousands of replicas seen at once are not
          // all checked in the same tick; a busy one is still checked within an interval.
          c = { path: target.path, failures: 0, lastAt: now - this.opts.noTrafficIntervalMs * (1 - this.random()), checking: false };
        }
        this.checked.set(target.address, c);
      }
      if (c.checking) continue;
      // A model's first call after a quiet spell finds its replicas as the slow checks left them.
      if (now - c.lastAt < (busy.has(target.model) ? this.opts.intervalMs : this.opts.noTrafficIntervalMs)) continue;
      c.lastAt = now;
      c.checking = true;
      this.stats.checksTotal++;
      void this.probe(target, this.opts.timeoutMs).then((ok) => this.judge(target.address, c, ok));
    }
  }

  /**
   * Replicas no longer among `targets` are forgotten, and healthy again should they come back, but
   * for those with failed checks, remembered for a slow interval in case they come back sooner.
   */
  private forgetAllBut(targets: readonly HealthTarget[], now: number): void {
    const listed = new Set(targets.map((t) => t.address));
    for (const [address, gone] of this.departed) if (now - gone.leftAt >= this.opts.noTrafficIntervalMs) this.departed.delete(address);
    for (const [address, c] of this.checked) {
      if (!listed.has(address)) {
        this.checked.delete(address);
        this.balancer.setHealthy(address, true);
        if (c.failures > 0) this.departed.set(address, { path: c.path, failures: c.failures, leftAt: now });
      }
    }
  }

  /**
   * A call's connection to `address` was refused or broke: the replica takes no new call until a
   * check passes (checked at the fast pace meanwhile). A replica the checks do not know is left alone.
   */
  suspect(address: string): void {
    const c = this.checked.get(address);
    if (!c || c.failures >= this.opts.unhealthyThreshold) return;
    c.failures = this.opts.unhealthyThreshold;
    this.stats.connectionLossesTotal++;
    this.balancer.setHealthy(address, false);
  }

  private judge(address: string, c: Checked, ok: boolean): void {
    c.checking = false;
    if (this.checked.get(address) !== c) return;
    if (ok) {
      c.failures = 0;
      this.balancer.setHealthy(address, true);
      return;
    }
    this.stats.failedChecksTotal++;
    if (++c.failures >= this.opts.unhealthyThreshold) this.balancer.setHealthy(address, false);
  }
}

async function probeWith(agent: Agent, target: HealthTarget, timeoutMs: number): Promise<boolean> {
  try {
    const res = await request(target.address + target.path, {
      dispatcher: agent,
      method: 'GET',
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body.dump();
    return res.statusCode >= 200 && res.statusCode < 300;
  } catch {
    return false;
  }
}

const realClock: Clock = {
  now: () => performance.now(),
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
};
