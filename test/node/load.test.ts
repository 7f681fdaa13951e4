// Zero lost calls on real pods: with the chart installed by `helm install --wait` (2 gateways, 2
// controllers) and a DeployedModel of 3 replicas behind an Endpoint, a steady stream of predict
// calls goes through the gateway's NodePort on keep-alive connections during each change, and
// every call is counted: a rolling update, a scale change, a canary by traffic split, a rolling
// restart of the gateway, each model pod evicted (as kubectl drain evicts) and the controller
// leader's loss lose none; a model pod's process killed loses only the calls in flight on it; a
// frozen one is out of rotation within seconds and its calls fail at their deadline. Calls spread evenly over the replicas. The rows live in
// test/helpers/rollout.ts, which `npm run bench:rollout` runs with longer loads and measures.
import { NodeShell, DEADLINE_SECONDS, canary, evenShare, evictions, gatewayRestart, installRelease, leaderKill, modelFreeze, modelKill, nodeShell, rollingUpdate, scale, summary, uninstallRelease, type RowResult, type RowSettings } from '../helpers/rollout.js';

/** Calls in flight at once: enough to keep every replica busy, little enough for a 2-core machine. */
const CONCURRENCY = 8;
const SETTINGS: RowSettings = { concurrency: CONCURRENCY, minSeconds: 0 };
/** The frozen pod must be out of rotation within 5 s; this much more is left to a loaded 2-core machine. */
const OUT_OF_ROTATION_BOUND_SECONDS = 8;

let shell: NodeShell;

/** What a row's failures were, for an assertion that shows them all when it fails. */
const failures = (r: RowResult): { failed: number; kinds: string[] } => ({ failed: r.report.failed, kinds: r.report.failures.map((f) => `${f.count} × ${f.kind}: ${f.sample}`) });

/** What the row saw, on the run's output: the suite's figures, besides its verdict. */
function told(r: RowResult): RowResult {
  process.stderr.write(`[load] ${summary(r)}\n`);
  return r;
}

function expectNoLoss(r: RowResult): void {
  told(r);
  expect(r.report.total).toBeGreaterThan(400);
  expect(failures(r)).toEqual({ failed: 0, kinds: [] });
}

beforeAll(async () => {
  shell = nodeShell();
  await installRelease(shell);
}, 600_000);

afterAll(async () => {
  if (!shell) return;
  try {
    await uninstallRelease(shell);
  } finally {
    shell.close();
  }
}, 300_000);

test('10,000 calls spread within 10 % of even over the 3 model pods (each pod\'s own count)', async () => {
  const r = await evenShare(shell, CONCURRENCY, 10_000);
  process.stderr.write(`[load] even spread: ${r.report.total} calls, ${r.report.failed} failed, per pod ${JSON.stringify(r.perPod)}, farthest ${(r.maxDeviation * 100).toFixed(1)} % from even\n`);
  expect(failures({ row: 'share', report: r.report, changeSeconds: 0, notes: [] })).toEqual({ failed: 0, kinds: [] });
  expect(Object.keys(r.perPod)).toHaveLength(3);
  // Every call reached exactly one pod: nothing was re-sent to a second one.
  expect(Object.values(r.perPod).reduce((a, b) => a + b, 0)).toBe(10_000);
  expect({ perPod: r.perPod, within10Percent: r.maxDeviation <= 0.1 }).toEqual({ perPod: r.perPod, within10Percent: true });
}, 180_000);

test('a rolling update of the DeployedModel (3 replicas) loses no call', async () => {
  // The roll and the roll back: the model ends as it began.
  expectNoLoss(await rollingUpdate(shell, SETTINGS, 'rolled'));
  expectNoLoss(await rollingUpdate(shell, SETTINGS, null));
}, 600_000);

test('scaling 3 -> 1 -> 3 loses no call', async () => {
  expectNoLoss(await scale(shell, SETTINGS));
}, 400_000);

test('a canary 0 -> 20 -> 100 % and back by the Endpoint\'s traffic split loses no call', async () => {
  const r = await canary(shell, SETTINGS);
  expectNoLoss(r);
  expect(r.report.byModel).toEqual({ load: expect.any(Number), 'load-canary': expect.any(Number) });
}, 300_000);

test('a rolling restart of the gateway (2 replicas) loses no call', async () => {
  expectNoLoss(await gatewayRestart(shell, SETTINGS));
}, 400_000);

test('each model pod evicted in turn through the Eviction API (as kubectl drain does) loses no call', async () => {
  expectNoLoss(await evictions(shell, SETTINGS));
}, 400_000);

test('the controller leader killed (SIGKILL) loses no call, and another holder takes the Lease', async () => {
  expectNoLoss(await leaderKill(shell, SETTINGS));
}, 300_000);

test('a frozen model pod (SIGSTOP) is out of rotation within seconds; the calls on it fail at their deadline', async () => {
  const r = told(await modelFreeze(shell, SETTINGS));
  const f = r.fault!;
  const failed = r.report.calls.filter((c) => c.kind !== undefined);
  // The pod was serving: calls were sent to it and lost. Only those failed: each as the deadline's
  // 504, once the deadline had passed.
  expect(f.failed).toBeGreaterThan(0);
  expect(r.report.failures.filter((k) => !/^HTTP 504 /.test(k.kind))).toEqual([]);
  expect(failed.filter((c) => c.end - c.start < DEADLINE_SECONDS * 1000 - 500)).toEqual([]);
  // Out of rotation: no call sent to it (and lost) started later than this after the freeze.
  expect({ outOfRotationWithinBound: (f.lastFailedStart ?? 0) <= OUT_OF_ROTATION_BOUND_SECONDS, fault: f }).toEqual({ outOfRotationWithinBound: true, fault: f });
}, 300_000);

test('a model pod SIGKILLed loses only the calls in flight on it, none once it left its EndpointSlice', async () => {
  const r = told(await modelKill(shell, SETTINGS));
  const f = r.fault!;
  expect(f.sliceNotReady).toBeDefined();
  // At most the calls in flight at the kill; each answered by the gateway as the model's reset.
  expect(f.failed).toBeLessThanOrEqual(CONCURRENCY);
  expect(r.report.failures.filter((k) => !/^HTTP 502 /.test(k.kind))).toEqual([]);
  expect({ failedAfterSlice: f.failedAfterSlice }).toEqual({ failedAfterSlice: 0 });
}, 300_000);
