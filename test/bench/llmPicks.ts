// The picks part of `npm run bench:llm` (BENCH_LLM_PARTS=picks): load-aware picks against
// least-request on replicas of uneven load. Two `predictgate local` gateways, one per mode
// (LOAD_SCRAPE_INTERVAL_MS=250 and =0), each with the same DeployedModel of N tiny-llm replicas
// (modelSpec.openai, a small TINY_LLM_MAX_RUNNING so that a replica queues); in each cell the load
// generator (llmLoad.ts, mode open) sends calls straight to one replica, behind the gateway's back,
// at about its capacity, and a fixed rate of calls through the gateway, the set's spare capacity;
// per mode: time to first token p50/p90/p99, errors, achieved calls a second, and the share of the
// calls on the busy replica (from the replicas' vllm:request_success_total). The modes' cells
// alternate over rounds. Renders the table and the goal line; writes the generative-picks block.

import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { measureForeignLoad, NOISY_PCT } from './cell.js';
import { measuredOn, writeBlock } from './docsBlock.js';
import type { LoadResult } from './llmLoad.js';
import {
  allDefault, chatBody, docsSkipReason, f, findModelProcesses, loadAverage, log, ModelProcess, PartContext, readSetting, ROOT, runLoad, sampleDocs, seriesSum, SettingsTable, stopTree,
} from './llmShared.js';
import { percentile } from '../helpers/load.js';
import { Child, freePort, httpCall, logTail, sleep, spawnPinned, waitReady } from './procs.js';
import { describeRuntime, withRuntime } from './runtime.js';

/** The picks part's settings (environment variables): also the docs' settings table. */
export const PICK_SETTINGS = {
  BENCH_LLM_PICK_REPLICAS: { def: 2, help: 'Replicas of the DeployedModel (2 or more); the first is the busy one.' },
  BENCH_LLM_PICK_MAX_RUNNING: { def: 2, help: '`TINY_LLM_MAX_RUNNING` of every replica: generations at once, more queue.' },
  BENCH_LLM_PICK_INTERVAL_MS: { def: 20, help: '`TINY_LLM_TOKEN_INTERVAL_MS` of every replica.' },
  BENCH_LLM_PICK_MAX_TOKENS: { def: 16, help: '`max_tokens` of every call.' },
  BENCH_LLM_PICK_RATE: { def: 5, help: 'Calls a second through the gateway (open loop).' },
  BENCH_LLM_PICK_BUSY_LOAD: { def: 1, help: "Calls a second straight to the busy replica, as a share of its nominal capacity (max running ÷ (max_tokens × interval)); 1 is 6.25 a second with the other defaults." },
  BENCH_LLM_PICK_SECONDS: { def: 20, help: 'Seconds of calls through the gateway per mode and round.' },
  BENCH_LLM_PICK_ROUNDS: { def: 3, help: 'Rounds; each has one cell per mode, the first mode swapped each round.' },
  BENCH_LLM_PICK_LEAD_SECONDS: { def: 3, help: "Seconds the busy replica's calls run before those through the gateway start." },
  BENCH_LLM_PICK_SCRAPE_MS: { def: 250, help: '`LOAD_SCRAPE_INTERVAL_MS` of the load-aware gateway (the other has 0: least-request).' },
} satisfies SettingsTable;
type PickSetting = keyof typeof PICK_SETTINGS;
const setting = (name: PickSetting): number => readSetting(PICK_SETTINGS, name);

const MODEL = 'tiny-llm-picks';
/** How long the calls through the gateway may go on after the last was sent (then the rest are errors). */
const DRAIN_S = 30;
/** Achieved rates this close (relative) are "the same throughput". */
const SAME_RATE = 0.05;

export type Mode = 'load-aware' | 'least-request';

/** The figures the part runs with, read once. */
export interface Plan {
  replicas: number;
  maxRunning: number;
  intervalMs: number;
  maxTokens: number;
  rate: number;
  busyRate: number;
  busyCapacity: number;
  seconds: number;
  rounds: number;
  leadS: number;
  scrapeMs: number;
}

/** A replica of the model, as the bench calls it straight (behind the gateway's back) and reads its metrics. */
export interface PickReplica {
  /** Its own chat/completions URL. */
  chatUrl: string;
  metricsUrl: string;
}

/** One mode's gateway, wherever it runs (a local-mode process here, a pod on the node tier: llmPicksNode.ts). */
export interface PickTarget {
  mode: Mode;
  /** The Endpoint's chat/completions URL through the gateway. */
  chatUrl: string;
  metricsUrl: string;
  /** In the gateway's order; [0] is the busy one. */
  replicas: PickReplica[];
  /** Rejects when the gateway is gone (its exit, with its log; a pod that left). */
  check(): Promise<void>;
}

interface Gateway extends PickTarget {
  child: Child;
  port: number;
  processes: ModelProcess[];
}

/** What a cell runs with besides the target: where the load generator's files go, and its CPU. */
export interface CellRun {
  tmp: string;
  logDir: string;
  loadCpu: number;
}

/** One mode's cell of one round. */
export interface Cell {
  mode: Mode;
  round: number;
  load: LoadResult;
  /** Calls through the gateway that the busy replica took. */
  onBusy: number;
  picks: { load: number; fallback: number };
}

export function readPlan(): Plan {
  const replicas = Math.floor(setting('BENCH_LLM_PICK_REPLICAS'));
  if (replicas < 2) throw new Error(`BENCH_LLM_PICK_REPLICAS must be 2 or more, got ${replicas}`);
  const maxRunning = Math.max(1, Math.floor(setting('BENCH_LLM_PICK_MAX_RUNNING')));
  const intervalMs = Math.max(1, setting('BENCH_LLM_PICK_INTERVAL_MS'));
  const maxTokens = Math.max(1, Math.floor(setting('BENCH_LLM_PICK_MAX_TOKENS')));
  const busyCapacity = (maxRunning * 1000) / (maxTokens * intervalMs);
  return {
    replicas, maxRunning, intervalMs, maxTokens, busyCapacity,
    rate: Math.max(0.1, setting('BENCH_LLM_PICK_RATE')),
    busyRate: Math.max(0.1, setting('BENCH_LLM_PICK_BUSY_LOAD') * busyCapacity),
    seconds: Math.max(1, setting('BENCH_LLM_PICK_SECONDS')),
    rounds: Math.max(1, Math.floor(setting('BENCH_LLM_PICK_ROUNDS'))),
    leadS: setting('BENCH_LLM_PICK_LEAD_SECONDS'),
    scrapeMs: Math.max(1, setting('BENCH_LLM_PICK_SCRAPE_MS')),
  };
}

/** The tiny-llm sample as one DeployedModel of `replicas` replicas (and its Endpoint). */
function manifest(p: Plan): string {
  const env = { TINY_LLM_MAX_RUNNING: String(p.maxRunning), TINY_LLM_TOKEN_INTERVAL_MS: String(p.intervalMs), NODE_OPTIONS: '', GLIBC_TUNABLES: '' };
  const docs = sampleDocs(MODEL, env);
  for (const d of docs) if (d.kind === 'DeployedModel') d.spec.dedicatedResources = { minReplicaCount: p.replicas, maxReplicaCount: p.replicas };
  return `# predictgate bench:llm picks: generated by test/bench/llmPicks.ts from crds/samples/tiny-llm.yaml\n${docs.map((d) => stringify(d)).join('---\n')}`;
}

const gatewayUrl = (port: number): string => `http://127.0.0.1:${port}/v1/projects/default/locations/local/endpoints/${MODEL}/chat/completions`;
const metricsOf = async (url: string): Promise<string> => (await httpCall(url, 'GET')).body.toString('utf8');
const finished = async (r: PickReplica): Promise<number> => seriesSum(await metricsOf(r.metricsUrl), 'vllm:request_success_total');
export const finishedAll = (g: PickTarget): Promise<number[]> => Promise.all(g.replicas.map(finished));
const replicaOf = (m: ModelProcess): PickReplica => ({ chatUrl: `http://127.0.0.1:${m.port}/v1/chat/completions`, metricsUrl: `http://127.0.0.1:${m.port}/metrics` });

/** 2 calls per replica at once through the gateway (not streamed, 2 tokens). */
export async function prime(g: PickTarget): Promise<void> {
  const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }], max_tokens: 2 }));
  await Promise.all(g.replicas.flatMap(() => [0, 1]).map(() => httpCall(g.chatUrl, 'POST', body, 10_000)));
}

/** Until every replica has taken a call through the gateway (all in its table and in rotation); a prime that fails is tried again. */
export async function untilEveryReplicaCalled(g: PickTarget, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const before = await finishedAll(g);
  for (;;) {
    await prime(g).catch(() => undefined);
    const now = await finishedAll(g);
    if (now.every((n, i) => n > before[i])) return;
    await g.check();
    if (Date.now() > deadline) throw new Error(`the ${g.mode} gateway sent no call to replica(s) ${g.replicas.filter((_, i) => now[i] === before[i]).map((r) => r.chatUrl).join(', ')} within ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

/** Until every replica's process is up and has taken a call through the gateway. */
async function waitAllInRotation(g: Gateway, want: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((g.processes = findModelProcesses(g.child.pid, MODEL)).length < want) {
    if (Date.now() > deadline || g.child.exited) throw new Error(`the ${g.mode} gateway has ${g.processes.length} of ${want} ${MODEL} processes; log ${g.child.logFile}:\n${logTail(g.child)}`);
    await sleep(200);
  }
  g.replicas = g.processes.map(replicaOf);
  await untilEveryReplicaCalled(g, Math.max(1, deadline - Date.now()));
}

async function startGateway(mode: Mode, scrapeMs: number, p: Plan, c: PartContext): Promise<Gateway> {
  const folder = path.join(c.tmp, `picks-${mode}`);
  fs.mkdirSync(folder);
  fs.writeFileSync(path.join(folder, `${MODEL}.yaml`), manifest(p));
  const port = await freePort();
  const child = spawnPinned(`gateway-${mode}`, process.execPath, [...c.nodeFlags, path.join(ROOT, 'bin', 'predictgate.js'), 'local', folder], {
    cpu: c.serverCpu,
    env: withRuntime({ ...process.env, PORT: String(port), LOG_LEVEL: 'warn', LOAD_SCRAPE_INTERVAL_MS: String(scrapeMs) }, c.runtime),
    cwd: ROOT,
    logDir: c.logDir,
  });
  const probe = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }], max_tokens: 1 }));
  await waitReady(`the ${mode} gateway's route to ${MODEL}`, () => httpCall(gatewayUrl(port), 'POST', probe), [child], 60_000);
  const check = async (): Promise<void> => {
    if (child.exited) throw new Error(`the ${mode} gateway exited (${child.exited.code ?? child.exited.signal}); log ${child.logFile}:\n${logTail(child)}`);
  };
  const g: Gateway = { mode, chatUrl: gatewayUrl(port), metricsUrl: `http://127.0.0.1:${port}/metrics`, child, port, processes: [], replicas: [], check };
  await waitAllInRotation(g, p.replicas);
  return g;
}

/** Until no replica of `g` has a generation running or waiting (at most `maxMs`). */
async function waitIdle(g: PickTarget, maxMs = 15_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  const busy = async (r: PickReplica): Promise<boolean> => {
    const text = await metricsOf(r.metricsUrl);
    return seriesSum(text, 'vllm:num_requests_running') + seriesSum(text, 'vllm:num_requests_waiting') > 0;
  };
  while ((await Promise.all(g.replicas.map(busy))).some((b) => b)) {
    if (Date.now() > deadline) throw new Error(`the ${g.mode} gateway's replicas still busy ${maxMs / 1000} s after a cell`);
    await sleep(100);
  }
}

const picksOf = async (g: PickTarget): Promise<{ load: number; fallback: number }> => {
  const text = await metricsOf(g.metricsUrl);
  return { load: seriesSum(text, 'predictgate_upstream_load_picks_total', 'kind="load"'), fallback: seriesSum(text, 'predictgate_upstream_load_picks_total', 'kind="fallback"') };
};

/** One cell: the busy replica's calls straight to it and the measured calls through the gateway, counted. */
export async function runCell(g: PickTarget, round: number, p: Plan, c: CellRun): Promise<Cell> {
  await waitIdle(g);
  await prime(g); // a call lately: the load-aware gateway reads its replicas at the fast pace
  const before = await finishedAll(g);
  const picks0 = await picksOf(g);
  const [busy] = g.replicas;
  const load = await runLoad(`picks-${g.mode}-${round}`, {
    mode: 'open', url: g.chatUrl, body: chatBody(p.maxTokens), concurrency: 0, durationS: p.seconds, rate: p.rate, drainS: DRAIN_S,
    background: { url: busy.chatUrl, rate: p.busyRate, leadS: p.leadS },
  }, c.tmp, c.logDir, c.loadCpu, p.leadS + p.seconds + DRAIN_S + 60);
  await waitIdle(g);
  await g.check();
  const after = await finishedAll(g);
  const elsewhere = after.slice(1).reduce((n, x, i) => n + x - before[i + 1], 0);
  const picks1 = await picksOf(g);
  return { mode: g.mode, round, load, onBusy: load.streams - elsewhere, picks: { load: picks1.load - picks0.load, fallback: picks1.fallback - picks0.fallback } };
}

/** A mode's cells pooled: the table's figures. */
export interface ModeFigures {
  calls: number;
  errors: number;
  errorSamples: string[];
  rate: number;
  ttft: number[];
  onBusy: number;
  picks: { load: number; fallback: number };
  p99ByRound: number[];
  busyTtft: number[];
  maxLateMs: number;
}

export function pool(cells: Cell[], mode: Mode): ModeFigures {
  const mine = cells.filter((x) => x.mode === mode);
  const sum = (g: (x: Cell) => number): number => mine.reduce((n, x) => n + g(x), 0);
  return {
    calls: sum((x) => x.load.streams),
    errors: sum((x) => x.load.errors),
    errorSamples: [...new Set(mine.flatMap((x) => x.load.errorSamples))].slice(0, 3),
    rate: sum((x) => x.load.completed) / sum((x) => x.load.windowS ?? NaN),
    ttft: mine.flatMap((x) => x.load.ttftMs),
    onBusy: sum((x) => x.onBusy),
    picks: { load: sum((x) => x.picks.load), fallback: sum((x) => x.picks.fallback) },
    p99ByRound: mine.map((x) => percentile(x.load.ttftMs, 0.99)),
    busyTtft: mine.flatMap((x) => x.load.background?.ttftMs ?? []),
    maxLateMs: Math.max(...mine.map((x) => x.load.maxLateMs ?? 0)),
  };
}

const pct = (part: number, whole: number): string => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');
const ms = (x: number): string => `${f(x, 1)} ms`;

export interface Goal {
  met: boolean;
  sameRate: boolean;
}

/** The verdict: load-aware's TTFT p99 under least-request's, at achieved rates within SAME_RATE. */
export function picksGoal(la: ModeFigures, lr: ModeFigures): Goal {
  const sameRate = Math.abs(la.rate - lr.rate) <= SAME_RATE * Math.max(la.rate, lr.rate);
  return { met: sameRate && percentile(la.ttft, 0.99) < percentile(lr.ttft, 0.99), sameRate };
}

function tableRow(label: string, m: ModeFigures): string {
  const q = (x: number): string => ms(percentile(m.ttft, x));
  return `| ${label} | ${m.calls} | ${m.errors} | ${f(m.rate)} | ${q(0.5)} | ${q(0.9)} | ${q(0.99)} | ${pct(m.onBusy, m.calls)} (${m.onBusy}) |`;
}

/** The part's markdown: `header` (where it ran), the plan, the table, the goal line, per-round figures and notes. */
export function render(header: string, replicasOf: string, p: Plan, la: ModeFigures, lr: ModeFigures, goal: Goal, notes: string[]): string {
  const out = [
    header,
    '',
    `${p.replicas} tiny-llm replicas ${replicasOf}, \`TINY_LLM_MAX_RUNNING\` ${p.maxRunning}, ${p.intervalMs} ms between tokens, \`max_tokens\` ${p.maxTokens} (nominal capacity ${f(p.busyCapacity)} calls a second per replica). ` +
      `The busy replica: ${f(p.busyRate)} calls a second straight to it, from ${p.leadS} s before the calls through the gateway until the last of them ended. Through the gateway: ${f(p.rate)} calls a second for ${p.seconds} s per cell, ${p.rounds} round${p.rounds === 1 ? '' : 's'}, the first mode swapped each round.`,
    '',
    '| mode | calls | errors | achieved req/s | TTFT p50 | p90 | p99 | share of calls on the busy replica |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    tableRow(`load-aware (\`LOAD_SCRAPE_INTERVAL_MS=${p.scrapeMs}\`)`, la),
    tableRow('least-request (`LOAD_SCRAPE_INTERVAL_MS=0`)', lr),
    '',
    `Goal: load-aware TTFT p99 < least-request TTFT p99 at the same throughput (achieved rates within ${SAME_RATE * 100}%): ${goal.met ? 'met' : '**missed**'} ` +
      `(${ms(percentile(la.ttft, 0.99))} against ${ms(percentile(lr.ttft, 0.99))}; ${f(la.rate)} against ${f(lr.rate)} calls a second${goal.sameRate ? '' : ', not the same throughput'}).`,
    '',
    `TTFT p99 per round: load-aware ${la.p99ByRound.map((x) => f(x, 1)).join(', ')} ms; least-request ${lr.p99ByRound.map((x) => f(x, 1)).join(', ')} ms. ` +
      `The load-aware gateway's picks: ${la.picks.load} by load, ${la.picks.fallback} by least-request for want of a fresh report. ` +
      `The busy replica's own calls: TTFT p50 ${ms(percentile(la.busyTtft, 0.5))}, p99 ${ms(percentile(la.busyTtft, 0.99))} in the load-aware cells; p50 ${ms(percentile(lr.busyTtft, 0.5))}, p99 ${ms(percentile(lr.busyTtft, 0.99))} in the least-request cells.`,
  ];
  if (notes.length > 0) out.push('', ...notes.map((n) => `Note: ${n}.`));
  return out.join('\n');
}

export function describeCell(x: Cell): string {
  const r = x.load;
  const bg = r.background;
  return `[round ${x.round}] ${x.mode.padEnd(13)} ${r.completed}/${r.streams} calls, errors ${r.errors}${r.errorSamples.length ? ` (${r.errorSamples[0]})` : ''}, ` +
    `${f(r.completed / (r.windowS ?? NaN))} req/s, TTFT p50/p90/p99 ${[0.5, 0.9, 0.99].map((q) => f(percentile(r.ttftMs, q), 1)).join('/')} ms, on the busy replica ${x.onBusy} (${pct(x.onBusy, r.streams)}), ` +
    `picks load ${x.picks.load} / fallback ${x.picks.fallback}; busy replica's own ${bg?.streams ?? 0} calls: TTFT p50 ${f(percentile(bg?.ttftMs ?? [], 0.5), 1)} ms; latest send ${f(r.maxLateMs ?? NaN, 1)} ms late`;
}

/** Runs the part; prints its markdown, writes it into the docs when it should; true when the goal was missed. */
export async function runPicks(c: PartContext): Promise<boolean> {
  const t0 = Date.now();
  const p = readPlan();
  const loads = { start: loadAverage(), end: '' };
  log(`picks: starting two gateways (load-aware, least-request) with ${p.replicas} tiny-llm replicas each...`);
  const gateways = await Promise.all([startGateway('load-aware', p.scrapeMs, p, c), startGateway('least-request', 0, p, c)]);
  const ours = (): number[] => gateways.flatMap((g) => [g.child.pid, ...g.processes.map((r) => r.pid)]);
  const idle = await measureForeignLoad(c.serverCpu, ours);
  log(`picks: ready in ${f((Date.now() - t0) / 1000, 1)} s; busy replicas :${gateways.map((g) => g.processes[0].port).join(', :')}; other processes took ${f(idle, 0)}% of CPU ${c.serverCpu}`);
  const cells: Cell[] = [];
  for (let round = 1; round <= p.rounds; round++) {
    for (const g of round % 2 === 1 ? gateways : [...gateways].reverse()) {
      const cell = await runCell(g, round, p, c);
      cells.push(cell);
      log(describeCell(cell));
    }
  }
  loads.end = loadAverage();
  for (const g of gateways) await stopTree(g.child);
  const la = pool(cells, 'load-aware');
  const lr = pool(cells, 'least-request');
  const goal = picksGoal(la, lr);
  const runS = (Date.now() - t0) / 1000;
  const header = `Measured ${measuredOn(ROOT, c.started)}; load average ${loads.start} at the start, ${loads.end} at the end. Load generator on CPU ${c.loadCpu}, both gateways and their model processes on CPU ${c.serverCpu}; the gateways with ${describeRuntime(c.runtime)}${c.nodeFlags.length > 0 ? `, node flags ${c.nodeFlags.join(' ')}` : ''}. Run time ${f(runS / 60, 1)} min.`;
  const text = render(header, 'per gateway', p, la, lr, goal, picksNotes(c, idle, la, lr));
  process.stdout.write(`## predictgate bench:llm: load-aware picks against least-request\n\n${text}\n`);
  const why = docsSkipReason(allDefault(PICK_SETTINGS) && c.sharedDefault, c.nodeFlags, c.imageNode);
  if (why === null) log(`picks table written to ${writeBlock(ROOT, 'generative-picks', text)}`);
  else log(`docs/performance.md left as it is for the picks table: ${why}`);
  return !goal.met;
}

/** What the figures of both modes ask to be told: errors, and calls the load generator sent late. */
export function figureNotes(la: ModeFigures, lr: ModeFigures): string[] {
  const notes: string[] = [];
  for (const [name, m] of [['load-aware', la], ['least-request', lr]] as const) {
    if (m.errors > 0) notes.push(`${name}: ${m.errors} errors (${m.errorSamples.join('; ')})`);
    if (m.maxLateMs > 50) notes.push(`${name}: a call went out ${f(m.maxLateMs, 0)} ms after its time (the load generator's CPU was busy)`);
  }
  return notes;
}

function picksNotes(c: PartContext, idle: number, la: ModeFigures, lr: ModeFigures): string[] {
  const notes = figureNotes(la, lr);
  if (idle >= NOISY_PCT) notes.push(`with every server idle, other processes took ${f(idle, 0)}% of CPU ${c.serverCpu}`);
  return notes;
}
