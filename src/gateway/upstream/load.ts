// Load-aware picks for model servers that report their own load, as the Gateway API Inference
// Extension's endpoint picker does: each replica of a model that speaks the OpenAI API is asked for
// its Prometheus metrics every LOAD_SCRAPE_INTERVAL_MS (vLLM's `vllm:num_requests_waiting`,
// `vllm:num_requests_running` and `vllm:kv_cache_usage_perc`, or the older `vllm:gpu_cache_usage_perc`;
// llama.cpp's `llamacpp:requests_deferred`, `llamacpp:requests_processing` and
// `llamacpp:kv_cache_usage_ratio`), and a call goes to the replica with the least queued work and
// cache pressure. The calls this gateway sent a replica since its last report count as queued, so a
// burst between two reports does not all land on the replica that looked idle. When any candidate's
// report is missing or stale, the pick falls back to least-request (the balancer's). The replicas of
// a model none of whose replicas took a call for a minute are asked at a slow pace (its first call
// after such a pause is picked by least-request); so are replicas that answered no usable report
// three times in a row.
// Calls that carry their prompt's prefix keys (affinity.ts) go to the replica that holds the longest
// of them while it has room.
import { Agent, request } from 'undici';
import { PrefixIndex } from './affinity.js';
import { busyModels } from './balancer.js';

/** A replica, where it reports its load, and its model (whose replicas are asked at one pace). */
export interface LoadTarget {
  address: string;
  path: string;
  model: string;
}

/** What a replica reported. */
export interface Load {
  /** Calls queued in the server, not yet generating. */
  waiting: number;
  /** Calls generating. */
  running: number;
  /** Share of the KV cache in use, 0..1, when the server reports it. */
  kvCache: number | undefined;
}

interface Report extends Load {
  /** When it was read (monotonic ms). */
  at: number;
  /** The gateway's calls in flight on the replica when it was read. */
  outstandingThen: number;
}

/** The metric names each server family reports its load by. */
const WAITING = ['vllm:num_requests_waiting', 'llamacpp:requests_deferred'];
const RUNNING = ['vllm:num_requests_running', 'llamacpp:requests_processing'];
const KV_CACHE = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'llamacpp:kv_cache_usage_ratio'];

/**
 * The load in a Prometheus text exposition, undefined when it has no waiting and running counts.
 * Series of the same name (vLLM labels them by model and engine) are added up; the cache share is
 * the largest. Only the few lines that matter are read (vLLM's scrape is tens of kilobytes).
 */
export function parseLoad(text: string): Load | undefined {
  let waiting: number | undefined;
  let running: number | undefined;
  let kvCache: number | undefined;
  for (const name of [...WAITING, ...RUNNING, ...KV_CACHE]) {
    let from = 0;
    for (;;) {
      const i = text.indexOf(name, from);
      if (i < 0) break;
      from = i + name.length;
      if (i > 0 && text.charCodeAt(i - 1) !== 0x0a) continue;
      const next = text.charCodeAt(from);
      // The name whole (`{labels}` or a space after it), not a longer name it begins.
      if (next !== 0x7b && next !== 0x20) continue;
      const end = text.indexOf('\n', from);
      const line = text.slice(from, end < 0 ? text.length : end);
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (!Number.isFinite(value) || value < 0) continue;
      if (WAITING.includes(name)) waiting = (waiting ?? 0) + value;
      else if (RUNNING.includes(name)) running = (running ?? 0) + value;
      else kvCache = Math.max(kvCache ?? 0, Math.min(1, value));
    }
  }
  if (waiting === undefined || running === undefined) return undefined;
  return { waiting, running, kvCache };
}

/** How much a replica's KV cache share weighs against its queue (scaled to 0..1 over the candidates). */
const KV_CACHE_WEIGHT = 2;

/** A candidate of a load-aware pick. */
export interface Candidate {
  address: string;
  load: Load;
  /** Calls the gateway sent it since its report (not in the report yet). */
  sentSince: number;
}

/**
 * The replica to send a call to: the lowest sum of its queue (waiting plus the calls sent since its
 * report), scaled to the candidates' range, and twice its KV cache share (a nearly full cache will
 * queue or preempt the next call as surely as a queue); ties go to fewer running, then to the first
 * listed. Pure.
 */
export function pickByLoad(candidates: readonly Candidate[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const queue = candidates.map((c) => c.load.waiting + c.sentSince);
  const min = Math.min(...queue);
  const span = Math.max(...queue) - min || 1;
  let best = -1;
  let bestScore = Infinity;
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i];
    const score = (queue[i] - min) / span + KV_CACHE_WEIGHT * (c.load.kvCache ?? 0);
    if (score < bestScore || (score === bestScore && c.load.running < candidates[best].load.running)) {
      best = i;
      bestScore = score;
    }
  }
  return candidates[best].address;
}

export interface LoadOptions {
  /** How often a replica with calls lately is asked; 0 turns load-aware picks off. */
  intervalMs: number;
  /** A report older than this is stale: picks fall back to least-request. */
  staleMs: number;
  timeoutMs: number;
}

/** How often a replica without calls lately, or without a usable report, is asked. */
const SLOW_INTERVAL_MS = 10_000;
/** Reads in a row without a usable report before a replica is asked at the slow pace (one late answer on a busy machine is not a server without metrics). */
const FAILURES_BEFORE_SLOW = 3;
/** The replicas of a model that took a call this recently are asked at the fast pace. */
const BUSY_WITHIN_MS = 60_000;

/** Reads one replica's metrics text; undefined when it did not answer 200 in time. */
export type Scrape = (target: LoadTarget, timeoutMs: number) => Promise<string | undefined>;

/** What the scraper needs of the balancer: its calls in flight per replica, and when a replica last took one. */
export interface Outstanding {
  outstanding(address: string): number;
  lastUsed(address: string): number;
}

export interface LoadStats {
  /** Picks made from fresh reports by queue and cache. */
  loadPicksTotal: number;
  /** Picks that fell back to least-request (a candidate without a fresh report). */
  fallbackPicksTotal: number;
  /** Picks made from fresh reports that went to the replica holding the call's prompt prefix. */
  prefixPicksTotal: number;
  /** Reads that gave a usable report. */
  reportsTotal: number;
  scrapesFailedTotal: number;
}

interface Scraped {
  path: string;
  report: Report | undefined;
  lastAt: number;
  scraping: boolean;
  /** Reads in a row that gave no usable report: FAILURES_BEFORE_SLOW of them, and it is asked at the slow pace. */
  failures: number;
}

export class LoadScraper {
  private readonly scraped = new Map<string, Scraped>();
  private lastTargets: readonly LoadTarget[] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly agent: Agent | undefined;
  private readonly scrape: Scrape;
  readonly stats: LoadStats = { loadPicksTotal: 0, fallbackPicksTotal: 0, prefixPicksTotal: 0, reportsTotal: 0, scrapesFailedTotal: 0 };
  /** Made on the first call that carries prefix keys: its LRU allocates its whole capacity up front (about 2 MB). */
  private prefixes: PrefixIndex | undefined;

  constructor(
    private readonly targets: () => readonly LoadTarget[],
    private readonly balancer: Outstanding,
    private readonly opts: LoadOptions,
    private readonly now: () => number = () => performance.now(),
    scrape?: Scrape,
  ) {
    if (scrape) this.scrape = scrape;
    else {
      const agent = new Agent({ connections: 1, pipelining: 1, connect: { timeout: opts.timeoutMs } });
      this.agent = agent;
      this.scrape = (t, timeoutMs) => scrapeWith(agent, t, timeoutMs);
    }
  }

  start(): void {
    if (this.timer || this.opts.intervalMs <= 0) return;
    this.timer = setInterval(() => this.tick(), Math.max(10, Math.floor(this.opts.intervalMs / 2)));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.agent?.destroy().catch(() => undefined);
  }

  /** Starts the scrapes that are due; forgets replicas no model has any more. */
  tick(): void {
    const now = this.now();
    const targets = this.targets();
    if (targets !== this.lastTargets) {
      const listed = new Set(targets.map((t) => t.address));
      for (const a of this.scraped.keys()) if (!listed.has(a)) this.scraped.delete(a);
      this.lastTargets = targets;
    }
    const busy = busyModels(targets, (a) => this.balancer.lastUsed(a), now, BUSY_WITHIN_MS);
    for (const target of targets) {
      let s = this.scraped.get(target.address);
      if (!s || s.path !== target.path) {
        s = { path: target.path, report: undefined, lastAt: -Infinity, scraping: false, failures: 0 };
        this.scraped.set(target.address, s);
      }
      if (s.scraping) continue;
      if (now - s.lastAt < (busy.has(target.model) && s.failures < FAILURES_BEFORE_SLOW ? this.opts.intervalMs : SLOW_INTERVAL_MS)) continue;
      s.lastAt = now;
      s.scraping = true;
      const outstandingThen = this.balancer.outstanding(target.address);
      const entry = s;
      void this.scrape(target, this.opts.timeoutMs).then((text) => {
        entry.scraping = false;
        const load = text === undefined ? undefined : parseLoad(text);
        entry.failures = load === undefined ? entry.failures + 1 : 0;
        if (!load) return void this.stats.scrapesFailedTotal++;
        entry.report = { ...load, at: this.now(), outstandingThen };
        this.stats.reportsTotal++;
      });
    }
  }

  /**
   * The load-aware pick among `addresses` (those the balancer has in rotation), or undefined when
   * any of them has no fresh report: the caller then picks by least-request. With a prompt's
   * `prefix` keys, the holder of its longest known prefix when it has room; the replica picked
   * holds the prefix from then on.
   */
  pick(addresses: readonly string[], inRotation: (address: string) => boolean, prefix: readonly string[] = []): string | undefined {
    const now = this.now();
    const candidates: Candidate[] = [];
    for (const address of addresses) {
      if (!inRotation(address)) continue;
      const report = this.scraped.get(address)?.report;
      if (!report || now - report.at > this.opts.staleMs) {
        this.stats.fallbackPicksTotal++;
        return undefined;
      }
      candidates.push({ address, load: report, sentSince: Math.max(0, this.balancer.outstanding(address) - report.outstandingThen) });
    }
    const prefixes = prefix.length > 0 ? (this.prefixes ??= new PrefixIndex()) : undefined;
    const held = prefixes?.preferred(prefix, candidates.map((c) => ({ address: c.address, queue: c.load.waiting + c.sentSince, kvCache: c.load.kvCache })));
    const picked = held ?? pickByLoad(candidates);
    if (picked === undefined) return undefined;
    if (held !== undefined) this.stats.prefixPicksTotal++;
    else this.stats.loadPicksTotal++;
    prefixes?.record(prefix, picked);
    return picked;
  }
}

async function scrapeWith(agent: Agent, target: LoadTarget, timeoutMs: number): Promise<string | undefined> {
  try {
    const res = await request(target.address + target.path, { dispatcher: agent, method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return undefined;
    }
    return await res.body.text();
  } catch {
    return undefined;
  }
}
