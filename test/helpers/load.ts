// A steady stream of prediction calls, the way a real client sends them: a fixed number of calls in
// flight at once, each worker sending its next call as soon as the last one is over, on keep-alive
// connections (an undici Pool of as many connections as workers). Every call is recorded (its
// start, its end, its HTTP status or transport error, the deployed model that answered), nothing is
// sampled, so a report counts every failed call by kind and gives the latencies of all of them.
// The node suite (test/node/load.test.ts) and `npm run bench:rollout` drive their changes with it.
import { Pool } from 'undici';

export interface LoadOptions {
  /** Origin of the gateway, e.g. http://10.213.0.2:30080. */
  origin: string;
  /** Path of the prediction call. */
  path: string;
  /** JSON body of every call. */
  body: string;
  /** Calls in flight at once (and keep-alive connections). */
  concurrency: number;
  /** The client's own deadline per call, in ms: past it the call counts as failed (default 60 s). */
  timeoutMs?: number;
  /** Stop after this many calls have been started. */
  maxCalls?: number;
  /** Headers of every call besides its content type (the caller's Authorization). */
  headers?: Record<string, string>;
}

/** One call as the client saw it; times in ms on the driver's clock (performance.now()). */
export interface CallRecord {
  start: number;
  end: number;
  /** The HTTP status, or 0 when the call failed without one (a transport error). */
  status: number;
  /** What failed: `HTTP 503 UNAVAILABLE`, `ECONNRESET`, ... (undefined for a 2xx). */
  kind?: string;
  /** The first part of the error body or message, for the report. */
  detail?: string;
  /** The deployedModelId of a 2xx answer. */
  model?: string;
}

export interface FailureKind {
  kind: string;
  count: number;
  /** One call's error body or message. */
  sample: string;
}

export interface LoadReport {
  concurrency: number;
  /** From the first call's start to the last call's end, in seconds. */
  seconds: number;
  total: number;
  ok: number;
  failed: number;
  callsPerSecond: number;
  /** Failed calls by kind, most frequent first. */
  failures: FailureKind[];
  p50Ms: number;
  p99Ms: number;
  /** 2xx answers by deployedModelId. */
  byModel: Record<string, number>;
  calls: readonly CallRecord[];
}

const DETAIL_CHARS = 200;

/** The `q` quantile (0..1) of `sorted` (ascending), nearest rank; NaN when empty. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** The nearest-rank percentile `q` (0..1) of `xs` in any order (a sorted copy's quantile). */
export function percentile(xs: readonly number[], q: number): number {
  return quantile([...xs].sort((a, b) => a - b), q);
}

/** Failed calls of `calls` by kind, most frequent first. */
export function failureKinds(calls: readonly CallRecord[]): FailureKind[] {
  const kinds = new Map<string, FailureKind>();
  for (const c of calls) {
    if (c.kind === undefined) continue;
    const k = kinds.get(c.kind);
    if (k) k.count++;
    else kinds.set(c.kind, { kind: c.kind, count: 1, sample: c.detail ?? '' });
  }
  return [...kinds.values()].sort((a, b) => b.count - a.count || a.kind.localeCompare(b.kind));
}

/** The report of `calls`, made with `concurrency` workers. */
export function reportOf(calls: readonly CallRecord[], concurrency: number): LoadReport {
  const durations = Float64Array.from(calls, (c) => c.end - c.start).sort();
  const first = calls.reduce((m, c) => Math.min(m, c.start), Infinity);
  const last = calls.reduce((m, c) => Math.max(m, c.end), -Infinity);
  const seconds = calls.length ? (last - first) / 1000 : 0;
  const ok = calls.filter((c) => c.kind === undefined).length;
  const byModel: Record<string, number> = {};
  for (const c of calls) if (c.model !== undefined) byModel[c.model] = (byModel[c.model] ?? 0) + 1;
  return {
    concurrency,
    seconds,
    total: calls.length,
    ok,
    failed: calls.length - ok,
    callsPerSecond: seconds > 0 ? calls.length / seconds : 0,
    failures: failureKinds(calls),
    p50Ms: quantile(durations, 0.5),
    p99Ms: quantile(durations, 0.99),
    byModel,
    calls,
  };
}

/** What an error body says in a few words: google.rpc.Status's status, or the GDC form's message. */
function errorName(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: unknown }).error;
    if (typeof e === 'object' && e !== null && typeof (e as { status?: unknown }).status === 'string') return (e as { status: string }).status;
  } catch {
    // Not JSON: the status code alone names it.
  }
  return '';
}

function transportKind(err: unknown): { kind: string; detail: string } {
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const code = typeof e.code === 'string' ? e.code : typeof e.cause?.code === 'string' ? e.cause.code : typeof e.name === 'string' ? e.name : 'Error';
  const message = typeof e.message === 'string' ? e.message : String(err);
  return { kind: code, detail: message.slice(0, DETAIL_CHARS) };
}

export class LoadDriver {
  private readonly pool: Pool;
  private readonly records: CallRecord[] = [];
  /** The start of each call in flight, by call number. */
  private readonly inFlight = new Map<number, number>();
  private stopping = false;
  private started = 0;
  private workers: Promise<void>[] = [];
  private waiters: { check: () => boolean; resolve: () => void }[] = [];

  constructor(private readonly opts: LoadOptions) {
    this.pool = new Pool(opts.origin, { connections: opts.concurrency, pipelining: 1 });
  }

  /** The driver's clock (ms): what CallRecord times are on. */
  now(): number {
    return performance.now();
  }

  /** Starts the workers. */
  start(): void {
    this.workers = Array.from({ length: this.opts.concurrency }, () => this.worker());
  }

  /** Calls over so far. */
  get calls(): readonly CallRecord[] {
    return this.records;
  }

  /** Whether a call started at or before `t` is still in flight. */
  inFlightSince(t: number): boolean {
    for (const start of this.inFlight.values()) if (start <= t) return true;
    return false;
  }

  /** Resolves once `check` holds (checked after every call), or rejects after `timeoutMs`. */
  until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        const report = reportOf(this.records, this.opts.concurrency);
        reject(new Error(`${what}: not within ${timeoutMs / 1000} s (${report.total} calls, ${report.failed} failed: ${JSON.stringify(report.failures)})`));
      }, timeoutMs);
      const waiter = { check, resolve: () => { clearTimeout(timer); resolve(); } };
      this.waiters.push(waiter);
    });
  }

  /** Resolves once `n` more calls than now have ended, all of them answered 2xx (consecutive successes, in the order they ended). */
  succeeded(n: number, timeoutMs: number, what = `${n} calls in a row answered`): Promise<void> {
    const from = this.records.length;
    let run = 0;
    let seen = from;
    return this.until(what, () => {
      for (; seen < this.records.length; seen++) run = this.records[seen].kind === undefined ? run + 1 : 0;
      return run >= n;
    }, timeoutMs);
  }

  /** Stops sending, waits for the calls in flight, closes the connections; the report of every call. */
  stop(): Promise<LoadReport> {
    this.stopping = true;
    return this.finished();
  }

  /** Waits until the workers are done (after maxCalls, or once stopped), closes the connections; the report of every call. */
  async finished(): Promise<LoadReport> {
    await Promise.all(this.workers);
    await this.pool.close();
    return reportOf(this.records, this.opts.concurrency);
  }

  private async worker(): Promise<void> {
    const { path, body, timeoutMs = 60_000, maxCalls } = this.opts;
    const headers = { ...this.opts.headers, 'content-type': 'application/json' };
    while (!this.stopping && (maxCalls === undefined || this.started < maxCalls)) {
      const id = this.started++;
      const start = this.now();
      this.inFlight.set(id, start);
      let record: CallRecord;
      try {
        const res = await this.pool.request({ path, method: 'POST', headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
        const text = await res.body.text();
        const end = this.now();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          let model: string | undefined;
          try {
            model = (JSON.parse(text) as { deployedModelId?: string }).deployedModelId;
          } catch {
            // A 2xx that is not JSON still counts as answered; no model to note.
          }
          record = { start, end, status: res.statusCode, model };
        } else {
          const name = errorName(text);
          record = { start, end, status: res.statusCode, kind: `HTTP ${res.statusCode}${name ? ` ${name}` : ''}`, detail: text.slice(0, DETAIL_CHARS) };
        }
      } catch (err) {
        record = { start, end: this.now(), status: 0, ...transportKind(err) };
      }
      this.inFlight.delete(id);
      this.records.push(record);
      this.notify();
    }
  }

  private notify(): void {
    if (this.waiters.length === 0) return;
    for (const w of [...this.waiters]) {
      if (w.check()) {
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve();
      }
    }
  }
}
