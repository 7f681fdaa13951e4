// CPU autoscaling on real pods: the node tier's metrics-server serves metrics.k8s.io through the
// aggregation layer, so `kubectl top` answers and kube-controller-manager's HPA controller acts (its
// test settings: a 5 s sync and a 20 s scale-down stabilization). With the chart installed (its
// gateways at a fixed two, so that only the model's HPA moves) and a DeployedModel that autoscales
// on CPU (1 to 3 replicas, 50m requested, a 30 % target), a closed-loop load of predict calls
// through the gateway's NodePort scales it up to 3 with every call answered, and it goes back to 1
// once the load stops. The replicas are recorded over time with test/helpers/hpa.ts.
import { HpaRecorder, type HpaPoint } from '../helpers/hpa.js';
import { LoadDriver, type LoadReport } from '../helpers/load.js';
import { waitFor } from '../helpers/cluster.js';
import { INSTALL, RELEASE_NS, imageTag, nodeShell, origin, pods, predictorToken, removeRelease, settled, type NodeShell } from '../helpers/rollout.js';

const NS = 'predictgate-hpa';
const MODEL = 'cpu-scaled';
const MODEL_LABEL = 'prediction.predictgate.dev/deployed-model';
const CALLER = 'hpa-caller';
const MAX_REPLICAS = 3;
const CPU_REQUEST = '50m';
const TARGET_PERCENT = 30;
/** Calls in flight at once: enough to keep the model pods well above their target. */
const CONCURRENCY = 8;
/** 500 numbers a call: the gateway and the model parse, check and answer each of them. */
const BODY = JSON.stringify({ instances: Array.from({ length: 500 }, (_, i) => i / 10) });
const PATH = `/v1/projects/${NS}/locations/us-central1/endpoints/${MODEL}:predict`;

let shell: NodeShell;
let caller: Record<string, string> = {};
let recorder: HpaRecorder | undefined;

function manifests(): string {
  return [
    `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n`,
    `apiVersion: prediction.predictgate.dev/v1
kind: DeployedModel
metadata: {name: ${MODEL}, namespace: ${NS}}
spec:
  id: ${MODEL}
  modelSpec:
    framework: tensorflow
    modelDisplayName: ${MODEL}
    modelVersionID: "1"
    containerSpec:
      image: predictgate:${imageTag()}
      command: ["predictgate", "model", "half-plus-two"]
      predictRoute: /v1/models/half_plus_two:predict
      healthRoute: /v1/models/half_plus_two
  dedicatedResources:
    resources:
      requests: {cpu: ${CPU_REQUEST}}
    minReplicaCount: 1
    maxReplicaCount: ${MAX_REPLICAS}
    autoscaling: {targetCPUUtilizationPercentage: ${TARGET_PERCENT}}
`,
    `apiVersion: prediction.predictgate.dev/v1
kind: Endpoint
metadata: {name: ${MODEL}, namespace: ${NS}}
spec:
  destinations:
    - serviceRef: {kind: DeployedModel, name: ${MODEL}, namespace: ${NS}}
      trafficPercentage: 100
`,
  ].join('---\n');
}

const failures = (r: LoadReport): { failed: number; kinds: string[] } => ({ failed: r.failed, kinds: r.failures.map((f) => `${f.count} × ${f.kind}: ${f.sample}`) });

beforeAll(async () => {
  shell = nodeShell();
  // INSTALL keeps the gateways at two: their own HPA would act on the same load and share the machine's CPU.
  await shell.ok(INSTALL);
  await shell.ok('kubectl apply -f -', manifests());
  caller = { authorization: `Bearer ${await predictorToken(shell, NS, CALLER, '1h')}` };
  await shell.ok(`kubectl wait -n ${NS} --for=condition=Ready deployedmodels.prediction.predictgate.dev/${MODEL} --timeout=5m`);
  await shell.ok(`kubectl wait -n ${NS} --for=condition=EndpointReady endpoints.prediction.predictgate.dev/${MODEL} --timeout=2m`);
  await settled(shell, RELEASE_NS, 'app.kubernetes.io/component=gateway', 2, 'two ready gateway pods');
  await shell.ok(`kubectl get hpa ${MODEL} -n ${NS}`);
}, 600_000);

afterAll(async () => {
  if (!shell) return;
  try {
    await recorder?.stop();
    await removeRelease(shell, NS);
  } finally {
    shell.close();
  }
}, 300_000);

test('kubectl top answers with the CPU and memory of the model pod and the node (metrics.k8s.io through the aggregation layer)', async () => {
  const [pod] = await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, 1, `one ready pod of ${MODEL}`);
  const name = pod.metadata!.name!;
  // metrics-server has a pod's CPU once it has scraped it twice (every 10 s).
  const top = await waitFor(async () => {
    const r = await shell.sh(`kubectl top pod -n ${NS} ${name} --no-headers`);
    return r.code === 0 && /^\S+\s+\d+m\s+\d+Mi\s*$/.test(r.stdout.trim()) ? r.stdout.trim() : undefined;
  }, `kubectl top pod ${name}`, 120_000, 1000);
  const node = await waitFor(async () => {
    const r = await shell.sh('kubectl top node --no-headers');
    return r.code === 0 && /^predictgate-node\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%/.test(r.stdout.trim()) ? r.stdout.trim() : undefined;
  }, 'kubectl top node', 60_000, 1000);
  // The same figures from the API the HPA controller reads.
  const raw = JSON.parse(await shell.ok(`kubectl get --raw /apis/metrics.k8s.io/v1beta1/namespaces/${NS}/pods/${name}`)) as { window: string; containers: { name: string; usage: { cpu: string; memory: string } }[] };
  process.stderr.write(`[hpa] kubectl top pod: ${top}\n[hpa] kubectl top node: ${node}\n[hpa] metrics.k8s.io: window ${raw.window}, ${JSON.stringify(raw.containers)}\n`);
  expect(top.split(/\s+/)[0]).toBe(name);
  expect(raw.containers).toEqual([{ name: 'model', usage: { cpu: expect.stringMatching(/^\d+n?$/), memory: expect.stringMatching(/^\d+Ki$/) } }]);
}, 180_000);

test(`a CPU-heavy load scales the model 1 -> ${MAX_REPLICAS} with every call answered, and it goes back to 1 once the load stops`, async () => {
  recorder = new HpaRecorder(shell, NS, MODEL);
  await recorder.start();
  // The HPA has read the idle pod's CPU, below its target: one replica.
  const idle = await recorder.until('the HPA reading the idle pod\'s CPU', (p) => p.cpuPercent !== undefined && p.spec === 1 && p.ready === 1, 120_000);
  const load = new LoadDriver({ origin: origin(), path: PATH, body: BODY, concurrency: CONCURRENCY, headers: caller });
  const t0 = load.now();
  load.start();
  let report: LoadReport;
  let up: HpaPoint;
  try {
    up = await recorder.until(`${MAX_REPLICAS} ready replicas under load`, (p) => p.spec === MAX_REPLICAS && p.ready === MAX_REPLICAS, 240_000);
    // The new pods serve too: a run of calls answered after they joined.
    await load.succeeded(200, 60_000, 'calls answered at three replicas');
    // What the pods use under this load, as kubectl top sees it (the gateways' own HPA is off here).
    const top = await shell.sh(`kubectl top pod -n ${NS} --no-headers; kubectl top pod -n ${RELEASE_NS} --no-headers`);
    process.stderr.write(`[hpa] kubectl top under load:\n${top.stdout}${top.stderr}`);
  } finally {
    report = await load.stop();
  }
  const stopped = load.now();
  const down = await recorder.until('back to one ready replica after the load', (p) => p.spec === 1 && p.ready === 1, 240_000);
  await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, 1, `one pod of ${MODEL} left`);
  const left = (await pods(shell, NS, `${MODEL_LABEL}=${MODEL}`)).length;
  const s = (t: number): string => ((t - t0) / 1000).toFixed(1);
  process.stderr.write(
    `[hpa] idle CPU ${idle.cpuPercent} % of ${CPU_REQUEST}; load: ${report.total} calls, ${report.failed} failed, ${report.callsPerSecond.toFixed(0)}/s, p50 ${report.p50Ms.toFixed(0)} ms, p99 ${report.p99Ms.toFixed(0)} ms over ${report.seconds.toFixed(1)} s\n` +
      `[hpa] ${MAX_REPLICAS} ready at ${s(up.at)} s, load stopped at ${s(stopped)} s, 1 ready at ${s(down.at)} s (${((down.at - stopped) / 1000).toFixed(1)} s after); replica-seconds ${JSON.stringify(recorder.integral(t0, down.at))}\n` +
      `[hpa] changes (s after the load's start): ${JSON.stringify(recorder.changes(t0))}\n`,
  );
  expect(failures(report)).toEqual({ failed: 0, kinds: [] });
  expect(report.total).toBeGreaterThan(1000);
  // Up while the load ran, never past the maximum, then down to the minimum.
  expect(up.at).toBeLessThan(stopped);
  expect(Math.max(...recorder.points.map((p) => p.spec))).toBe(MAX_REPLICAS);
  expect(recorder.specsBetween(t0, down.at).at(-1)).toBe(1);
  expect(left).toBe(1);
}, 600_000);
