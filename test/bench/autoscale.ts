// `npm run bench:autoscale`: replicas that follow the calls, measured on the real test node. Starts a
// node cluster of its own (as `npm run cluster:up -- --node` does, the image built and imported),
// installs the chart with a 10 s autoscaler stable window and the two models of the node suite
// (test/helpers/autoscale.ts: the half-plus-two scale-to-zero sample and a tiny-llm model whose calls
// last ~0.75 s, targetConcurrency 2, 0 to 8 replicas), then measures with the suite's scenarios:
// the cold start of the half-plus-two model, split into its phases by the bench's watches
// (detection, scheduling, container start, readiness, the gateway's share), over several rounds; and
// cycles of zero -> N -> zero of the tiny-llm model under a ramp of calls in flight, with every call
// counted and the replica-seconds used against the ideal; the same ramp with steps half and twice as long; and
// the same ramp against the same model scaled by an HPA on CPU (metrics-server on the node), its
// replica-seconds and its calls' latency beside the request autoscaler's. Both tiny-llm models make
// TARGET generations at once per replica (more wait in the replica's queue), so a replica at its
// target is a replica at capacity. Prints markdown tables and, on a run with the defaults, writes
// them into docs/performance.md between the autoscale-bench markers (BENCH_WRITE_DOCS=1 writes any
// run's, =0 none). The cluster is torn down at the end, on failure too.
// Settings: BENCH_AUTOSCALE_ROUNDS (5 cold starts), BENCH_AUTOSCALE_CYCLES (20),
// BENCH_AUTOSCALE_STEP_SECONDS (4: how long each step of the ramp holds), BENCH_AUTOSCALE_SHORT_CYCLES
// and BENCH_AUTOSCALE_LONG_CYCLES (5 cycles each with steps of half and twice that),
// BENCH_AUTOSCALE_HPA_CYCLES (3 cycles of the CPU-scaled model).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from '../cluster/binaries.js';
import { HPA_CONTROLLER_FLAGS } from '../cluster/nodeConfig.js';
import { startNodeCluster, stopLeftoverNode, type NodeCluster } from '../cluster/node.js';
import {
  CPU_MODEL, CPU_MODEL_REQUEST, CPU_MODEL_TARGET_PERCENT, LLM_MODEL, MAX_REPLICAS, RAMP, STABLE_WINDOW_SECONDS, TARGET, TOKEN_INTERVAL_MS, MAX_TOKENS, INTERVAL_MS,
  NS, coldStart, cycle, installAutoscale, stopWatches, type ColdStart, type CycleResult, type Rig,
} from '../helpers/autoscale.js';
import { HpaRecorder } from '../helpers/hpa.js';
import { percentile, reportOf } from '../helpers/load.js';
import { ROOT } from '../helpers/local.js';
import { NodeShell } from '../helpers/rollout.js';
import { measuredOn, writeBlock } from './docsBlock.js';

const DEFAULTS = { rounds: 5, cycles: 20, stepSeconds: 4, shortCycles: 5, longCycles: 5, hpaCycles: 3 };
const ROUNDS = Number(process.env.BENCH_AUTOSCALE_ROUNDS ?? DEFAULTS.rounds);
const CYCLES = Number(process.env.BENCH_AUTOSCALE_CYCLES ?? DEFAULTS.cycles);
const STEP_SECONDS = Number(process.env.BENCH_AUTOSCALE_STEP_SECONDS ?? DEFAULTS.stepSeconds);
const SHORT_CYCLES = Number(process.env.BENCH_AUTOSCALE_SHORT_CYCLES ?? DEFAULTS.shortCycles);
const LONG_CYCLES = Number(process.env.BENCH_AUTOSCALE_LONG_CYCLES ?? DEFAULTS.longCycles);
const HPA_CYCLES = Number(process.env.BENCH_AUTOSCALE_HPA_CYCLES ?? DEFAULTS.hpaCycles);
/** How long after a ramp the CPU-scaled model may still move: the HPA's sync and scale-down stabilization, and metrics-server's resolution. */
const HPA_SETTLE_MS = 45_000;
/** The tiny-llm model's idleScaledownPeriod here: short, so that a cycle ends soon after its load. */
const IDLE_SECONDS = 2;
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

const ms = (v: number): string => `${v < 10 && v > -10 ? v.toFixed(1) : Math.round(v)} ms`;
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const PHASES: [keyof ColdStart, string, string][] = [
  ['detection', 'detection: first call sent → Deployment spec.replicas 0 → 1 (the bench\'s watch)', '≤ 1 s'],
  ['scheduling', 'scheduling: → the pod has a node', ''],
  ['containerStart', 'container start: → container running', ''],
  ['readiness', 'readiness: → address ready in the EndpointSlice', ''],
  ['gateway', 'gateway\'s share: endpoint ready → first answer', '≤ 100 ms'],
  ['total', 'total: first call sent → its answer (200)', ''],
];

function coldTable(rounds: ColdStart[]): string {
  const lines = [
    '| phase | median | max | goal |',
    '| --- | --- | --- | --- |',
    ...PHASES.map(([k, label, goal]) => {
      const xs = rounds.map((r) => r[k]);
      return `| ${label} | ${ms(median(xs))} | ${ms(Math.max(...xs))} | ${goal} |`;
    }),
  ];
  const statuses = rounds.map((r) => r.status);
  const podToEndpoint = rounds.map((r) => r.podReadyToEndpoint);
  return `${lines.join('\n')}\n\nFirst answers: ${statuses.join(', ')}. Pod Ready → its address ready in the EndpointSlice: median ${ms(median(podToEndpoint))}, max ${ms(Math.max(...podToEndpoint))} (inside "readiness").`;
}

function lossTable(cycles: CycleResult[]): string {
  const all = reportOf(cycles.flatMap((c) => c.report.calls), Math.max(...RAMP));
  const kinds = all.failures.map((f) => `${f.count} × ${f.kind}`).join(', ');
  const peaks = cycles.map((c) => c.peak);
  return [
    '| cycles (zero → N → zero) | calls | failed | failure kinds | cycles with a failed call | calls failing for (first failed sent → last failed answered, summed) | p50 / p99 | peak replicas written (min / median / max) | cycle: first call → zero written (median / max) | goal |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    `| ${cycles.length} | ${all.total} | ${all.failed} | ${kinds} | ${cycles.filter((c) => c.report.failed > 0).map((c) => cycles.indexOf(c) + 1).join(', ') || 'none'} | ${cycles.reduce((s, c) => s + c.failingSeconds, 0).toFixed(1)} s | ${ms(all.p50Ms)} / ${ms(all.p99Ms)} | ${Math.min(...peaks)} / ${median(peaks)} / ${Math.max(...peaks)} | ${median(cycles.map((c) => c.seconds)).toFixed(1)} s / ${Math.max(...cycles.map((c) => c.seconds)).toFixed(1)} s | 0 failed |`,
  ].join('\n');
}

/** One line of the replica-seconds comparison: a model and pattern, over its cycles. */
interface UsageRow {
  label: string;
  cycles: CycleResult[];
  goal: string;
}

function usageTable(rows: UsageRow[]): string {
  const line = ({ label, cycles, goal }: UsageRow): string => {
    const sum = (f: (c: CycleResult) => number): number => cycles.reduce((s, c) => s + f(c), 0);
    const ideal = sum((c) => c.ideal);
    const rel = (x: number): string => `${(x / ideal).toFixed(2)} ×`;
    const all = reportOf(cycles.flatMap((c) => c.report.calls), Math.max(...RAMP));
    const peaks = cycles.map((c) => c.peak);
    return `| ${label} | ${cycles.length} | ${ideal.toFixed(0)} | ${rel(sum((c) => c.idealWhole))} | ${sum((c) => c.used.spec).toFixed(0)} (${rel(sum((c) => c.used.spec))}) | ${sum((c) => c.used.ready).toFixed(0)} (${rel(sum((c) => c.used.ready))}) | ${Math.min(...peaks)} / ${Math.max(...peaks)} | ${all.total} (${all.failed} failed) | ${ms(all.p50Ms)} / ${ms(all.p99Ms)} | ${goal} |`;
  };
  return [
    '| model, pattern | cycles | ideal: ∫ ramp\'s calls in flight / target (replica-s) | ideal in whole replicas | asked for: ∫ spec.replicas (replica-s, × ideal) | ready: ∫ ready replicas | peak replicas (min / max) | calls | p50 / p99 | goal |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.filter((r) => r.cycles.length > 0).map(line),
  ].join('\n');
}

/** Whether the cluster serves metrics.k8s.io (metrics-server), which an HPA on CPU needs. */
async function hasMetricsApi(shell: NodeShell): Promise<boolean> {
  return (await shell.sh('kubectl get apiservice v1beta1.metrics.k8s.io')).code === 0;
}

async function main(): Promise<void> {
  const started = new Date();
  const helm = ensureBinaries(log).helm;
  const dir = mkdtempSync(join(tmpdir(), 'predictgate-bench-node-'));
  let node: NodeCluster | undefined;
  let shell: NodeShell | undefined;
  let rig: Rig | undefined;
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
    rig = await installAutoscale(shell, { zeroIdleSeconds: 1, llmIdleSeconds: IDLE_SECONDS, maxRunning: TARGET, cpuModel: true });
    const metricsApi = await hasMetricsApi(shell);
    log(`metrics.k8s.io served: ${metricsApi}`);
    const colds: ColdStart[] = [];
    /** Rounds answered before the woken pod's address was ready in its EndpointSlice: not split into phases, repeated. */
    const discarded: ColdStart[] = [];
    while (colds.length < ROUNDS && discarded.length < ROUNDS) {
      const c = await coldStart(rig);
      const inOrder = c.gateway >= 0;
      log(`cold start ${colds.length + 1}/${ROUNDS}${inOrder ? '' : ' (answered before the EndpointSlice said ready: repeated)'}: ${JSON.stringify(Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Math.round(v)])))}`);
      (inOrder ? colds : discarded).push(c);
    }
    const runCycles = async (what: string, n: number, stepSeconds: number, model = LLM_MODEL, floor = 0): Promise<CycleResult[]> => {
      const out: CycleResult[] = [];
      for (let i = 0; i < n; i++) {
        const c = await cycle(rig!, stepSeconds, model, floor, floor ? HPA_SETTLE_MS : 0);
        const kinds = c.report.failures.map((f) => `${f.count} × ${f.kind} (${f.sample.slice(0, 160)})`).join('; ');
        log(`${what} ${i + 1}/${n}: ${c.report.total} calls, ${c.report.failed} failed${kinds ? ` [${kinds}; failing for ${c.failingSeconds.toFixed(1)} s]` : ''}, p50/p99 ${ms(c.report.p50Ms)}/${ms(c.report.p99Ms)}, peak ${c.peak}, ${c.seconds.toFixed(1)} s, replica-s spec ${c.used.spec.toFixed(0)} ready ${c.used.ready.toFixed(0)} ideal ${c.ideal.toFixed(0)}`);
        out.push(c);
      }
      return out;
    };
    const cycles = await runCycles('cycle', CYCLES, STEP_SECONDS);
    const short = await runCycles('short-step cycle', SHORT_CYCLES, STEP_SECONDS / 2);
    const long = await runCycles('long-step cycle', LONG_CYCLES, STEP_SECONDS * 2);
    let hpaCycles: CycleResult[] = [];
    let hpaSeen = '';
    if (metricsApi && HPA_CYCLES > 0) {
      const hpa = new HpaRecorder(shell, NS, CPU_MODEL);
      await hpa.start();
      const t0 = performance.now();
      try {
        hpaCycles = await runCycles('HPA cycle', HPA_CYCLES, STEP_SECONDS, CPU_MODEL, 1);
      } finally {
        await hpa.stop();
      }
      const seen = hpa.since(t0);
      const cpu = seen.map((p) => p.cpuPercent).filter((x): x is number => x !== undefined);
      const desired = seen.map((p) => p.desired).filter((x): x is number => x !== undefined);
      hpaSeen = `Over its cycles the HPA read a CPU utilisation of ${cpu.length ? `${Math.min(...cpu)} to ${Math.max(...cpu)} %` : 'nothing'} of the ${CPU_MODEL_REQUEST} requested (target ${CPU_MODEL_TARGET_PERCENT} %) and wanted ${desired.length ? `${Math.min(...desired)} to ${Math.max(...desired)}` : 'no'} replicas (${hpa.readErrors} reads of it failed).`;
      log(hpaSeen);
    }
    const hpaLine = !metricsApi
      ? 'No HPA on CPU to compare with: the test node served no metrics.k8s.io (no metrics-server), so an HPA would have no metric to act on; it is not measured rather than faked.'
      : hpaSeen;
    const pattern = (step: number): string => `ramp ${step} s a step`;
    const table = [
      `Measured ${measuredOn(ROOT, started)}; the chart's controller with a ${STABLE_WINDOW_SECONDS} s stable window (${STABLE_WINDOW_SECONDS / 10} s panic window), decisions every ${INTERVAL_MS} ms; the node's HPA controller with ${HPA_CONTROLLER_FLAGS.join(' ')}; calls through the gateway's NodePort.`,
      '',
      `Cold start of the half-plus-two model at zero, the image on the node, ${colds.length} rounds (one call each, the model at zero and its pod gone before each):`,
      '',
      coldTable(colds),
      ...(discarded.length ? ['', `${discarded.length} more round${discarded.length === 1 ? '' : 's'} not split into phases: the call was answered before the woken pod's address was ready in its EndpointSlice (the kubelet's first readiness probe failed, the server not yet listening, and the next came its period, 5 s, later), by ${discarded.map((c) => ms(-c.gateway)).join(', ')}; total${discarded.length === 1 ? '' : 's'} ${discarded.map((c) => ms(c.total)).join(', ')}, answered ${discarded.map((c) => c.status).join(', ')}.`] : []),
      '',
      `${cycles.length} cycles of the tiny-llm model (each call ~${(TOKEN_INTERVAL_MS * MAX_TOKENS) / 1000} s, ${TARGET} generations at once per replica, targetConcurrency ${TARGET}, 0 to ${MAX_REPLICAS} replicas, idleScaledownPeriod ${IDLE_SECONDS} s), each from zero under a ramp of ${RAMP.join(', ')} calls in flight (closed loop), ${STEP_SECONDS} s a step, then no call until the Deployment is written to zero:`,
      '',
      lossTable(cycles),
      '',
      `Replica-seconds from the first call until the model is back where it began (zero; the HPA's model: one replica, the later of the ramp's end and its last return to one), against the ideal, with the same ramp ${STEP_SECONDS / 2} s and ${STEP_SECONDS * 2} s a step, and against the same model (${TARGET} at once per replica, ${CPU_MODEL_REQUEST} CPU requested) scaled 1 to ${MAX_REPLICAS} by an HPA on CPU at ${CPU_MODEL_TARGET_PERCENT} %:`,
      '',
      usageTable([
        { label: `request autoscaling, ${pattern(STEP_SECONDS)}`, cycles, goal: '≤ 1.3 ×' },
        { label: `request autoscaling, ${pattern(STEP_SECONDS / 2)}`, cycles: short, goal: '' },
        { label: `request autoscaling, ${pattern(STEP_SECONDS * 2)}`, cycles: long, goal: '≤ 1.3 ×' },
        { label: `HPA on CPU, ${pattern(STEP_SECONDS)}`, cycles: hpaCycles, goal: '' },
      ]),
      '',
      hpaLine,
    ].join('\n');
    process.stdout.write(`\n${table}\n`);
    const write = process.env.BENCH_WRITE_DOCS;
    const isDefault = ROUNDS === DEFAULTS.rounds && CYCLES === DEFAULTS.cycles && STEP_SECONDS === DEFAULTS.stepSeconds && SHORT_CYCLES === DEFAULTS.shortCycles && LONG_CYCLES === DEFAULTS.longCycles && HPA_CYCLES === DEFAULTS.hpaCycles;
    if (write === '1' || (write !== '0' && isDefault)) log(`table written to ${writeBlock(ROOT, 'autoscale-bench', table)}`);
    else log(`docs/performance.md left as it is: ${write === '0' ? 'BENCH_WRITE_DOCS=0' : 'not a default run (BENCH_WRITE_DOCS=1 writes it anyway)'}`);
    log(`p99 of the cycle lengths: ${percentile(cycles.map((c) => c.seconds), 0.99).toFixed(1)} s; bench took ${((Date.now() - started.getTime()) / 60_000).toFixed(1)} min`);
  } finally {
    if (rig) stopWatches(rig);
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
