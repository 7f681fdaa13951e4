// Benchmark results: folds the per-round cells into medians, checks the goals (as ratios within the
// run: throughput against the bare proxy on every payload, predict CPU on the large echo payloads
// against bare + JSON.parse, gateway RSS at the memory round's connections against the bare proxy's),
// gives the same CPU comparison as information for the other payloads (graphstorm, columnar), compares
// the two gateways of an A/B run, and renders the markdown tables and goal lines. Pure functions, no I/O.

import { COMPARE_TARGETS, CPU_GOAL_PAYLOADS, PAYLOAD_LABELS, PayloadName, TargetName } from './config.js';
import { Payload, formatBytes, median } from './payloads.js';

export type Phase = 'main' | 'rss';

/** One wrk run against one target with one payload. */
export interface Cell {
  phase: Phase;
  round: number;
  target: TargetName;
  payload: PayloadName;
  connections: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  errorDetail: string;
  /** Proxy process CPU (for direct: the model's) per completed request. */
  cpuUsPerReq: number;
  /** CPU of the model behind the proxy per request (null for direct or when unknown). */
  upstreamCpuUsPerReq: number | null;
  /** Peak RSS of the proxy processes during the cell, MB. */
  peakRssMb: number;
  /** Share of the server CPU used by processes other than this target's, % (noise from the machine). */
  foreignCpuPct: number;
  /** Busy share of the server CPU and of the load generator's CPU during the cell, %. */
  serverCpuBusyPct: number;
  loadCpuBusyPct: number;
}

/** Median over rounds of one (payload, target); errors summed, RSS as the max. */
export interface Row {
  phase: Phase;
  target: TargetName;
  payload: PayloadName;
  connections: number;
  rounds: number;
  rps: number;
  /** req/s of each round, by round number (for the paired ratios printed beside the goals). */
  rpsByRound: Record<number, number>;
  /** CPU µs/req of each round, by round number (for the paired ratios of an A/B run). */
  cpuByRound: Record<number, number>;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerReq: number;
  upstreamCpuUsPerReq: number | null;
  peakRssMb: number;
  errors: number;
  errorDetail: string;
}

export interface Goal {
  payload: PayloadName | null;
  label: string;
  /** null when a needed target was not measured. */
  pass: boolean | null;
  detail: string;
  /** A comparison shown for information (payloads outside the issue's goals): never fails a run. */
  info?: boolean;
}


export function aggregate(cells: Cell[], phase: Phase): Row[] {
  const groups = new Map<string, Cell[]>();
  for (const c of cells) {
    if (c.phase !== phase) continue;
    const key = `${c.payload}/${c.target}`;
    const g = groups.get(key) ?? [];
    g.push(c);
    groups.set(key, g);
  }
  const rows: Row[] = [];
  for (const g of groups.values()) {
    const up = g.map((c) => c.upstreamCpuUsPerReq).filter((x): x is number => x !== null);
    rows.push({
      phase,
      target: g[0].target,
      payload: g[0].payload,
      connections: g[0].connections,
      rounds: g.length,
      rps: median(g.map((c) => c.rps)),
      rpsByRound: Object.fromEntries(g.map((c) => [c.round, c.rps])),
      cpuByRound: Object.fromEntries(g.map((c) => [c.round, c.cpuUsPerReq])),
      p50Ms: median(g.map((c) => c.p50Ms)),
      p99Ms: median(g.map((c) => c.p99Ms)),
      cpuUsPerReq: median(g.map((c) => c.cpuUsPerReq)),
      upstreamCpuUsPerReq: up.length > 0 ? median(up) : null,
      peakRssMb: Math.max(...g.map((c) => c.peakRssMb)),
      errors: g.reduce((s, c) => s + c.errors, 0),
      errorDetail: g.map((c) => c.errorDetail).filter((d) => d !== '').join('; '),
    });
  }
  return rows;
}

const find = (rows: Row[], payload: PayloadName, target: TargetName) =>
  rows.find((r) => r.payload === payload && r.target === target);

function num(v: number, digits = 0): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v.toFixed(digits);
}

function withRatio(v: number, base: number | undefined, digits = 0): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (base === undefined || !Number.isFinite(base) || base === 0) return num(v, digits);
  return `${num(v, digits)} (${(v / base).toFixed(2)}x)`;
}

/**
 * The ratio within each round (both targets ran in it, interleaved), as information beside a goal:
 * slow drift of the machine between rounds cancels out of these. The goal itself is the ratio of
 * the medians.
 */
function pairedRatios(a: Row, b: Row, by: 'rpsByRound' | 'cpuByRound' = 'rpsByRound'): string {
  const ratios = Object.entries(a[by])
    .filter(([round]) => b[by][Number(round)] !== undefined)
    .map(([round, v]) => v / b[by][Number(round)]);
  if (ratios.length < 2) return '';
  return ` (within each round: ${ratios.map((r) => r.toFixed(2)).join(', ')}; their median ${median(ratios).toFixed(2)})`;
}

function errCell(r: Row): string {
  return r.errors === 0 ? '0' : `**${r.errors}** ⚠`;
}

/** The main table: one row per (payload, target), each measure with its ratio to the direct call. */
export function renderMainTable(rows: Row[], payloads: Payload[], targets: TargetName[]): string {
  const out = [
    '| payload | target | req/s | p50 ms | p99 ms | CPU µs/req | peak RSS MB | model µs/req | JSON.parse µs | errors |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const p of payloads) {
    const direct = find(rows, p.name, 'direct');
    for (const t of targets) {
      const r = find(rows, p.name, t);
      if (!r) continue;
      out.push(
        [
          '',
          `${PAYLOAD_LABELS[p.name]} (${formatBytes(p.body.length)})`,
          t,
          withRatio(r.rps, direct?.rps),
          withRatio(r.p50Ms, direct?.p50Ms, 2),
          withRatio(r.p99Ms, direct?.p99Ms, 2),
          withRatio(r.cpuUsPerReq, direct?.cpuUsPerReq),
          withRatio(r.peakRssMb, direct?.peakRssMb, 1),
          r.upstreamCpuUsPerReq === null ? (t === 'direct' ? '(self)' : 'n/a') : num(r.upstreamCpuUsPerReq),
          num(p.parseUs),
          errCell(r),
          '',
        ].join(' | ').trim(),
      );
    }
  }
  return out.join('\n');
}

/**
 * The README's short performance table (between its bench-summary markers): throughput against the
 * direct call and CPU per call of each proxy, for the goal payloads. test/unit/documents.test.ts
 * checks that it quotes the main table.
 */
export function renderSummary(rows: Row[], payloads: Payload[]): string {
  const columns: [TargetName, string][] = [['predict', 'predict'], ['rawPredict', 'rawPredict'], ['nginx', 'nginx'], ['bare', 'bare node:http proxy']];
  const out = [`| payload | ${columns.map(([, label]) => label).join(' | ')} |`, `| --- | ${columns.map(() => '---').join(' | ')} |`];
  for (const p of payloads.filter((x) => x.name === 'small' || x.name === 'tensor' || x.name === 'base64')) {
    const direct = find(rows, p.name, 'direct');
    const cells = columns.map(([t]) => {
      const r = find(rows, p.name, t);
      return r && direct ? `${(r.rps / direct.rps).toFixed(2)}x, ${num(r.cpuUsPerReq)} µs` : 'n/a';
    });
    out.push(`| ${PAYLOAD_LABELS[p.name]} (${formatBytes(p.body.length)}) | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}

/** The memory round: the gateway, and the bare proxy beside it, at the RSS connection count. */
export function renderRssTable(rows: Row[], payloads: Payload[]): string {
  if (rows.length === 0) return '';
  const out = [
    `| payload | target | connections | req/s | p99 ms | peak RSS MB | RSS / bare's | errors |`,
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const p of payloads) {
    const bare = find(rows, p.name, 'bare');
    for (const r of rows.filter((x) => x.payload === p.name)) {
      const ratio = bare && r !== bare && bare.peakRssMb > 0 ? `${(r.peakRssMb / bare.peakRssMb).toFixed(2)}x` : '';
      out.push(
        `| ${PAYLOAD_LABELS[p.name]} | ${r.target} | ${r.connections} | ${num(r.rps)} | ${num(r.p99Ms, 2)} | ` +
          `${num(r.peakRssMb, 1)} | ${ratio} | ${errCell(r)} |`,
      );
    }
  }
  return out.join('\n');
}

export const GOALS = {
  predictVsBareSmall: 0.9,
  rawVsBare: 0.95,
  parseFactor: 1.5,
  /** Gateway peak RSS at the memory round's connections, as a multiple of the bare proxy's. */
  rssVsBare: 1.6,
};

function errorsOf(...rows: Row[]): string {
  const bad = rows.filter((r) => r.errors > 0).map((r) => `${r.target} had ${r.errors} errors`);
  return bad.length > 0 ? ` (${bad.join(', ')})` : '';
}

/** predict CPU/req against bare + parseFactor × JSON.parse: a goal for the issue's large payloads, information for the others. */
function parseCpuGoal(p: Payload, rows: Row[], info: boolean): Goal {
  const bare = find(rows, p.name, 'bare');
  const predict = find(rows, p.name, 'predict');
  const label = `predict CPU/req ≤ bare + ${GOALS.parseFactor}×JSON.parse`;
  if (!bare || !predict) return { payload: p.name, label, pass: null, detail: 'SKIP (predict or bare not measured)', info };
  const limit = bare.cpuUsPerReq + GOALS.parseFactor * p.parseUs;
  const errs = errorsOf(predict, bare);
  return {
    payload: p.name,
    label,
    pass: predict.cpuUsPerReq <= limit && errs === '',
    detail:
      `predict CPU ${num(predict.cpuUsPerReq)} µs ≤ bare ${num(bare.cpuUsPerReq)} + ` +
      `${GOALS.parseFactor}×${num(p.parseUs)} = ${num(limit)} µs${errs}`,
    info,
  };
}

function ratioGoal(p: Payload, label: string, a: Row | undefined, bare: Row | undefined, min: number): Goal {
  if (!a || !bare) return { payload: p.name, label, pass: null, detail: `SKIP (${label.split('/')[0]} or bare not measured)` };
  const ratio = a.rps / bare.rps;
  const errs = errorsOf(a, bare);
  return {
    payload: p.name,
    label,
    pass: ratio >= min && errs === '',
    detail: `${a.target}/bare req/s ${ratio.toFixed(2)} ≥ ${min.toFixed(2)}${errs}${pairedRatios(a, bare)}`,
  };
}

/** Peak RSS of the gateway (its larger route) against the bare proxy's, at the memory round's connections. */
function rssGoal(p: Payload, rssRows: Row[]): Goal | null {
  const bare = find(rssRows, p.name, 'bare');
  const gw = rssRows.filter((r) => r.payload === p.name && (r.target === 'predict' || r.target === 'rawPredict'));
  if (gw.length === 0) return null;
  const label = `gateway RSS ≤ ${GOALS.rssVsBare}× bare's at ${gw[0].connections} connections`;
  if (!bare) return { payload: p.name, label, pass: null, detail: `SKIP (bare not measured at ${gw[0].connections} connections)` };
  const worst = gw.reduce((a, b) => (b.peakRssMb > a.peakRssMb ? b : a));
  const ratio = worst.peakRssMb / bare.peakRssMb;
  return {
    payload: p.name,
    label,
    pass: ratio <= GOALS.rssVsBare,
    detail:
      `gateway RSS ${num(worst.peakRssMb, 1)} MB (${worst.target}) / bare ${num(bare.peakRssMb, 1)} MB = ` +
      `${ratio.toFixed(2)}x ≤ ${GOALS.rssVsBare.toFixed(2)}x at ${worst.connections} connections`,
  };
}

export function evaluateGoals(rows: Row[], rssRows: Row[], payloads: Payload[]): Goal[] {
  const goals: Goal[] = [];
  for (const p of payloads) {
    const bare = find(rows, p.name, 'bare');
    if (p.name === 'small') {
      goals.push(ratioGoal(p, `predict/bare req/s ≥ ${GOALS.predictVsBareSmall}`, find(rows, p.name, 'predict'), bare, GOALS.predictVsBareSmall));
    }
    goals.push(ratioGoal(p, `rawPredict/bare req/s ≥ ${GOALS.rawVsBare}`, find(rows, p.name, 'rawPredict'), bare, GOALS.rawVsBare));
    if (p.name !== 'small') goals.push(parseCpuGoal(p, rows, !CPU_GOAL_PAYLOADS.includes(p.name)));
    const rss = rssGoal(p, rssRows);
    if (rss) goals.push(rss);
  }
  if (rssRows.length === 0) {
    goals.push({ payload: null, label: `gateway RSS ≤ ${GOALS.rssVsBare}× bare's`, pass: null, detail: 'SKIP (memory round not run)' });
  }
  const withErrors = [...rows, ...rssRows].filter((r) => r.errors > 0);
  goals.push({
    payload: null,
    label: 'no errors',
    pass: withErrors.length === 0,
    detail:
      withErrors.length === 0
        ? 'no socket errors or non-2xx answers on any target'
        : withErrors
            .map((r) => `${r.target} ${PAYLOAD_LABELS[r.payload]} @${r.connections}: ${r.errors} (${r.errorDetail})`)
            .join('; '),
  });
  return goals;
}

const verdict = (g: Goal) =>
  g.pass === null ? 'SKIP' : g.info ? (g.pass ? 'within' : 'over') : g.pass ? 'PASS' : 'MISSED';

/** True when a goal (not an information line) failed. */
export function anyGoalFailed(goals: Goal[]): boolean {
  return goals.some((g) => g.pass === false && !g.info);
}

export function renderGoals(goals: Goal[], payloads: Payload[]): string {
  const lines: string[] = [];
  for (const p of payloads) {
    const mine = goals.filter((g) => g.payload === p.name);
    if (mine.length === 0) continue;
    lines.push(
      `- ${PAYLOAD_LABELS[p.name]}: ` +
        mine
          .map((g) => `${g.detail.replace(/^SKIP /, '')} ${g.info ? `*${verdict(g)}* (information, not a goal)` : `**${verdict(g)}**`}`)
          .join(' · '),
    );
  }
  for (const g of goals.filter((x) => x.payload === null)) {
    lines.push(`- ${g.label}: ${g.detail.replace(/^SKIP /, '')} **${verdict(g)}**`);
  }
  return lines.join('\n');
}

/**
 * An A/B run: each gateway route of the second gateway (B) against the same route of the first (A), per
 * payload: CPU per call, req/s and peak RSS, as B/A ratios of the medians with the ratios within each
 * round beside them (both ran in every round, interleaved).
 */
export function renderComparison(rows: Row[], rssRows: Row[], payloads: Payload[]): string {
  const lines: string[] = [];
  for (const p of payloads) {
    for (const route of ['predict', 'rawPredict'] as const) {
      const a = find(rows, p.name, route);
      const b = find(rows, p.name, COMPARE_TARGETS[route]);
      if (!a || !b) continue;
      const ra = find(rssRows, p.name, route);
      const rb = find(rssRows, p.name, COMPARE_TARGETS[route]);
      const rss =
        ra && rb
          ? `; at ${ra.connections} connections A ${num(ra.peakRssMb, 1)}, B ${num(rb.peakRssMb, 1)} MB (B/A ${(rb.peakRssMb / ra.peakRssMb).toFixed(2)})`
          : '';
      lines.push(
        `- ${PAYLOAD_LABELS[p.name]}, ${route}: CPU µs/req A ${num(a.cpuUsPerReq)}, B ${num(b.cpuUsPerReq)}, ` +
          `B/A ${(b.cpuUsPerReq / a.cpuUsPerReq).toFixed(2)}${pairedRatios(b, a, 'cpuByRound')} · ` +
          `req/s B/A ${(b.rps / a.rps).toFixed(2)}${pairedRatios(b, a)} · ` +
          `peak RSS A ${num(a.peakRssMb, 1)}, B ${num(b.peakRssMb, 1)} MB (B/A ${(b.peakRssMb / a.peakRssMb).toFixed(2)})${rss}${errorsOf(a, b)}`,
      );
    }
  }
  return lines.join('\n');
}
