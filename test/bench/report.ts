// Benchmark results: folds the per-round cells into medians, checks the issue's goals (as ratios within
// the run, for the echo payloads small/tensor/base64), gives the same CPU comparison as information for
// the other payloads (graphstorm, columnar), and renders the markdown tables and goal lines. Pure
// functions, no I/O.

import { GOAL_PAYLOADS, PAYLOAD_LABELS, PayloadName, TargetName } from './config.js';
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
function pairedRatios(a: Row, b: Row): string {
  const ratios = Object.entries(a.rpsByRound)
    .filter(([round]) => b.rpsByRound[Number(round)] !== undefined)
    .map(([round, rps]) => rps / b.rpsByRound[Number(round)]);
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

/** The memory round: gateway (and the bare proxy as a reference) at the RSS connection count. */
export function renderRssTable(rows: Row[], payloads: Payload[]): string {
  if (rows.length === 0) return '';
  const out = [
    `| payload | target | connections | req/s | p99 ms | peak RSS MB | errors |`,
    '| --- | --- | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const p of payloads) {
    for (const r of rows.filter((x) => x.payload === p.name)) {
      out.push(
        `| ${PAYLOAD_LABELS[p.name]} | ${r.target} | ${r.connections} | ${num(r.rps)} | ${num(r.p99Ms, 2)} | ` +
          `${num(r.peakRssMb, 1)} | ${errCell(r)} |`,
      );
    }
  }
  return out.join('\n');
}

export const GOALS = {
  predictVsBareSmall: 0.9,
  rawVsBare: 0.95,
  parseFactor: 1.5,
  gatewayRssMb: 150,
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

export function evaluateGoals(rows: Row[], rssRows: Row[], payloads: Payload[]): Goal[] {
  const goals: Goal[] = [];
  for (const p of payloads) {
    if (!GOAL_PAYLOADS.includes(p.name)) {
      goals.push(parseCpuGoal(p, rows, true));
      continue;
    }
    const bare = find(rows, p.name, 'bare');
    const predict = find(rows, p.name, 'predict');
    const raw = find(rows, p.name, 'rawPredict');
    if (p.name === 'small') {
      const label = `predict/bare req/s ≥ ${GOALS.predictVsBareSmall}`;
      if (!bare || !predict) {
        goals.push({ payload: p.name, label, pass: null, detail: 'SKIP (predict or bare not measured)' });
      } else {
        const ratio = predict.rps / bare.rps;
        const errs = errorsOf(predict, bare);
        goals.push({
          payload: p.name,
          label,
          pass: ratio >= GOALS.predictVsBareSmall && errs === '',
          detail: `predict/bare req/s ${ratio.toFixed(2)} ≥ ${GOALS.predictVsBareSmall.toFixed(2)}${errs}${pairedRatios(predict, bare)}`,
        });
      }
    }
    {
      const label = `rawPredict/bare req/s ≥ ${GOALS.rawVsBare}`;
      if (!bare || !raw) {
        goals.push({ payload: p.name, label, pass: null, detail: 'SKIP (rawPredict or bare not measured)' });
      } else {
        const ratio = raw.rps / bare.rps;
        const errs = errorsOf(raw, bare);
        goals.push({
          payload: p.name,
          label,
          pass: ratio >= GOALS.rawVsBare && errs === '',
          detail: `rawPredict/bare req/s ${ratio.toFixed(2)} ≥ ${GOALS.rawVsBare.toFixed(2)}${errs}${pairedRatios(raw, bare)}`,
        });
      }
    }
    if (p.name !== 'small') goals.push(parseCpuGoal(p, rows, false));
  }
  // The issue's memory goal is about its payloads; the others' memory rows are in the table.
  const gw = rssRows.filter(
    (r) => (r.target === 'predict' || r.target === 'rawPredict') && GOAL_PAYLOADS.includes(r.payload),
  );
  const rssLabel = `gateway RSS < ${GOALS.gatewayRssMb} MB at 64 connections`;
  if (gw.length === 0) {
    goals.push({ payload: null, label: rssLabel, pass: null, detail: 'SKIP (memory round not run)' });
  } else {
    const worst = gw.reduce((a, b) => (b.peakRssMb > a.peakRssMb ? b : a));
    goals.push({
      payload: null,
      label: rssLabel,
      pass: worst.peakRssMb < GOALS.gatewayRssMb,
      detail:
        `gateway peak RSS ${num(worst.peakRssMb, 1)} MB (${worst.target}, ${PAYLOAD_LABELS[worst.payload]}, ` +
        `${worst.connections} connections) < ${GOALS.gatewayRssMb} MB`,
    });
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
  g.pass === null ? 'SKIP' : g.info ? (g.pass ? 'within' : 'over') : g.pass ? 'PASS' : 'FAIL';

/** True when a goal (not an information line) failed. */
export function anyGoalFailed(goals: Goal[]): boolean {
  return goals.some((g) => g.pass === false && !g.info);
}

export function renderGoals(goals: Goal[], payloads: Payload[]): string {
  const lines: string[] = [];
  for (const p of payloads) {
    const mine = goals.filter((g) => g.payload === p.name);
    if (mine.length === 0) continue;
    const info = mine.every((g) => g.info) ? ' (information, not a goal)' : '';
    lines.push(
      `- ${PAYLOAD_LABELS[p.name]}${info}: ` +
        mine.map((g) => `${g.detail.replace(/^SKIP /, '')} ${g.info ? `*${verdict(g)}*` : `**${verdict(g)}**`}`).join(' · '),
    );
  }
  for (const g of goals.filter((x) => x.payload === null)) {
    lines.push(`- ${g.label}: ${g.detail.replace(/^SKIP /, '')} **${verdict(g)}**`);
  }
  return lines.join('\n');
}
