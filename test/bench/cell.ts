// One measured cell of the benchmark: warm-up, wait until every server is idle, then one wrk run against
// one target with one payload (at the target's URL for the payload's model kind), with the target's CPU
// (utime+stime from /proc) and peak RSS (VmHWM after a reset, plus VmRSS sampling) around it, the CPU of
// the model serving that payload behind it, and how busy both CPUs were (noise from other processes).

import { BenchConfig } from './config.js';
import { Payload } from './payloads.js';
import { cpuTimes, cpuUsSum, hwmKb, resetHwm, rssKb } from './procfs.js';
import { sleep } from './procs.js';
import { Cell, Phase } from './report.js';
import { Target } from './targets.js';
import { runWrk } from './wrk.js';

/** A cell where other processes took this share of the server CPU is reported as noisy. */
export const NOISY_PCT = 5;
/** A cell where the load CPU (wrk, and whatever else runs there) was this busy may be limited by the load side. */
export const LOAD_BOUND_PCT = 95;

export interface CellPlan {
  phase: Phase;
  round: number;
  target: Target;
  payload: Payload;
  script: string;
  connections: number;
  /** Every server pid of the run (to wait until all are idle). */
  allPids: () => number[];
}

/**
 * Waits (at most maxMs) until the server processes have finished the work that an ended wrk run left
 * behind: requests whose client went away are often still computed, and that CPU must not be charged
 * to the next measured cell.
 */
export async function waitQuiet(pids: () => number[], maxMs = 5000): Promise<void> {
  const deadline = Date.now() + maxMs;
  let prev = cpuUsSum(pids());
  let calm = 0;
  while (Date.now() < deadline && calm < 2) {
    await sleep(100);
    const now = cpuUsSum(pids());
    calm = now - prev < 5000 ? calm + 1 : 0; // under 5% of one CPU over 100 ms
    prev = now;
  }
}

/** Warm-up, then one measured wrk run; CPU from /proc before/after, RSS peak from VmHWM and sampling. */
export async function runCell(plan: CellPlan, cfg: BenchConfig): Promise<Cell> {
  const { target, payload } = plan;
  const kind = payload.model;
  const wrkOpts = { url: target.url(kind), scriptFile: plan.script, connections: plan.connections, cpu: cfg.loadCpu };
  if (cfg.warmupS > 0) await runWrk({ ...wrkOpts, durationS: cfg.warmupS });
  await waitQuiet(plan.allPids);

  const proxy = target.proxyPids(kind);
  const upstream = target.upstreamPids(kind);
  const hwmReset = proxy.every((p) => resetHwm(p));
  let sampledKb = 0;
  const sample = () => {
    const kb = target.proxyPids(kind).reduce((s, p) => s + (rssKb(p) || 0), 0);
    if (kb > sampledKb) sampledKb = kb;
  };
  sample();
  const sampler = setInterval(sample, 50);
  const sys0 = cpuTimes(cfg.serverCpu);
  const load0 = cpuTimes(cfg.loadCpu);
  const cpu0 = cpuUsSum(proxy);
  const up0 = upstream.length > 0 ? cpuUsSum(upstream) : NaN;
  let wrk;
  try {
    wrk = await runWrk({ ...wrkOpts, durationS: cfg.durationS });
  } finally {
    clearInterval(sampler);
  }
  const cpu1 = cpuUsSum(proxy);
  const up1 = upstream.length > 0 ? cpuUsSum(upstream) : NaN;
  const sys1 = cpuTimes(cfg.serverCpu);
  const load1 = cpuTimes(cfg.loadCpu);
  sample();
  const hwm = proxy.reduce((s, p) => s + (hwmKb(p) || 0), 0);
  // Without a reset VmHWM is the lifetime peak: use the samples of this cell only.
  const peakKb = hwmReset ? Math.max(hwm, sampledKb) : sampledKb;

  for (const s of target.servers) {
    if (s.exited) throw new Error(`${s.name} exited during ${target.name}/${payload.name} (see ${s.logFile})`);
  }
  const reqs = Math.max(wrk.requests, 1);
  const se = wrk.socketErrors;
  // A cell where nothing completed is an error too (a hung target answers nothing, not non-2xx).
  const errors = wrk.errors + (wrk.requests === 0 ? 1 : 0);
  const errorDetail =
    errors === 0
      ? ''
      : `${wrk.requests === 0 ? 'no request completed, ' : ''}non-2xx ${wrk.non2xx}, ` +
        `connect ${se.connect}, read ${se.read}, write ${se.write}, timeout ${se.timeout}`;
  return {
    phase: plan.phase,
    round: plan.round,
    target: target.name,
    payload: payload.name,
    connections: plan.connections,
    requests: wrk.requests,
    rps: wrk.rps,
    p50Ms: wrk.p50Ms,
    p99Ms: wrk.p99Ms,
    errors,
    errorDetail,
    cpuUsPerReq: (cpu1 - cpu0) / reqs,
    upstreamCpuUsPerReq: upstream.length > 0 ? (up1 - up0) / reqs : null,
    peakRssMb: peakKb / 1024,
    foreignCpuPct: Math.max(
      0,
      (100 * (sys1.busyUs - sys0.busyUs - (cpu1 - cpu0) - (upstream.length > 0 ? up1 - up0 : 0))) /
        (sys1.totalUs - sys0.totalUs),
    ),
    serverCpuBusyPct: (100 * (sys1.busyUs - sys0.busyUs)) / (sys1.totalUs - sys0.totalUs),
    loadCpuBusyPct: (100 * (load1.busyUs - load0.busyUs)) / (load1.totalUs - load0.totalUs),
  };
}

export function describeCell(c: Cell): string {
  const up = c.upstreamCpuUsPerReq === null ? '' : `, model ${c.upstreamCpuUsPerReq.toFixed(0)} µs/req`;
  const noise =
    c.foreignCpuPct >= NOISY_PCT ? `  NOISY: other processes took ${c.foreignCpuPct.toFixed(0)}% of the server CPU` : '';
  const sat =
    c.loadCpuBusyPct >= LOAD_BOUND_PCT ? `  LOAD-BOUND: the load CPU was ${c.loadCpuBusyPct.toFixed(0)}% busy` : '';
  const err = c.errors > 0 ? `  ERRORS ${c.errors} (${c.errorDetail})` : '';
  return (
    `${c.rps.toFixed(0).padStart(7)} req/s  p50 ${c.p50Ms.toFixed(2)} ms  p99 ${c.p99Ms.toFixed(2)} ms  ` +
    `cpu ${c.cpuUsPerReq.toFixed(0)} µs/req${up}  rss ${c.peakRssMb.toFixed(1)} MB  ` +
    `busy load/server CPU ${c.loadCpuBusyPct.toFixed(0)}/${c.serverCpuBusyPct.toFixed(0)}%${err}${noise}${sat}`
  );
}

/** Busy share of a CPU over one second, not counting our own servers. */
export async function measureForeignLoad(cpu: number, ours: () => number[]): Promise<number> {
  const a = cpuTimes(cpu);
  const oursA = cpuUsSum(ours());
  await sleep(1000);
  const b = cpuTimes(cpu);
  const oursB = cpuUsSum(ours());
  return Math.max(0, (100 * (b.busyUs - a.busyUs - (oursB - oursA))) / (b.totalUs - a.totalUs));
}
