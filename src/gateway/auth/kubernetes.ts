// --auth kubernetes: a call passes once the apiserver has said who holds its bearer token
// (TokenReview) and that they may do what the call asks (SubjectAccessReview), as kube-rbac-proxy
// does it. Both answers are remembered, keyed by a SHA-256 of the token (never the token): accepted
// tokens and allowed calls for the allow TTL (a token never past its own expiry), refused tokens and
// denied calls for the deny TTL, the least recently used dropped past a bound. Calls that need the
// same review at once share it; reviews are sent at a bounded rate, so a flood of made-up tokens
// costs the apiserver little; when the apiserver cannot answer, calls are refused (fail closed).
import { hash as digest } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LRUCache } from 'lru-cache';
import { ApiError } from '../../errors.js';
import { describeApiError } from '../../kube/errors.js';
import { accessKey, refusal, type Access } from './access.js';
import { Refusal, bearerToken, checkTokenSyntax, jwtExpiry, unauthenticated, type Gate, type Identity } from './gate.js';
import type { Reviewer } from './reviews.js';

export interface KubernetesGateOptions {
  reviewer: Reviewer;
  /** Audiences tokens must be for; empty: the apiserver's own. */
  audiences: readonly string[];
  allowTtlMs: number;
  denyTtlMs: number;
  /** Most tokens and most decisions remembered (each). */
  cacheSize: number;
  /** Reviews sent per second at most (bursts of twice as many). */
  reviewsPerSecond: number;
  /** Milliseconds, monotonic (performance.now in production; tests move it). */
  now?: () => number;
  /** Wall clock in ms since the epoch, for tokens' expiry (Date.now in production). */
  wallClock?: () => number;
  /** Called when a review is back (or failed): for the review latency metric. */
  onReview?(kind: ReviewKind, outcome: ReviewOutcome, seconds: number): void;
}

export type ReviewKind = 'TokenReview' | 'SubjectAccessReview';
export type ReviewOutcome = 'authenticated' | 'unauthenticated' | 'allowed' | 'denied' | 'error';

/** How checks ended, and how many were answered from memory; read by the metrics at scrape time. */
export interface GateStats {
  allowed: number;
  denied: number;
  unauthenticated: number;
  unavailable: number;
  throttled: number;
  tokenHits: number;
  accessHits: number;
}

type TokenEntry = { identity: Identity } | { refused: string };
type Decision = { allowed: true } | { allowed: false; reason: string };

export class KubernetesGate implements Gate {
  readonly enabled = true;
  readonly stats: GateStats = { allowed: 0, denied: 0, unauthenticated: 0, unavailable: 0, throttled: 0, tokenHits: 0, accessHits: 0 };
  private readonly tokens: LRUCache<string, TokenEntry>;
  private readonly decisions: LRUCache<string, Decision>;
  /** Reviews under way, by what they decide: the calls asking the same at once wait on one. */
  private readonly asking = new Map<string, Promise<unknown>>();
  private readonly budget: ReviewBudget;
  private readonly now: () => number;
  private readonly wallClock: () => number;

  constructor(private readonly opts: KubernetesGateOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.wallClock = opts.wallClock ?? Date.now;
    const perf = { now: this.now };
    this.budget = new ReviewBudget(opts.reviewsPerSecond, this.now);
    this.tokens = new LRUCache({ max: opts.cacheSize, perf, ttlResolution: 0 });
    this.decisions = new LRUCache({ max: opts.cacheSize, perf, ttlResolution: 0 });
  }

  check(req: IncomingMessage, access: Access | undefined): Identity | Promise<Identity> {
    let token: string;
    try {
      token = bearerToken(req);
    } catch (err) {
      this.stats.unauthenticated++;
      throw err;
    }
    const hash = digest('sha256', token, 'base64url');
    const known = this.tokens.get(hash);
    if (known === undefined) return this.slowCheck(token, hash, access);
    this.stats.tokenHits++;
    const who = this.identityOf(known);
    if (access === undefined) return this.pass(who);
    const decision = this.decisions.get(`${hash} ${accessKey(access)}`);
    if (decision === undefined) return this.slowCheck(token, hash, access);
    this.stats.accessHits++;
    return this.decide(who, access, decision);
  }

  private async slowCheck(token: string, hash: string, access: Access | undefined): Promise<Identity> {
    let who: Identity | undefined;
    if (!this.tokens.has(hash)) {
      try {
        checkTokenSyntax(token);
      } catch (err) {
        this.stats.unauthenticated++;
        throw err;
      }
    }
    try {
      who = this.identityOf(this.tokens.get(hash) ?? (await this.shared(`token ${hash}`, () => this.reviewToken(token, hash))));
      if (access === undefined) return this.pass(who);
      const key = `${hash} ${accessKey(access)}`;
      return this.decide(who, access, this.decisions.get(key) ?? (await this.shared(`access ${key}`, () => this.reviewAccess(who!, access, key))));
    } catch (err) {
      if (!(err instanceof ApiError) || (err.code !== 'auth_throttled' && err.code !== 'auth_unavailable')) throw err;
      if (err.code === 'auth_throttled') this.stats.throttled++;
      else this.stats.unavailable++;
      // An authenticated caller whose access could not be reviewed: the refusal names them.
      if (who === undefined) throw err;
      const named = new Refusal(err.code, err.message, who.user);
      named.headers = err.headers;
      throw named;
    }
  }

  private identityOf(entry: TokenEntry): Identity {
    if ('refused' in entry) {
      this.stats.unauthenticated++;
      throw unauthenticated(entry.refused, true);
    }
    return entry.identity;
  }

  private pass(who: Identity): Identity {
    this.stats.allowed++;
    return who;
  }

  private decide(who: Identity, access: Access, d: Decision): Identity {
    if (d.allowed) return this.pass(who);
    this.stats.denied++;
    throw new Refusal('permission_denied', refusal(who.user, access, d.reason), who.user);
  }

  /** The review under way for `key`, or a new one. */
  private shared<V>(key: string, review: () => Promise<V>): Promise<V> {
    let p = this.asking.get(key) as Promise<V> | undefined;
    if (p === undefined) {
      p = review().finally(() => this.asking.delete(key));
      this.asking.set(key, p);
    }
    return p;
  }

  /** Asks who holds a token, and remembers the answer. */
  private async reviewToken(token: string, hash: string): Promise<TokenEntry> {
    const verdict = await this.review('TokenReview', () => this.opts.reviewer.tokenReview(token, this.opts.audiences), (v) => (v.authenticated ? 'authenticated' : 'unauthenticated'));
    const { audiences } = this.opts;
    if (verdict.authenticated && (audiences.length === 0 || verdict.audiences.some((a) => audiences.includes(a)))) {
      const expiry = jwtExpiry(token);
      const left = expiry === undefined ? Infinity : expiry - this.wallClock();
      const entry = { identity: verdict.identity };
      if (left > 0) this.tokens.set(hash, entry, { ttl: Math.min(this.opts.allowTtlMs, left) });
      return entry;
    }
    const why = verdict.authenticated
      ? `it is not for this gateway's audiences (${audiences.join(', ')})`
      : 'it is expired, revoked, malformed, or for another audience';
    const entry = { refused: `the bearer token was not accepted by the cluster's TokenReview: ${why}` };
    this.tokens.set(hash, entry, { ttl: this.opts.denyTtlMs });
    return entry;
  }

  /** Asks whether the caller may do `access`, and remembers the answer. */
  private async reviewAccess(who: Identity, access: Access, key: string): Promise<Decision> {
    const verdict = await this.review('SubjectAccessReview', () => this.opts.reviewer.accessReview(who, access), (v) => (v.allowed ? 'allowed' : 'denied'));
    const decision: Decision = verdict.allowed ? { allowed: true } : { allowed: false, reason: verdict.reason };
    this.decisions.set(key, decision, { ttl: verdict.allowed ? this.opts.allowTtlMs : this.opts.denyTtlMs });
    return decision;
  }

  /** Runs one review within the budget; its failure refuses the calls waiting on it (503). */
  private async review<T>(kind: ReviewKind, ask: () => Promise<T>, outcome: (v: T) => ReviewOutcome): Promise<T> {
    if (!this.budget.take()) {
      const err = new ApiError('auth_throttled', `the gateway is sending as many reviews to the Kubernetes API as it may (AUTH_REVIEWS_PER_SECOND=${this.opts.reviewsPerSecond}) and this call needs a ${kind}; retry shortly`);
      err.headers = { 'Retry-After': '1' };
      throw err;
    }
    const start = this.now();
    try {
      const v = await ask();
      this.opts.onReview?.(kind, outcome(v), (this.now() - start) / 1000);
      return v;
    } catch (err) {
      this.opts.onReview?.(kind, 'error', (this.now() - start) / 1000);
      throw new ApiError('auth_unavailable', `cannot tell whether the caller may call: the ${kind} to the Kubernetes API failed (${describeApiError(err)}); the call is refused`);
    }
  }
}

/** A token bucket: `rate` reviews a second, up to twice as many in a burst. */
class ReviewBudget {
  private tokens: number;
  private last: number;
  private readonly burst: number;

  constructor(private readonly rate: number, private readonly now: () => number) {
    this.burst = 2 * rate;
    this.tokens = this.burst;
    this.last = now();
  }

  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.rate);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}
