// The load generator of `npm run bench:llm`, run as its own process (pinned by the bench): streamed
// chat/completions calls over node:http keep-alive agents, each answer read as server-sent events
// and every event stamped with process.hrtime.bigint() as its bytes arrive. Modes:
//  - latency: `concurrency` streams one after another each until `durationS` has passed: time to
//    the first token event (from the request's end) and the gaps between token events;
//  - hold: `concurrency` streams opened at `rampPerSecond`, held open; once every one has its first
//    token (or `firstTokenTimeoutMs` passed), a window of `holdS` in which the events that arrive
//    and the CPU time and RSS of the watched processes (procfs.ts) are counted; then all closed;
//  - abort: `concurrency` streams one after another; each is destroyed (its socket closed) after
//    `abortAfterTokens` token events, and the moment of the destroy is kept under the stream's
//    X-Request-Id, for the bench to compare with the moment the model saw its answer close;
//  - open: an open loop: `rate` calls a second for `durationS`, each sent on its schedule whatever
//    came of the earlier ones (time to first token of each); optionally a `background` open loop to
//    another URL, started `leadS` before and kept on until every measured call has ended, then closed.
// Every stream that ends otherwise than asked (not 200, an error, cut short) counts as an error,
// with the first few reasons kept. Config: the JSON in LLM_LOAD_CONFIG; result: JSON written to its `out`.

import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { cpuUsSum, hwmKb, resetHwm, rssKb } from './procfs.js';

export interface LoadConfig {
  mode: 'latency' | 'hold' | 'abort' | 'open';
  url: string;
  /** The request body (stream: true). */
  body: string;
  concurrency: number;
  /** latency, abort: how long new streams are started. */
  durationS: number;
  /** Local addresses the connections come from, in turn (default: the kernel's choice, 127.0.0.1). */
  sources?: string[];
  /** hold */
  rampPerSecond?: number;
  firstTokenTimeoutMs?: number;
  holdS?: number;
  /** hold: processes whose CPU and RSS the window measures, by group (e.g. the proxy). */
  watch?: { name: string; pids: number[] }[];
  /** abort */
  abortAfterTokens?: number;
  idPrefix?: string;
  /** open: calls a second (durationS × rate calls in all). */
  rate?: number;
  /** open: how long the calls may go on after the last was sent; those still open then are closed, as errors. */
  drainS?: number;
  /** open: calls to another URL at their own rate, from `leadS` before the measured ones until they have all ended. */
  background?: { url: string; rate: number; leadS: number };
  out: string;
}

export interface WatchResult {
  name: string;
  cpuUs: number;
  /** RSS before any stream opened, the peak (VmHWM since then, and sampled), and at the window's end. */
  idleRssKb: number;
  peakRssKb: number;
  endRssKb: number;
}

export interface LoadResult {
  mode: LoadConfig['mode'];
  streams: number;
  completed: number;
  errors: number;
  errorSamples: string[];
  /** ms from the request sent to the first token event. */
  ttftMs: number[];
  /** ms between consecutive token events of a stream. */
  gapMs: number[];
  /** hold: streams with their first token at the window's start, events in the window, its length. */
  held?: number;
  windowEvents?: number;
  windowS?: number;
  watch?: WatchResult[];
  /** abort: X-Request-Id → hrtime (ns, as a string) of the socket's destroy. */
  destroyedAt?: Record<string, string>;
  /** open: the latest a call went out after its time on the schedule, ms. */
  maxLateMs?: number;
  /** open: the background calls (streams closed at the end count neither as completed nor as errors). */
  background?: LoadResult;
}

const cfg = (): LoadConfig => JSON.parse(process.env.LLM_LOAD_CONFIG ?? '{}') as LoadConfig;
const nowNs = (): bigint => process.hrtime.bigint();
const ms = (a: bigint, b: bigint): number => Number(b - a) / 1e6;

/** What one streamed event was: a token (delta.content or text not empty), the end ([DONE]), or other. */
function eventKind(event: string): 'token' | 'done' | 'other' {
  for (const line of event.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') return 'done';
    try {
      const doc = JSON.parse(data) as { choices?: { delta?: { content?: unknown }; text?: unknown }[]; error?: unknown };
      if (doc.error !== undefined) return 'other';
      const c = doc.choices?.[0];
      const text = c?.delta?.content ?? c?.text;
      return typeof text === 'string' && text !== '' ? 'token' : 'other';
    } catch {
      return 'other';
    }
  }
  return 'other';
}

interface StreamHooks {
  /** Each token event, with the time its bytes arrived. */
  onToken?(at: bigint, n: number): void;
  /** Every event (tokens and others). */
  onEvent?(): void;
}

interface Stream {
  req: http.ClientRequest;
  sentAt: bigint;
  /** Resolves with null when the answer ended with [DONE] (or was destroyed on purpose), else the reason. */
  done: Promise<string | null>;
  destroy(): void;
}

class Client {
  private readonly agents: http.Agent[];
  private next = 0;
  private readonly target: URL;

  constructor(private readonly c: LoadConfig) {
    this.target = new URL(c.url);
    const sources = c.sources && c.sources.length > 0 ? c.sources : [undefined];
    this.agents = sources.map((localAddress) => new http.Agent({ keepAlive: true, maxSockets: Infinity, localAddress }));
  }

  open(hooks: StreamHooks, headers: Record<string, string> = {}): Stream {
    const agent = this.agents[this.next++ % this.agents.length];
    let destroyed = false;
    let settle: (r: string | null) => void = () => undefined;
    const done = new Promise<string | null>((resolve) => {
      settle = resolve;
    });
    const req = http.request({
      host: this.target.hostname,
      port: this.target.port,
      path: `${this.target.pathname}${this.target.search}`,
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(this.c.body), ...headers },
    });
    req.on('error', (err) => settle(destroyed ? null : `request error: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        const parts: Buffer[] = [];
        res.on('data', (b: Buffer) => parts.push(b));
        res.on('end', () => settle(`HTTP ${res.statusCode}: ${Buffer.concat(parts).toString('utf8', 0, 240)}`));
        res.on('error', () => settle(`HTTP ${res.statusCode}`));
        return;
      }
      let buf = '';
      let tokens = 0;
      let sawDone = false;
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        const at = nowNs();
        buf += text;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          hooks.onEvent?.();
          const kind = eventKind(event);
          if (kind === 'token') hooks.onToken?.(at, ++tokens);
          else if (kind === 'done') sawDone = true;
          else if (event.includes('event: error')) settle(`error event: ${event.slice(0, 240)}`);
        }
      });
      res.on('end', () => settle(sawDone ? null : `the stream ended without [DONE] after ${tokens} tokens`));
      res.on('aborted', () => settle(destroyed ? null : `the stream was cut after ${tokens} tokens`));
      res.on('error', (err) => settle(destroyed ? null : `answer error after ${tokens} tokens: ${err.message}`));
      res.on('close', () => settle(destroyed || sawDone ? null : `the connection closed after ${tokens} tokens`));
    });
    const sentAt = nowNs();
    req.end(this.c.body);
    return {
      req,
      sentAt,
      done,
      destroy: () => {
        destroyed = true;
        req.destroy();
        settle(null);
      },
    };
  }
}

function newResult(mode: LoadConfig['mode']): LoadResult {
  return { mode, streams: 0, completed: 0, errors: 0, errorSamples: [], ttftMs: [], gapMs: [] };
}

function fail(r: LoadResult, reason: string): void {
  r.errors++;
  if (r.errorSamples.length < 8 && !r.errorSamples.includes(reason)) r.errorSamples.push(reason);
}

async function latency(c: LoadConfig, client: Client): Promise<LoadResult> {
  const r = newResult('latency');
  const end = Date.now() + c.durationS * 1000;
  const worker = async (): Promise<void> => {
    while (Date.now() < end) {
      let last = 0n;
      let sentAt = 0n;
      const s = client.open({
        onToken: (at, n) => {
          if (n === 1) r.ttftMs.push(ms(sentAt, at));
          else r.gapMs.push(ms(last, at));
          last = at;
        },
      });
      sentAt = s.sentAt;
      r.streams++;
      const problem = await s.done;
      if (problem === null) r.completed++;
      else fail(r, problem);
    }
  };
  await Promise.all(Array.from({ length: c.concurrency }, () => worker()));
  return r;
}

const sleep = (msec: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, msec));

async function hold(c: LoadConfig, client: Client): Promise<LoadResult> {
  const r = newResult('hold');
  const watch = c.watch ?? [];
  const idle = watch.map((w) => w.pids.reduce((n, p) => n + (rssKb(p) || 0), 0));
  for (const w of watch) for (const p of w.pids) resetHwm(p);
  const peak = [...idle];
  const sample = (): number[] =>
    watch.map((w, i) => {
      const now = w.pids.reduce((n, p) => n + (rssKb(p) || 0), 0);
      peak[i] = Math.max(peak[i], now);
      return now;
    });
  const sampler = setInterval(sample, 250);
  let windowOpen = false;
  let windowEvents = 0;
  const streams: Stream[] = [];
  const ended: (string | null)[] = [];
  const perMs = 1000 / (c.rampPerSecond ?? 500);
  const t0 = Date.now();
  const seen: boolean[] = [];
  for (let i = 0; i < c.concurrency; i++) {
    const due = t0 + i * perMs;
    if (due > Date.now()) await sleep(due - Date.now());
    let sentAt = 0n;
    const s = client.open({
      onToken: (at, n) => {
        if (n === 1 && !seen[i]) {
          seen[i] = true;
          r.ttftMs.push(ms(sentAt, at));
        }
      },
      onEvent: () => {
        if (windowOpen) windowEvents++;
      },
    });
    sentAt = s.sentAt;
    streams.push(s);
    r.streams++;
    void s.done.then((p) => {
      ended[i] = p;
    });
  }
  const deadline = Date.now() + (c.firstTokenTimeoutMs ?? 15_000);
  const settled = (): number => streams.filter((_, i) => seen[i] || ended[i] !== undefined).length;
  while (settled() < c.concurrency && Date.now() < deadline) await sleep(50);
  r.held = streams.filter((_, i) => seen[i] && ended[i] === undefined).length;
  const cpu0 = watch.map((w) => cpuUsSum(w.pids));
  windowOpen = true;
  const w0 = nowNs();
  await sleep((c.holdS ?? 15) * 1000);
  windowOpen = false;
  r.windowS = ms(w0, nowNs()) / 1000;
  const cpu1 = watch.map((w) => cpuUsSum(w.pids));
  r.windowEvents = windowEvents;
  const endRss = sample();
  clearInterval(sampler);
  r.watch = watch.map((w, i) => ({
    name: w.name,
    cpuUs: cpu1[i] - cpu0[i],
    idleRssKb: idle[i],
    peakRssKb: Math.max(peak[i], w.pids.reduce((n, p) => n + (hwmKb(p) || 0), 0)),
    endRssKb: endRss[i],
  }));
  // Streams that ended before the window closed are errors; so are streams still without a token.
  let silent = 0;
  streams.forEach((_, i) => {
    if (ended[i] !== undefined) fail(r, ended[i] ?? 'the stream finished while it should have been held');
    else if (!seen[i]) silent++;
  });
  if (silent > 0) {
    r.errors += silent;
    r.errorSamples.push(`${silent} streams open without a token ${(c.firstTokenTimeoutMs ?? 15_000) / 1000} s after the last was opened (no answer yet, or headers only)`);
  }
  for (const s of streams) s.destroy();
  r.completed = r.held;
  return r;
}

async function abort(c: LoadConfig, client: Client): Promise<LoadResult> {
  const r = newResult('abort');
  const destroyedAt: Record<string, string> = {};
  const end = Date.now() + c.durationS * 1000;
  const after = c.abortAfterTokens ?? 2;
  let n = 0;
  const worker = async (): Promise<void> => {
    while (Date.now() < end) {
      const id = `${c.idPrefix ?? 'abort'}-${n++}`;
      let s: Stream | undefined;
      let cut = false;
      s = client.open(
        {
          onToken: (_, k) => {
            if (k !== after || cut) return;
            cut = true;
            const at = nowNs();
            s?.destroy();
            destroyedAt[id] = at.toString();
          },
        },
        { 'x-request-id': id },
      );
      r.streams++;
      const problem = await s.done;
      if (problem !== null) fail(r, problem);
      else if (!cut) fail(r, `the stream finished before ${after} tokens`);
      else r.completed++;
    }
  };
  await Promise.all(Array.from({ length: c.concurrency }, () => worker()));
  r.destroyedAt = destroyedAt;
  return r;
}

/**
 * Calls `fire()` at `start + i × 1000 / rate` ms on `clock` for i = 0, 1, ... while `more(i)` (asked
 * before and after each wait), a late call at once; the schedule never waits for an answer.
 */
export async function openLoop(rate: number, more: (i: number) => boolean, fire: () => void, clock: () => number = () => performance.now()): Promise<{ sent: number; maxLateMs: number }> {
  const start = clock();
  let maxLateMs = 0;
  let i = 0;
  for (; more(i); i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - clock();
    if (wait > 0) await sleep(wait);
    if (!more(i)) break;
    maxLateMs = Math.max(maxLateMs, clock() - due);
    fire();
  }
  return { sent: i, maxLateMs };
}

/** The calls of one open loop, each measured: TTFT, completed or failed; those still open can be closed. */
class OpenCalls {
  readonly r: LoadResult = newResult('open');
  private readonly live = new Set<Stream>();
  private readonly ended: Promise<void>[] = [];

  constructor(private readonly client: Client) {}

  fire(): void {
    let sentAt = 0n;
    const s = this.client.open({
      onToken: (at, n) => {
        if (n === 1) this.r.ttftMs.push(ms(sentAt, at));
      },
    });
    sentAt = s.sentAt;
    this.r.streams++;
    this.live.add(s);
    this.ended.push(s.done.then((problem) => {
      if (!this.live.delete(s)) return; // closed by closeAll, counted there
      if (problem === null) this.r.completed++;
      else fail(this.r, problem);
    }));
  }

  /** Resolves when every call sent so far has ended, or after `maxMs`. */
  async settle(maxMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.ended), new Promise((resolve) => (timer = setTimeout(resolve, maxMs)))]);
    clearTimeout(timer);
  }

  /** Closes the calls still open; each counts as an error when `reason` is given. */
  closeAll(reason?: string): void {
    const open = [...this.live];
    this.live.clear();
    for (const s of open) {
      if (reason !== undefined) fail(this.r, reason);
      s.destroy();
    }
  }
}

async function openMode(c: LoadConfig, client: Client): Promise<LoadResult> {
  const rate = c.rate ?? 1;
  const count = Math.round(rate * c.durationS);
  let measuring = true;
  const bg = c.background ? new OpenCalls(new Client({ ...c, url: c.background.url })) : undefined;
  const bgLoop = bg && c.background ? openLoop(c.background.rate, () => measuring, () => bg.fire()) : undefined;
  if (c.background) await sleep(c.background.leadS * 1000);
  const calls = new OpenCalls(client);
  const w0 = nowNs();
  let last = w0;
  const loop = await openLoop(rate, (i) => i < count, () => {
    calls.fire();
    last = nowNs();
  });
  // The send window: first call to last, plus one interval (the last call's share of it).
  calls.r.windowS = ms(w0, last) / 1000 + 1 / rate;
  calls.r.maxLateMs = loop.maxLateMs;
  const drainS = c.drainS ?? 30;
  await calls.settle(drainS * 1000);
  calls.closeAll(`no end ${drainS} s after the last call was sent`);
  measuring = false;
  await bgLoop;
  bg?.closeAll();
  if (bg) calls.r.background = bg.r;
  return calls.r;
}

async function main(): Promise<void> {
  const c = cfg();
  const client = new Client(c);
  const run = { latency, hold, abort, open: openMode }[c.mode];
  const result = await run(c, client);
  fs.writeFileSync(c.out, JSON.stringify(result));
  process.exit(0);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`llmLoad: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  });
}
