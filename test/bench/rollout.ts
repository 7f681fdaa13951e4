// `npm run bench:rollout`: calls lost, and how long the change took, while a release changes under
// load on the real test node. Starts a node cluster of its own (as `npm run cluster:up -- --node`
// does, the image built and imported), installs the chart with `helm install --wait` (2 gateways, 2
// controllers) and a DeployedModel of 3 replicas behind an Endpoint, then runs each row of
// test/helpers/rollout.ts (the node suite's rows) with a longer load: a steady stream of predict
// calls through the gateway's NodePort, every call counted and carrying the token of a ServiceAccount
// allowed to call (the chart's gateway checks its callers). Prints a markdown table and, on a run
// with the defaults, writes it into docs/performance.md between the rollout-bench markers
// (BENCH_WRITE_DOCS=1 writes any run's, =0 none). The cluster is torn down at the end, on failure too.
// Settings: BENCH_SECONDS (30: the least time each row's load runs), BENCH_CONCURRENCY (16),
// BENCH_SHARE_CALLS (10000: calls of the even-spread row).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from '../cluster/binaries.js';
import { startNodeCluster, stopLeftoverNode, type NodeCluster } from '../cluster/node.js';
import { ROOT } from '../helpers/local.js';
import type { LoadReport } from '../helpers/load.js';
import {
  DEADLINE_SECONDS, NodeShell, canary, evenShare, evictions, gatewayRestart, installRelease, leaderKill, modelFreeze, modelKill, rollingUpdate, scale,
  type RowResult, type RowSettings,
} from '../helpers/rollout.js';
import { measuredOn, writeBlock } from './docsBlock.js';

const DEFAULTS = { seconds: 30, concurrency: 16, shareCalls: 10_000 };
const SECONDS = Number(process.env.BENCH_SECONDS ?? DEFAULTS.seconds);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? DEFAULTS.concurrency);
const SHARE_CALLS = Number(process.env.BENCH_SHARE_CALLS ?? DEFAULTS.shareCalls);
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

const ms = (v: number): string => (Number.isFinite(v) ? `${v < 10 ? v.toFixed(1) : Math.round(v)} ms` : '-');
const s1 = (v: number | undefined): string => (v === undefined ? '-' : `${v.toFixed(1)} s`);
const esc = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s+/g, ' ');

function kinds(report: LoadReport): string {
  if (report.failed === 0) return '';
  return report.failures.map((f) => `${f.count} × ${f.kind}`).join(', ');
}

function load(report: LoadReport): string {
  return `${report.concurrency} × ${Math.round(report.callsPerSecond)}/s, ${report.seconds.toFixed(0)} s`;
}

function outOfRotation(r: RowResult): string {
  const f = r.fault;
  if (!f) return '';
  const lost = f.lastFailedStart === undefined ? 'no call lost' : f.lastFailedStart <= 0 ? 'no call lost after the signal' : `last lost call sent ${s1(f.lastFailedStart)} after`;
  return `${lost}; EndpointSlice not ready after ${s1(f.sliceNotReady)}; ${f.failedAfterSlice} lost after that; ${f.retries} retries, ${f.ejections} ejections`;
}

function row(r: RowResult, goal: string): string {
  const p = r.report;
  return `| ${r.row} | ${load(p)} | ${p.total} | ${p.failed} | ${esc(kinds(p))} | ${ms(p.p50Ms)} / ${ms(p.p99Ms)} | ${s1(r.changeSeconds)} | ${esc(outOfRotation(r) || r.notes.join('; '))} | ${goal} |`;
}

async function main(): Promise<void> {
  const started = new Date();
  const helm = ensureBinaries(log).helm;
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bench-node-'));
  let node: NodeCluster | undefined;
  let shell: NodeShell | undefined;
  // Interrupted (Ctrl-C): the node goes too, and the machine is put back.
  const interrupted = (sig: NodeJS.Signals): void => {
    log(`${sig}: stopping the node cluster`);
    void (node ? node.stop() : stopLeftoverNode(log)).catch((err: Error) => log(err.message)).finally(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(130);
    });
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    node = await startNodeCluster({ dir, log });
    shell = new NodeShell(node.kubeconfig, helm);
    log('installing the chart and the models');
    await installRelease(shell);
    const s: RowSettings = { concurrency: CONCURRENCY, minSeconds: SECONDS };
    const results: [RowResult, string][] = [];
    const run = async (what: string, goal: string, fn: () => Promise<RowResult>): Promise<void> => {
      log(`row: ${what}`);
      const r = await fn();
      log(`  ${r.report.total} calls, ${r.report.failed} failed ${kinds(r.report)} in ${r.report.seconds.toFixed(1)} s; change ${s1(r.changeSeconds)} ${outOfRotation(r)} ${r.notes.join('; ')}`);
      results.push([r, goal]);
    };
    log('row: even spread');
    const share = await evenShare(shell, CONCURRENCY, SHARE_CALLS);
    await run('rolling update', '0', () => rollingUpdate(shell!, s, 'rolled'));
    await run('rolling update back', '0', () => rollingUpdate(shell!, s, null));
    await run('scale', '0', () => scale(shell!, s));
    await run('canary', '0', () => canary(shell!, s));
    await run('gateway restart', '0', () => gatewayRestart(shell!, s));
    await run('model pods evicted', '0', () => evictions(shell!, s));
    await run('leader kill', '0', () => leaderKill(shell!, s));
    await run('model SIGSTOP', `out of rotation within 5 s; its calls fail at the ${DEADLINE_SECONDS} s deadline`, () => modelFreeze(shell!, s));
    await run('model SIGKILL', `only calls in flight on it (≤ ${CONCURRENCY}); none after it left`, () => modelKill(shell!, s));

    const counts = Object.values(share.perPod);
    const table = [
      `Measured ${measuredOn(ROOT, started)}; each row's load at least ${SECONDS} s, ${CONCURRENCY} calls in flight on keep-alive connections through the gateway's NodePort (half-plus-two, \`{"instances":[1.0,2.0,5.0]}\`).`,
      '',
      '| change under load | load (in flight × calls/s, duration) | calls | failed | failure kinds | p50 / p99 | change took | out of rotation / notes | goal |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...results.map(([r, goal]) => row(r, goal)),
      '',
      `Spread over the 3 model pods (each pod's own count of the predict calls it answered): ${share.report.total} calls, ${share.report.failed} failed, ${counts.join(' / ')}; the farthest pod ${(share.maxDeviation * 100).toFixed(1)} % from an even share (goal ≤ 10 %).`,
    ].join('\n');
    process.stdout.write(`\n${table}\n`);
    const write = process.env.BENCH_WRITE_DOCS;
    const isDefault = SECONDS === DEFAULTS.seconds && CONCURRENCY === DEFAULTS.concurrency && SHARE_CALLS === DEFAULTS.shareCalls;
    if (write === '1' || (write !== '0' && isDefault)) log(`table written to ${writeBlock(ROOT, 'rollout-bench', table)}`);
    else log(`docs/performance.md left as it is: ${write === '0' ? 'BENCH_WRITE_DOCS=0' : 'not a default run (BENCH_WRITE_DOCS=1 writes it anyway)'}`);
  } finally {
    shell?.close();
    try {
      await node?.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(1);
});
