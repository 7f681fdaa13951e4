// The hostile corpus run as markdown: the summary (bodies, time, crashes, 5xx, non-JSON errors, the
// gateway's heap and resident set before and after), the bodies and answers of each family, and the
// violations (seed and index first, so each can be replayed).
import type { RunRecord } from './runner.js';
import type { Settled } from './gateway.js';

export interface HostileRun {
  seed: number;
  concurrency: number;
  record: RunRecord;
  warmupBodies: number;
  before: Settled;
  after: Settled;
  /** Whether the gateway process was alive at the end, as the one that started. */
  alive: boolean;
  modelRestarts: string[];
}

const mb = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MB`;
const pct = (after: number, before: number): string => `${after >= before ? '+' : ''}${(((after - before) / before) * 100).toFixed(1)} %`;

/** The heap (its old generation, after a full collection) after the run as a share of the one before it (1.0: the same). */
export function heapRatio(run: Pick<HostileRun, 'before' | 'after'>): number {
  return run.after.oldBytes / run.before.oldBytes;
}

export function summaryTable(run: HostileRun): string {
  const r = run.record;
  const rows: [string, string][] = [
    ['bodies sent (warm-up included)', `${r.bodies} (${run.warmupBodies})`],
    ['time, rate', `${(r.ms / 1000).toFixed(1)} s, ${Math.round(r.bodies / (r.ms / 1000))} bodies/s at ${run.concurrency} in flight`],
    ['gateway crashes or restarts', run.alive ? '0' : '1 (the gateway process is gone)'],
    ['model process restarts', String(run.modelRestarts.length)],
    ['5xx answers', String(r.serverErrors)],
    ['errors not JSON of the route\'s dialect', String(r.nonJsonErrors)],
    ['2xx answers not JSON of the route\'s shape', String(r.badSuccesses)],
    ['calls without an answer', `${r.noAnswer}${r.refusedUnread ? ` (${r.refusedUnread} of them bodies over MAX_REQUEST_BYTES, refused with a 413 and the connection closed before the client had written them)` : ''}`],
    ['gateway heap after a full collection (old generation), after warm-up → after the run', `${mb(run.before.oldBytes)} → ${mb(run.after.oldBytes)} (${pct(run.after.oldBytes, run.before.oldBytes)})`],
    ['whole heap in use at those readings', `${mb(run.before.heapUsedBytes)} → ${mb(run.after.heapUsedBytes)}`],
    ['gateway resident set, after warm-up → after the run', `${mb(run.before.rssBytes)} → ${mb(run.after.rssBytes)} (${pct(run.after.rssBytes, run.before.rssBytes)})`],
    ['idle waits after the measured windows (full collections in the windows)', `${(run.before.waitedMs / 1000).toFixed(0)} s (${run.before.gcsWaited}), ${(run.after.waitedMs / 1000).toFixed(0)} s (${run.after.gcsWaited})`],
  ];
  return ['| | |', '| --- | --- |', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
}

/** Bodies and answers by family, a column per status seen. */
export function familyTable(r: RunRecord): string {
  const statuses = Object.keys(r.byStatus).map(Number).sort((a, b) => a - b);
  const head = `| family | bodies | ${statuses.map((s) => (s === 0 ? 'no answer' : String(s))).join(' | ')} |`;
  const sep = `| --- | --- | ${statuses.map(() => '---').join(' | ')} |`;
  const rows = Object.entries(r.byFamily)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, c]) => `| ${name} | ${c.bodies} | ${statuses.map((s) => c.statuses[s] ?? 0).join(' | ')} |`);
  const total = `| **all** | **${r.bodies}** | ${statuses.map((s) => `**${r.byStatus[s]}**`).join(' | ')} |`;
  return [head, sep, ...rows, total].join('\n');
}

const esc = (s: string): string => s.replace(/\|/g, '\\|').replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** The violations, at most `max` of them. */
export function violationList(r: RunRecord, max = 50): string {
  if (r.violations.length === 0) return 'No violations.';
  const lines = r.violations.slice(0, max).map((v) => `- seed ${v.seed} index ${v.index} (${v.family}, ${v.target}): HTTP ${v.status}, ${v.problems.join('; ')}; answer \`${esc(v.answer)}\`; sent \`${esc(v.sent)}\``);
  if (r.violations.length > max) lines.push(`- … and ${r.violations.length - max} more`);
  return lines.join('\n');
}
