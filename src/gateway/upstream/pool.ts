// The gateway's way to call a model: picks the transport by body size, picks the replica (the
// balancer: least outstanding of two random, ejected and unhealthy replicas left out), and retries
// once on another replica only when the connection could not be made (nothing was sent) and the
// retry budget allows, never once the body may have reached a model. It also runs the replicas'
// active health checks (health.ts).
//
// Two transports because each is cheaper where the other is not (docs/performance.md): undici
// for small buffered bodies, node:http for large and streamed ones; long streams (generations) go
// over node:http connections of their own, with their own cap (UPSTREAM_STREAM_CONNECTIONS).
import { NodeHttpTransport } from './nodeHttp.js';
import type { PoolOptions } from './transport.js';
import { UndiciTransport } from './undici.js';
import { Balancer, BALANCER_DEFAULTS, type BalancerOptions, type Outcome } from './balancer.js';
import { isConnectFailure, isConnectionLoss, outcomeOf } from './failures.js';
import { HealthChecker, type HealthCheckOptions, type HealthTarget } from './health.js';
import { LoadScraper, type LoadOptions, type LoadTarget } from './load.js';
import { clientAborted, type AnswerReading, type OpenResponse, type Transport, type UpstreamRequest, type WholeAnswer } from './transport.js';

/** Bodies up to this size go through undici; larger and streamed ones through node:http. */
export const SMALL_BODY_BYTES = 32 * 1024;

export interface UpstreamPoolOptions extends PoolOptions {
  /** Most connections per replica for long streams (UpstreamRequest.long); default `connections`. */
  streamConnections?: number;
  balancer?: Partial<BalancerOptions>;
  /** The replicas to check and their health routes; no active checks without it. */
  healthTargets?: () => readonly HealthTarget[];
  healthChecks?: HealthCheckOptions;
  /** The replicas that report their load (load.ts), and how often they are asked; no load-aware picks without them. */
  loadTargets?: () => readonly LoadTarget[];
  load?: LoadOptions;
}

/** Where a call goes: the base URLs of a model's ready replicas. */
export interface UpstreamTarget {
  upstreams: readonly string[];
  /** Its replicas report their load: picks go by it while the reports are fresh. */
  loadAware?: boolean;
}

export class UpstreamPool {
  private readonly small: Transport;
  private readonly large: Transport;
  private readonly streams: Transport;
  readonly balancer: Balancer;
  readonly health: HealthChecker | undefined;
  readonly load: LoadScraper | undefined;

  constructor(opts: UpstreamPoolOptions) {
    this.small = new UndiciTransport(opts);
    this.large = new NodeHttpTransport(opts);
    this.streams = new NodeHttpTransport({ keepAliveMs: opts.keepAliveMs, connections: opts.streamConnections ?? opts.connections });
    this.balancer = new Balancer({ ...BALANCER_DEFAULTS, random: Math.random, now: performance.now.bind(performance), ...opts.balancer });
    if (opts.healthTargets && opts.healthChecks && opts.healthChecks.intervalMs > 0) {
      this.health = new HealthChecker(opts.healthTargets, this.balancer, { ...opts.healthChecks, keepAliveMs: opts.keepAliveMs });
      this.health.start();
    }
    if (opts.loadTargets && opts.load && opts.load.intervalMs > 0) {
      this.load = new LoadScraper(opts.loadTargets, this.balancer, opts.load);
      this.load.start();
    }
  }

  /** The replica for a first attempt: by reported load (and the prompt's prefix) when the target's replicas report it, else least-request. */
  private first(target: UpstreamTarget, req: UpstreamRequest): string {
    const b = this.balancer;
    const byLoad = target.loadAware && target.upstreams.length > 1 ? this.load?.pick(target.upstreams, (a) => b.takesCalls(a), req.prefix) : undefined;
    return byLoad ?? (b.pick(target.upstreams) as string);
  }

  private transport(req: UpstreamRequest): Transport {
    if (req.long) return this.streams;
    return Buffer.isBuffer(req.body) && req.body.length <= SMALL_BODY_BYTES ? this.small : this.large;
  }

  /** One attempt on one replica, counted by the balancer while it runs and judged when it ends. */
  private async attempt<T>(address: string, upstreams: readonly string[], run: () => Promise<T>): Promise<T> {
    const b = this.balancer;
    b.begin(address);
    let outcome: Outcome = 'neutral';
    try {
      const value = await run();
      outcome = 'success';
      return value;
    } catch (err) {
      outcome = outcomeOf(err);
      if (this.health && isConnectionLoss(err)) this.health.suspect(address);
      throw err;
    } finally {
      b.end(address, upstreams, outcome);
    }
  }

  /** Tries the balancer's pick, and one other replica if the first refused the connection. */
  private async withRetry<T>(target: UpstreamTarget, req: UpstreamRequest, call: (origin: string, req: UpstreamRequest) => Promise<T>): Promise<T> {
    if (req.cancel?.requested) throw clientAborted();
    const { upstreams } = target;
    const first = this.first(target, req);
    const sentAt = performance.now();
    try {
      return await this.attempt(first, upstreams, () => call(first, req));
    } catch (err) {
      if (upstreams.length < 2 || !isConnectFailure(err) || req.cancel?.requested) throw err;
      const second = this.balancer.pick(upstreams, first);
      if (second === undefined || !this.balancer.tryRetry()) throw err;
      try {
        // The deadline is the call's, not the attempt's.
        const left = Math.max(1, req.timeoutMs - (performance.now() - sentAt));
        return await this.attempt(second, upstreams, () => call(second, { ...req, timeoutMs: left }));
      } finally {
        this.balancer.retryDone();
      }
    }
  }

  /** Sends a call and reads its answer whole (see AnswerReading). Throws the raw error: map it with upstreamFailure. */
  fetch(target: UpstreamTarget, req: UpstreamRequest, reading: AnswerReading): Promise<WholeAnswer> {
    const t = this.transport(req);
    return this.withRetry(target, req, (origin, r) => t.fetch(origin, r, reading));
  }

  /**
   * Sends a call and writes the answer's body straight into the writable that `open` returns once
   * the status and headers are known. Resolves when the body has been written; a failure after
   * `open` has destroyed that writable (the client connection is aborted, never cleanly ended).
   */
  stream(target: UpstreamTarget, req: UpstreamRequest, open: OpenResponse): Promise<void> {
    const t = this.transport(req);
    return this.withRetry(target, req, (origin, r) => t.stream(origin, r, open));
  }

  async close(): Promise<void> {
    await Promise.all([this.health?.stop(), this.load?.stop(), this.large.close(), this.streams.close(), this.small.close()]);
  }
}
