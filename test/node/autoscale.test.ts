// Replicas that follow the calls, on real pods: the chart installed with a 10 s autoscaler stable
// window (1 s panic window) behind its two gateway pods, the scale-to-zero sample (its periods
// shortened to a second) and a tiny-llm model whose calls last ~0.75 s (targetConcurrency 2, 0 to 8
// replicas). With no call, the leading controller scales to zero once it has watched a model for a
// stable window: the pods go, the DeployedModel stays Ready (ScaledToZero). Then, through the
// NodePort with a caller's token and every call counted: a burst at zero, the first call after an
// idle spell and the calls that arrive while a model wakes, all answered 200; a closed-loop load
// that reaches the maximum and holds it without a scale-down; a step of calls in flight followed
// within the panic window; the scale-down to one replica and then to zero with calls trickling in;
// the controller leader killed while the load holds the replicas, the Deployment's count
// untouched; and long streams across a scale-down, each ending whole. The scenarios live in test/helpers/autoscale.ts, which `npm run bench:autoscale`
// measures with.
import {
  INTERVAL_MS, LLM_MODEL, MAX_REPLICAS, NS, PANIC_WINDOW_SECONDS, STABLE_WINDOW_SECONDS, ZERO_MODEL,
  atZero, burstAtZero, coldStart, holdAtMax, installAutoscale, leaderLost, scaleDown, step, stopWatches, wakeUnderArrivals, type Rig,
} from '../helpers/autoscale.js';
import { streamsAcrossScaleDown } from '../helpers/autoscaleStreams.js';
import type { LoadReport } from '../helpers/load.js';
import { nodeShell, pods, removeRelease, type NodeShell } from '../helpers/rollout.js';
import { waitFor } from '../helpers/cluster.js';

const BURST = 200;
const PERIODS = { zeroIdleSeconds: 1, llmIdleSeconds: 15 };
/** What a loaded 2-core machine may add to the panic window and one interval before the write. */
const STEP_SLACK_SECONDS = 3;

let shell: NodeShell;
let rig: Rig;

const reason = async (): Promise<string | undefined> => (await shell.kube.custom.getNamespacedCustomObject({ group: 'prediction.predictgate.dev', version: 'v1', namespace: NS, plural: 'deployedmodels', name: ZERO_MODEL }) as { status?: { primaryCondition?: { reason?: string } } }).status?.primaryCondition?.reason;
const failures = (r: LoadReport): { failed: number; kinds: string[] } => ({ failed: r.failed, kinds: r.failures.map((f) => `${f.count} × ${f.kind}: ${f.sample}`) });
const told = (what: string, r: LoadReport, more: unknown): void => void process.stderr.write(`[autoscale] ${what}: ${r.total} calls, ${r.failed} failed, p50 ${r.p50Ms.toFixed(0)} ms, p99 ${r.p99Ms.toFixed(0)} ms; ${JSON.stringify(more)}\n`);
const nonIncreasing = (xs: number[]): boolean => xs.every((x, i) => i === 0 || x <= xs[i - 1]);
const nonDecreasing = (xs: number[]): boolean => xs.every((x, i) => i === 0 || x >= xs[i - 1]);

beforeAll(async () => {
  shell = nodeShell();
  rig = await installAutoscale(shell, PERIODS);
}, 600_000);

afterAll(async () => {
  if (!shell) return;
  try {
    if (rig) stopWatches(rig);
    await removeRelease(shell, NS);
  } finally {
    shell.close();
  }
}, 300_000);

test('without calls the model goes to zero (after the autoscaler\'s stable window): its pod goes, and it stays Ready (ScaledToZero)', async () => {
  await waitFor(async () => ((await reason()) === 'ScaledToZero' ? true : undefined), 'the model at zero', 180_000, 1000);
  await waitFor(async () => ((await pods(shell, NS, `prediction.predictgate.dev/deployed-model=${ZERO_MODEL}`)).length === 0 ? true : undefined), 'the model pod to go', 120_000, 500);
  const ready = await shell.ok(`kubectl get deployedmodels.prediction.predictgate.dev/${ZERO_MODEL} -n ${NS} -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'`);
  expect(ready).toBe('True');
}, 320_000);

test(`a burst of ${BURST} calls at zero through both gateway pods: every one is answered 200 by the pods the controller starts`, async () => {
  const r = await burstAtZero(rig, BURST);
  // The cold start as a caller sees it: the first answer (hold, the controller's read, scheduling, the pod's start and readiness).
  const first = Math.min(...r.calls.map((c) => c.end - c.start));
  const last = Math.max(...r.calls.map((c) => c.end - c.start));
  told(`${BURST} calls at zero`, r, { answeredInMs: [Math.round(first), Math.round(last)] });
  expect(failures(r)).toEqual({ failed: 0, kinds: [] });
  expect(r.total).toBe(BURST);
  expect(r.byModel).toEqual({ [ZERO_MODEL]: BURST });
  const status = await shell.ok(`kubectl get deployedmodels.prediction.predictgate.dev/${ZERO_MODEL} -n ${NS} -o jsonpath={.status.autoscaling.lastScaleReason}`);
  expect(['ScaledFromZero', 'ScaledUp']).toContain(status);
}, 300_000);

test('the first call after an idle spell at zero is answered 200 (the cold start, phase by phase)', async () => {
  const c = await coldStart(rig);
  process.stderr.write(`[autoscale] cold start (ms): ${JSON.stringify(Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Math.round(v)])))}\n`);
  expect(c.status).toBe(200);
  expect(c.detection).toBeGreaterThan(0);
}, 300_000);

test('calls that arrive while the model wakes from zero (one every 100 ms) wait for the replica as the first one does: all answered 200', async () => {
  const r = await wakeUnderArrivals(rig, 100);
  told('calls arriving during a wake', r.report, { sentWhileWaking: r.sentWhileWaking });
  expect(r.sentWhileWaking).toBeGreaterThan(0);
  expect(failures(r.report)).toEqual({ failed: 0, kinds: [] });
}, 300_000);

test(`up: 16 calls in flight against targetConcurrency 2 reach ${MAX_REPLICAS} replicas and stay there while the load holds (no scale-down written)`, async () => {
  const r = await holdAtMax(rig, 16, 2 * STABLE_WINDOW_SECONDS);
  told('16 in flight', r.report, { specs: r.specs, maxWrittenAfterS: r.maxWrittenAfter.toFixed(1), maxReadyAfterS: r.maxReadyAfter.toFixed(1), heldS: r.heldSeconds.toFixed(1) });
  expect(failures(r.report)).toEqual({ failed: 0, kinds: [] });
  expect(r.specs.at(-1)).toBe(MAX_REPLICAS);
  expect({ specs: r.specs, neverDown: nonDecreasing(r.specs) }).toEqual({ specs: r.specs, neverDown: true });
  expect(r.heldSeconds).toBeGreaterThanOrEqual(2 * STABLE_WINDOW_SECONDS);
}, 420_000);

test(`a step from 1 to 32 calls in flight is followed within the panic window (${PANIC_WINDOW_SECONDS} s) and one interval: the write of ${MAX_REPLICAS} replicas`, async () => {
  const r = await step(rig, 32);
  told('step 1 -> 32 in flight', r.report, { writesAfterStepS: r.writes.map(([t, n]) => [Number(t.toFixed(2)), n]), toMaxS: r.toMax.toFixed(2) });
  expect(failures(r.report)).toEqual({ failed: 0, kinds: [] });
  const bound = PANIC_WINDOW_SECONDS + INTERVAL_MS / 1000 + STEP_SLACK_SECONDS;
  expect({ toMax: r.toMax, withinBound: r.toMax <= bound }).toEqual({ toMax: r.toMax, withinBound: true });
}, 600_000);

test(`down: after the load stops, one replica with calls trickling in, then zero once idleScaledownPeriod (${PERIODS.llmIdleSeconds} s) passed without a call; none lost`, async () => {
  const r = await scaleDown(rig, 16, 3000);
  told('trickle during the scale-down', r.report, { specs: r.specs, toOneS: r.toOne.toFixed(1), lastCallToZeroS: r.lastCallToZero.toFixed(1) });
  expect(failures(r.report)).toEqual({ failed: 0, kinds: [] });
  expect(r.report.total).toBeGreaterThanOrEqual(3);
  expect(r.specs[0]).toBe(MAX_REPLICAS);
  expect(r.specs.slice(-2)).toEqual([1, 0]);
  expect(nonIncreasing(r.specs)).toBe(true);
  // At most half the replicas per decision.
  expect(r.specs.slice(0, -1).every((n, i, a) => i === 0 || n >= Math.ceil(a[i - 1] / 2))).toBe(true);
  // Zero no earlier than idleScaledownPeriod after the last call (the watch's time, so never early by the client's clock).
  expect(r.lastCallToZero).toBeGreaterThanOrEqual(PERIODS.llmIdleSeconds);
  await atZero(rig, LLM_MODEL);
}, 600_000);

test('the controller leader killed (SIGKILL) while the load holds 4 replicas: another holder takes the Lease and the Deployment\'s replicas never change; no call lost', async () => {
  // 7 calls in flight against target 2: 4 replicas, with room on both sides of the boundary.
  const r = await leaderLost(rig, 7, 4, STABLE_WINDOW_SECONDS + 5);
  told('leader killed at 4 replicas', r.report, { specs: r.specs, takeoverS: r.takeoverSeconds.toFixed(1), byStandby: r.byStandby, underNewLeaderS: r.afterTakeover.toFixed(1) });
  expect(failures(r.report)).toEqual({ failed: 0, kinds: [] });
  expect(r.specs).toEqual([4]);
  expect(r.afterTakeover).toBeGreaterThanOrEqual(STABLE_WINDOW_SECONDS + 5);
}, 600_000);

test('streams across a scale-down: the autoscaler takes the idle pods, keeps those with a stream, and every stream ends whole', async () => {
  // 8 calls in flight hold 4 replicas; two streams of 800 tokens (40 s) begin, the load stops, and
  // the replicas come down while the streams run (a pod taken with a stream on it would cut it).
  const r = await streamsAcrossScaleDown(rig, { inFlight: 8, replicas: 4, count: 2, maxTokens: 800 });
  process.stderr.write(`[autoscale] streams across a scale-down: ${JSON.stringify({ streams: r.streams, specsDuring: r.specsDuring })}\n`);
  expect(failures(r.load)).toEqual({ failed: 0, kinds: [] });
  expect(r.streams).toEqual(Array.from({ length: 2 }, () => ({ status: 200, tokens: 800, finishReason: 'length', done: true, error: undefined })));
  expect(Math.min(...r.specsDuring)).toBeLessThan(4);
}, 400_000);
