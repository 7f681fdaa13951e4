// Sends a stretch of the hostile corpus to a gateway and checks every answer (check.ts): a fixed
// number of calls in flight on as many keep-alive connections (an undici Pool), each worker taking
// the next body as soon as its last answer is read. Counts bodies by family and by status, and keeps
// every violation with its seed and index so it can be made again (hostileCase) and replayed.
import { Readable } from 'node:stream';
import { Pool } from 'undici';
import { hostileCase, type HostileCase } from './corpus.js';
import { answerProblems, type Answer } from './check.js';
import { MAX_REQUEST_BYTES } from './targets.js';

export interface Violation {
  seed: number;
  index: number;
  family: string;
  target: string;
  status: number;
  problems: string[];
  /** The start of the answer (or the transport error). */
  answer: string;
  /** The start of the body sent. */
  sent: string;
}

export interface FamilyCounts {
  bodies: number;
  /** Answers by HTTP status (0: no answer). */
  statuses: Record<number, number>;
}

export interface RunRecord {
  bodies: number;
  byFamily: Record<string, FamilyCounts>;
  byStatus: Record<number, number>;
  /** Answers of 500 or more. */
  serverErrors: number;
  /** Non-2xx answers without a JSON body of the route's dialect (or without a JSON Content-Type). */
  nonJsonErrors: number;
  /** 2xx answers that are not JSON of the route's shape. */
  badSuccesses: number;
  /** Calls that got no answer at all (a transport error). */
  noAnswer: number;
  /**
   * Of those, calls whose body was over MAX_REQUEST_BYTES: the gateway answers 413 (at once for a
   * Content-Length, at the limit for a chunked body) and closes the connection without reading the
   * rest, and a client still writing it can see the reset before the answer. Counted apart; not a
   * violation (a lingering close on a 413 is another change).
   */
  refusedUnread: number;
  violations: Violation[];
  ms: number;
}

export function emptyRecord(): RunRecord {
  return { bodies: 0, byFamily: {}, byStatus: {}, serverErrors: 0, nonJsonErrors: 0, badSuccesses: 0, noAnswer: 0, refusedUnread: 0, violations: [], ms: 0 };
}

/** Adds one record's counts into another. */
export function addRecord(into: RunRecord, r: RunRecord): void {
  into.bodies += r.bodies;
  into.serverErrors += r.serverErrors;
  into.nonJsonErrors += r.nonJsonErrors;
  into.badSuccesses += r.badSuccesses;
  into.noAnswer += r.noAnswer;
  into.refusedUnread += r.refusedUnread;
  into.ms += r.ms;
  into.violations.push(...r.violations);
  for (const [s, n] of Object.entries(r.byStatus)) into.byStatus[Number(s)] = (into.byStatus[Number(s)] ?? 0) + n;
  for (const [f, c] of Object.entries(r.byFamily)) {
    const to = (into.byFamily[f] ??= { bodies: 0, statuses: {} });
    to.bodies += c.bodies;
    for (const [s, n] of Object.entries(c.statuses)) to.statuses[Number(s)] = (to.statuses[Number(s)] ?? 0) + n;
  }
}

const preview = (b: Buffer): string => {
  const text = b.subarray(0, 160).toString('utf8');
  return b.length > 160 ? `${text}… (${b.length} bytes)` : text;
};

/** Sends one case; resolves with its answer, or with status 0 and the error for a transport failure. */
export async function send(pool: Pool, c: HostileCase, timeoutMs = 30_000): Promise<Answer & { error?: string }> {
  const chunks = c.chunks;
  try {
    const res = await pool.request({
      path: c.target.path,
      method: 'POST',
      headers: c.headers,
      body: chunks ? Readable.from(chunks, { objectMode: false }) : c.body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: res.headers, body };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { status: 0, headers: {}, body: Buffer.alloc(0), error: `${e.code ?? 'error'}: ${e.message ?? String(err)}` };
  }
}

export interface RunOptions {
  base: string;
  seed: number;
  /** Indexes [from, to) of the corpus. */
  from: number;
  to: number;
  concurrency: number;
  /** Families to draw from (default: all). */
  families?: readonly string[];
  /** Called after each answer, with how many are done. */
  progress?(done: number): void;
}

/** Sends bodies [from, to) of corpus `seed` and checks each answer. */
export async function runCorpus(opts: RunOptions): Promise<RunRecord> {
  const rec = emptyRecord();
  const pool = new Pool(opts.base, { connections: opts.concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
  const started = performance.now();
  let next = opts.from;
  const worker = async (): Promise<void> => {
    while (next < opts.to) {
      const c = hostileCase(opts.seed, next++, opts.families);
      const a = await send(pool, c);
      record(rec, c, a);
      opts.progress?.(rec.bodies);
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
  } finally {
    await pool.close();
  }
  rec.ms = performance.now() - started;
  return rec;
}

/** Counts one answer and keeps it when something is wrong with it. */
export function record(rec: RunRecord, c: HostileCase, a: Answer & { error?: string }): void {
  rec.bodies++;
  rec.byStatus[a.status] = (rec.byStatus[a.status] ?? 0) + 1;
  const fam = (rec.byFamily[c.family] ??= { bodies: 0, statuses: {} });
  fam.bodies++;
  fam.statuses[a.status] = (fam.statuses[a.status] ?? 0) + 1;
  const problems = a.status === 0 ? [`no answer (${a.error ?? 'unknown'})`] : answerProblems(c, a);
  if (problems.length === 0) return;
  if (a.status === 0) rec.noAnswer++;
  if (a.status === 0 && c.body.length > MAX_REQUEST_BYTES) {
    rec.refusedUnread++;
    return;
  }
  if (a.status >= 500) rec.serverErrors++;
  const ok = a.status >= 200 && a.status < 300;
  if (a.status > 0 && problems.some((p) => !p.startsWith('HTTP '))) {
    if (ok) rec.badSuccesses++;
    else rec.nonJsonErrors++;
  }
  rec.violations.push({ seed: c.seed, index: c.index, family: c.family, target: c.target.name, status: a.status, problems, answer: a.error ?? preview(a.body), sent: preview(c.body) });
}
