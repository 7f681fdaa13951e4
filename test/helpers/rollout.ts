// Changes made to a running release on the test node while a LoadDriver (load.ts) sends calls
// through the gateway's NodePort the whole time: a DeployedModel's rolling update, a scale change,
// a canary by the Endpoint's traffic split, a rolling restart of the gateway, the eviction of each
// model pod (as kubectl drain evicts), the controller leader's loss, one model pod's process killed or frozen; and the even spread of calls over a
// model's replicas. Each row makes its change, waits for conditions that say it is over (pods Ready,
// the rollout done, the Lease's holder changed, the EndpointSlice's word on a pod), and returns the
// report of every call together with its timings. test/node/load.test.ts asserts on them;
// `npm run bench:rollout` (test/bench/rollout.ts) prints them, with longer loads. The gateway checks
// its callers (the chart's default): the calls carry the token of a ServiceAccount bound to
// predictgate-predictor in the models' namespace, and the gateways' /metrics are read with one bound
// to predictgate-metrics-reader.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CoordinationV1Api, DiscoveryV1Api, Watch, type V1EndpointSlice, type V1Pod } from '@kubernetes/client-node';
import { NODE_NET } from '../cluster/nodeConfig.js';
import { WALKTHROUGH_NODE_PORT } from '../node/walkthrough.js';
import { clients, waitFor, type Clients, type Run } from './cluster.js';
import { ROOT } from './local.js';
import { SliceReadiness } from './sliceReadiness.js';
import { LoadDriver, type CallRecord, type LoadReport } from './load.js';

export const RELEASE_NS = 'predictgate-system';
export const NS = 'predictgate-load';
export const MODEL = 'load';
export const CANARY = 'load-canary';
export const ENDPOINT = 'load';
export const MODEL_REPLICAS = 3;
/** The DeployedModels' call deadline (spec.serving.timeoutSeconds): how long a call on a frozen pod waits. */
export const DEADLINE_SECONDS = 10;
/** A half-plus-two call, as the README's walkthrough makes it. */
export const PREDICT_BODY = '{"instances":[1.0,2.0,5.0]}';
const MODEL_LABEL = 'prediction.predictgate.dev/deployed-model';
const GATEWAY_SELECTOR = 'app.kubernetes.io/component=gateway';
const CONTROLLER_SELECTOR = 'app.kubernetes.io/component=controller';
const GATEWAY_PORT = 8080;

/** Calls answered in a row before a change starts, and after it is over. */
const WARM_CALLS = 200;
const TAIL_CALLS = 200;

/** kubectl and helm on the node cluster, from the repository root, as a user would type them. */
export class NodeShell {
  readonly env: NodeJS.ProcessEnv;
  readonly kube: Clients;
  /** Authorization of the prediction calls, and of the gateways' /metrics (installRelease makes both). */
  callerHeaders: Record<string, string> = {};
  metricsHeaders: Record<string, string> = {};
  private readonly helmHome = mkdtempSync(join(tmpdir(), 'predictgate-helm-'));

  constructor(readonly kubeconfig: string, helm: string) {
    this.env = {
      KUBECONFIG: kubeconfig,
      PATH: `${dirname(helm)}:${process.env.PATH}`,
      HELM_CACHE_HOME: join(this.helmHome, 'cache'),
      HELM_CONFIG_HOME: join(this.helmHome, 'config'),
      HELM_DATA_HOME: join(this.helmHome, 'data'),
    };
    this.kube = clients(kubeconfig);
  }

  sh(command: string, input?: string): Promise<Run> {
    return new Promise((resolve) => {
      const child = spawn('bash', ['-c', command], { cwd: ROOT, env: { ...process.env, ...this.env } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d));
      child.stderr.on('data', (d: Buffer) => (stderr += d));
      child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
      child.stdin.end(input ?? '');
    });
  }

  async ok(command: string, input?: string): Promise<string> {
    const r = await this.sh(command, input);
    if (r.code !== 0) throw new Error(`${command} failed (${r.code}): ${r.stderr || r.stdout}`);
    return r.stdout;
  }

  close(): void {
    rmSync(this.helmHome, { recursive: true, force: true });
  }
}

/** The node tier's shell, from the variables its global setup sets. */
export function nodeShell(): NodeShell {
  const kubeconfig = process.env.PREDICTGATE_NODE_KUBECONFIG;
  const helm = process.env.PREDICTGATE_TEST_HELM;
  if (!kubeconfig || !helm) throw new Error('PREDICTGATE_NODE_KUBECONFIG and PREDICTGATE_TEST_HELM are not set: the node suites run under the node tier\'s global setup (npm run test:node)');
  return new NodeShell(kubeconfig, helm);
}

export const imageTag = (): string => (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function deployedModel(name: string, replicas: number): string {
  return `apiVersion: prediction.predictgate.dev/v1
kind: DeployedModel
metadata: {name: ${name}, namespace: ${NS}}
spec:
  id: ${name}
  modelSpec:
    framework: tensorflow
    modelDisplayName: ${name}
    modelVersionID: "1"
    containerSpec:
      image: predictgate:${imageTag()}
      command: ["predictgate", "model", "half-plus-two"]
      predictRoute: /v1/models/half_plus_two:predict
      healthRoute: /v1/models/half_plus_two
  dedicatedResources: {minReplicaCount: ${replicas}, maxReplicaCount: ${replicas}}
  serving: {timeoutSeconds: ${DEADLINE_SECONDS}}
`;
}

/** The release and the models the rows run on: the two DeployedModels and an Endpoint sending all traffic to the first. */
export function manifests(): string {
  return [
    `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n`,
    deployedModel(MODEL, MODEL_REPLICAS),
    deployedModel(CANARY, 1),
    `apiVersion: prediction.predictgate.dev/v1
kind: Endpoint
metadata: {name: ${ENDPOINT}, namespace: ${NS}}
spec:
  destinations:
    - serviceRef: {kind: DeployedModel, name: ${MODEL}, namespace: ${NS}}
      trafficPercentage: 100
`,
  ].join('---\n');
}

/**
 * The release the node suites' rows run on: the gateway's NodePort, and its count fixed at the chart's
 * two replicas (the node serves resource metrics, so the gateway's CPU HPA would add gateways under
 * the rows' loads, and the rows count on two).
 */
export const INSTALL = `helm install predictgate charts/predictgate -n ${RELEASE_NS} --create-namespace --set gateway.service.type=NodePort --set gateway.service.nodePort=${WALKTHROUGH_NODE_PORT} --set gateway.autoscaling.enabled=false --wait`;

export const origin = (): string => `http://${NODE_NET.nodeIp}:${WALKTHROUGH_NODE_PORT}`;
export const predictPath = `/v1/projects/${NS}/locations/us-central1/endpoints/${ENDPOINT}:predict`;

export const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
const terminating = (p: V1Pod): boolean => p.metadata?.deletionTimestamp !== undefined;
const names = (ps: V1Pod[]): string[] => ps.map((p) => p.metadata!.name!);

export async function pods(shell: NodeShell, namespace: string, labelSelector: string): Promise<V1Pod[]> {
  return (await shell.kube.core.listNamespacedPod({ namespace, labelSelector })).items;
}

export const modelPods = (shell: NodeShell, model = MODEL): Promise<V1Pod[]> => pods(shell, NS, `${MODEL_LABEL}=${model}`);

/** Exactly `n` pods of `selector`, all Ready, none terminating, none of `not`: the change has settled. */
export function settled(shell: NodeShell, namespace: string, selector: string, n: number, what: string, not: string[] = [], timeoutMs = 240_000): Promise<V1Pod[]> {
  return waitFor(async () => {
    const ps = await pods(shell, namespace, selector);
    return ps.length === n && ps.every((p) => isReady(p) && !terminating(p) && !not.includes(p.metadata!.name!)) ? ps : undefined;
  }, what, timeoutMs, 250);
}

/** The ServiceAccount in NS the calls are made as (bound to predictgate-predictor there), and the one reading the gateways' metrics. */
export const CALLER = 'load-caller';
export const METRICS_READER = 'load-metrics';
/** Long enough for the bench's longest run; the gateway remembers a token no longer than it lasts. */
const TOKEN_DURATION = '3h';

/** Installs the chart and the models, and waits until the gateway answers from every model pod. */
export async function installRelease(shell: NodeShell): Promise<void> {
  await shell.ok(INSTALL);
  await shell.ok('kubectl apply -f -', manifests());
  const callerToken = await predictorToken(shell, NS, CALLER, TOKEN_DURATION);
  await shell.ok(`kubectl create serviceaccount ${METRICS_READER} -n ${NS} && kubectl create clusterrolebinding ${NS}-${METRICS_READER} --clusterrole=predictgate-metrics-reader --serviceaccount=${NS}:${METRICS_READER}`);
  shell.callerHeaders = { authorization: `Bearer ${callerToken}` };
  shell.metricsHeaders = { authorization: `Bearer ${(await shell.ok(`kubectl create token ${METRICS_READER} -n ${NS} --duration=${TOKEN_DURATION}`)).trim()}` };
  await shell.ok(`kubectl wait -n ${NS} --for=condition=Ready deployedmodels.prediction.predictgate.dev --all --timeout=5m`);
  await shell.ok(`kubectl wait -n ${NS} --for=condition=EndpointReady endpoints.prediction.predictgate.dev/${ENDPOINT} --timeout=2m`);
  await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, MODEL_REPLICAS, `${MODEL_REPLICAS} ready pods of ${MODEL}`);
  // The gateway's HPA (minimum 2) takes over its replica count just after the install.
  await settled(shell, RELEASE_NS, GATEWAY_SELECTOR, 2, 'two ready gateway pods');
  await sliceReady(shell, MODEL, MODEL_REPLICAS);
  // Both gateways have the model Ready in their tables: a run of calls all answered.
  const load = new LoadDriver({ origin: origin(), path: predictPath, body: PREDICT_BODY, concurrency: 4, headers: shell.callerHeaders });
  load.start();
  try {
    await waitFor(async () => (load.calls.length > 0 ? true : undefined), 'a first call', 30_000, 100);
    await load.succeeded(WARM_CALLS, 60_000, 'calls answered through the NodePort after the install');
  } finally {
    await load.stop();
  }
}

/** Removes the models and the release, and waits for their pods to go. */
export async function uninstallRelease(shell: NodeShell): Promise<void> {
  await shell.sh(`kubectl delete clusterrolebinding ${NS}-${METRICS_READER} --ignore-not-found`);
  await removeRelease(shell, NS);
}

/** A ServiceAccount in `namespace` bound to predictgate-predictor there (it may call its models), and a token of it. */
export async function predictorToken(shell: NodeShell, namespace: string, account: string, duration?: string): Promise<string> {
  await shell.ok(`kubectl create serviceaccount ${account} -n ${namespace} && kubectl create rolebinding ${account}-predicts -n ${namespace} --clusterrole=predictgate-predictor --serviceaccount=${namespace}:${account}`);
  return (await shell.ok(`kubectl create token ${account} -n ${namespace}${duration ? ` --duration=${duration}` : ''}`)).trim();
}

/** Deletes a suite's namespace and the release, and waits for their pods to go. */
export async function removeRelease(shell: NodeShell, namespace: string): Promise<void> {
  await shell.sh(`kubectl delete namespace ${namespace} --wait=false`);
  await shell.sh(`helm uninstall predictgate -n ${RELEASE_NS} --wait`);
  await waitFor(async () => ((await pods(shell, namespace, '')).length === 0 && (await pods(shell, RELEASE_NS, 'app.kubernetes.io/name=predictgate')).length === 0 ? true : undefined), 'the pods of the release and the models to go', 180_000, 500);
}

/** The ready endpoints of a model's Service, by address. */
async function readyAddresses(shell: NodeShell, model: string): Promise<string[]> {
  const slices = (await shell.kube.kc.makeApiClient(DiscoveryV1Api).listNamespacedEndpointSlice({ namespace: NS, labelSelector: `kubernetes.io/service-name=${model}` })).items;
  return slices.flatMap((s) => s.endpoints.filter((e) => e.conditions?.ready === true && e.conditions?.terminating !== true).flatMap((e) => e.addresses));
}

/** Waits until the model's EndpointSlices list exactly `n` ready endpoints. */
function sliceReady(shell: NodeShell, model: string, n: number): Promise<string[]> {
  return waitFor(async () => {
    const a = await readyAddresses(shell, model);
    return a.length === n ? a : undefined;
  }, `${n} ready endpoints in the EndpointSlices of ${model}`, 120_000, 250);
}

/** When each address of a model's EndpointSlices turned ready or not, on the driver's clock (a watch). */
class SliceWatch {
  private readonly readiness = new SliceReadiness();
  private abort: AbortController | undefined;

  constructor(private readonly shell: NodeShell, private readonly model: string) {}

  async start(): Promise<void> {
    const watch = new Watch(this.shell.kube.kc);
    let listed!: () => void;
    const first = new Promise<void>((r) => (listed = r));
    this.abort = await watch.watch(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, { labelSelector: `kubernetes.io/service-name=${this.model}` }, (phase: string, slice: V1EndpointSlice) => {
      this.readiness.apply(phase, slice);
      listed();
    }, () => undefined);
    await first;
  }

  /** The first time after `since` the address turned `ready` (or not). */
  turned(address: string, ready: boolean, since: number): number | undefined {
    return this.readiness.turned(address, ready, since);
  }

  stop(): void {
    this.abort?.abort();
  }
}

/** The processes of a pod's container, from the node's cgroups (/proc/PID/cgroup names the container). */
export function containerPids(pod: V1Pod): number[] {
  const id = pod.status?.containerStatuses?.[0]?.containerID?.replace(/^[a-z]+:\/\//, '');
  if (!id) throw new Error(`pod ${pod.metadata?.name} has no running container`);
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cgroup`, 'utf8').includes(id)) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  if (pids.length === 0) throw new Error(`no process of container ${id} (pod ${pod.metadata?.name}) in /proc`);
  return pids;
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) process.kill(pid, sig);
}

/** A gateway counter summed over the gateway pods, read from each pod's /metrics. */
async function gatewayCounters(shell: NodeShell, name: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const p of await pods(shell, RELEASE_NS, GATEWAY_SELECTOR)) {
    if (!p.status?.podIP || !isReady(p)) continue;
    const res = await fetch(`http://${p.status.podIP}:${GATEWAY_PORT}/metrics`, { headers: shell.metricsHeaders });
    if (res.status !== 200) throw new Error(`GET /metrics of gateway pod ${p.metadata?.name}: ${res.status} ${await res.text()}`);
    const text = await res.text();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    out.set(p.metadata!.name!, m ? Number(m[1]) : 0);
  }
  return out;
}

const gained = (after: Map<string, number>, before: Map<string, number>): number => [...after].reduce((s, [pod, n]) => s + (before.has(pod) ? n - before.get(pod)! : 0), 0);

/** Waits until no gateway holds a model replica out of rotation (a fault row before may have had one ejected). */
function noneEjected(shell: NodeShell): Promise<true> {
  return waitFor(async () => {
    const ejected = await gatewayCounters(shell, 'predictgate_upstream_ejected_replicas');
    return ejected.size === 2 && [...ejected.values()].every((n) => n === 0) ? true : undefined;
  }, 'no model replica ejected in either gateway', 120_000, 500);
}

/** A model pod the gateways are sending calls to now: the one whose own count grew most over 300 calls. */
async function servingPod(shell: NodeShell, load: LoadDriver): Promise<V1Pod> {
  const before = await podCounts(shell);
  await load.succeeded(300, 60_000, '300 calls answered while the pods count them');
  const after = await podCounts(shell);
  const [name, gain] = [...after].map(([pod, n]): [string, number] => [pod, n - (before.get(pod) ?? 0)]).sort((a, b) => b[1] - a[1])[0];
  const pod = (await modelPods(shell)).find((p) => p.metadata?.name === name);
  if (!pod || gain <= 0) throw new Error(`no model pod answered calls: ${JSON.stringify([...after])}`);
  return pod;
}

/** Predict calls each pod of the model answered (2xx), from its own /metrics, by pod name. */
export async function podCounts(shell: NodeShell, model = MODEL): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const p of await modelPods(shell, model)) {
    const port = p.spec?.containers[0].ports?.[0].containerPort ?? 8080;
    const text = await (await fetch(`http://${p.status!.podIP}:${port}/metrics`)).text();
    const m = /^predictgate_model_requests_total\{route="predict",code="200"\} (\d+)$/m.exec(text);
    out.set(p.metadata!.name!, m ? Number(m[1]) : 0);
  }
  return out;
}

export interface RowSettings {
  concurrency: number;
  /** The load runs at least this long in each row (the bench's BENCH_SECONDS; 0: the change and a short tail). */
  minSeconds: number;
}

export interface RowResult {
  row: string;
  report: LoadReport;
  /** How long the change took, from its start to the conditions saying it was over. */
  changeSeconds: number;
  /** For the pod faults: the signal's effect, in seconds after it. */
  fault?: FaultTimes;
  /** What else the row observed, for the report. */
  notes: string[];
}

export interface FaultTimes {
  /** Calls failed, and how many of them started after the signal. */
  failed: number;
  failedStartedAfter: number;
  /** The latest start of a failed call (a call sent to the pod and lost), after the signal; undefined: none failed. */
  lastFailedStart?: number;
  /** When the pod's endpoint turned not ready in its EndpointSlice. */
  sliceNotReady?: number;
  /** Failed calls that started after the EndpointSlice said not ready. */
  failedAfterSlice: number;
  /** Failed calls that started after the first failed call had ended (were not in flight with it). */
  failedAfterFirst: number;
  /** Each failed call's start and end, in seconds after the signal. */
  failedCalls: [number, number][];
  /** The gateways' retries and ejections during the row. */
  retries: number;
  ejections: number;
}

/** Runs `change` under load: calls answered before it, the change, calls answered after it, then the load stops. */
async function underLoad(shell: NodeShell, row: string, s: RowSettings, change: (load: LoadDriver) => Promise<string[] | void>, extra?: (report: LoadReport, t0: number, t1: number) => Partial<RowResult>): Promise<RowResult> {
  const load = new LoadDriver({ origin: origin(), path: predictPath, body: PREDICT_BODY, concurrency: s.concurrency, headers: shell.callerHeaders });
  const began = load.now();
  load.start();
  let t0 = 0;
  let t1 = 0;
  let notes: string[] = [];
  let report: LoadReport;
  try {
    await load.succeeded(WARM_CALLS, 60_000, `${WARM_CALLS} calls answered before the change`);
    t0 = load.now();
    notes = (await change(load)) ?? [];
    t1 = load.now();
    await load.succeeded(TAIL_CALLS, 60_000, `${TAIL_CALLS} calls answered in a row after the change`);
    // The bench's longer load: its duration is what it measures over, not a wait for anything.
    if (s.minSeconds > 0) await load.until(`${s.minSeconds} s of load`, () => load.now() - began >= s.minSeconds * 1000, (s.minSeconds + 60) * 1000);
  } finally {
    report = await load.stop();
  }
  return { row, report, changeSeconds: (t1 - t0) / 1000, notes, ...extra?.(report, t0, t1) };
}

/** Rolling update: the model container's env gets ROLL=`value` (null: no env again), so its 3 pods roll one by one. */
export function rollingUpdate(shell: NodeShell, s: RowSettings, value: string | null): Promise<RowResult> {
  return underLoad(shell, 'rolling update of a DeployedModel (3 replicas)', s, async () => {
    const before = names(await modelPods(shell));
    const env = value === null ? null : [{ name: 'ROLL', value }];
    await shell.ok(`kubectl patch -n ${NS} deployedmodels.prediction.predictgate.dev ${MODEL} --type merge -p '${JSON.stringify({ spec: { modelSpec: { containerSpec: { env } } } })}'`);
    await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, MODEL_REPLICAS, `${MODEL_REPLICAS} new ready pods of ${MODEL}, the old ones gone`, before);
  });
}

async function scaleTo(shell: NodeShell, n: number): Promise<void> {
  await shell.ok(`kubectl patch -n ${NS} deployedmodels.prediction.predictgate.dev ${MODEL} --type merge -p '{"spec":{"dedicatedResources":{"minReplicaCount":${n},"maxReplicaCount":${n}}}}'`);
  await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, n, `${n} ready pods of ${MODEL} and no other`);
}

/** Scale 3 -> 1 -> 3 through the DeployedModel's replica counts. */
export function scale(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  return underLoad(shell, 'scale 3 -> 1 -> 3', s, async () => {
    await scaleTo(shell, 1);
    await scaleTo(shell, MODEL_REPLICAS);
    await sliceReady(shell, MODEL, MODEL_REPLICAS);
  });
}

function trafficSplit(shell: NodeShell, split: [string, number][]): Promise<string> {
  const destinations = split.map(([name, pct]) => ({ serviceRef: { kind: 'DeployedModel', name, namespace: NS }, trafficPercentage: pct }));
  return shell.ok(`kubectl patch -n ${NS} endpoints.prediction.predictgate.dev ${ENDPOINT} --type merge -p '${JSON.stringify({ spec: { destinations } })}'`);
}

/** Resolves once `n` answers in a row (by end) came from `model`. */
function answeredBy(load: LoadDriver, model: string, n: number, timeoutMs = 60_000): Promise<void> {
  let seen = load.calls.length;
  let run = 0;
  return load.until(`${n} answers in a row from ${model}`, () => {
    for (; seen < load.calls.length; seen++) run = load.calls[seen].model === model ? run + 1 : 0;
    return run >= n;
  }, timeoutMs);
}

/** Canary: the Endpoint's split 100/0 -> 80/20 -> 0/100 -> 100 (the canary gone again). */
export function canary(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  return underLoad(shell, 'canary 0 -> 20 -> 100 % and back (Endpoint traffic split)', s, async (load) => {
    const from = load.calls.length;
    await trafficSplit(shell, [[MODEL, 80], [CANARY, 20]]);
    await load.until(`100 answers from ${CANARY} at 20 %`, () => load.calls.slice(from).filter((c) => c.model === CANARY).length >= 100, 60_000);
    const at20 = load.calls.length;
    await load.succeeded(1000, 60_000, '1000 calls at 20 %');
    const share = load.calls.slice(at20).filter((c) => c.model === CANARY).length / (load.calls.length - at20);
    await trafficSplit(shell, [[MODEL, 0], [CANARY, 100]]);
    await answeredBy(load, CANARY, 500);
    await trafficSplit(shell, [[MODEL, 100]]);
    await answeredBy(load, MODEL, 500);
    return [`canary's share of the calls at 20 %: ${(share * 100).toFixed(1)} %`];
  });
}

/** `kubectl rollout restart` of the gateway Deployment (2 replicas). */
export function gatewayRestart(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  return underLoad(shell, 'rolling restart of the gateway (2 replicas)', s, async () => {
    const before = names(await pods(shell, RELEASE_NS, GATEWAY_SELECTOR));
    await shell.ok(`kubectl rollout restart deployment/predictgate-gateway -n ${RELEASE_NS}`);
    await shell.ok(`kubectl rollout status deployment/predictgate-gateway -n ${RELEASE_NS} --timeout=4m`);
    // Rolled out; the old pods still drain their connections until they are gone.
    await settled(shell, RELEASE_NS, GATEWAY_SELECTOR, 2, 'two new ready gateway pods, the old ones gone', before);
  });
}

/**
 * Evictions as `kubectl drain` makes them (the Eviction API, policy/v1, which a PodDisruptionBudget
 * would gate): each model pod in turn, its replacement ready before the next. The test node is the
 * only node, so the drain itself (a cordon, then every pod evicted) would leave the gateways nowhere
 * to go; the model pods' evictions are what it does to the calls.
 */
export function evictions(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  return underLoad(shell, 'eviction of each model pod in turn (as kubectl drain evicts)', s, async () => {
    for (const name of names(await modelPods(shell))) {
      await shell.kube.core.createNamespacedPodEviction({ name, namespace: NS, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: NS } } });
      await settled(shell, NS, `${MODEL_LABEL}=${MODEL}`, MODEL_REPLICAS, `${MODEL_REPLICAS} ready pods of ${MODEL}, ${name} gone`, [name]);
    }
  });
}

/** The pod of a Lease holder's identity (POD_UUID). */
const podOf = (identity: string): string => identity.replace(/_[^_]+$/, '');

async function leaseHolder(shell: NodeShell): Promise<string> {
  const lease = await shell.kube.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'predictgate-controller', namespace: RELEASE_NS });
  return lease.spec?.holderIdentity ?? '';
}

export interface LeaderKill {
  /** When the signal was sent, and when another holder had the Lease (performance.now()). */
  killedAt: number;
  tookOverAt: number;
  /** Whether the new holder is the other controller pod (else the killed one's restarted container). */
  byStandby: boolean;
}

/**
 * The controller leader's process SIGKILLed (the Lease holder's pod, its container's processes found
 * in the node's cgroups); resolves once another holder has the Lease and the killed container is
 * back and both controllers are Ready.
 */
export async function killLeader(shell: NodeShell): Promise<LeaderKill> {
  const holder = await leaseHolder(shell);
  const podName = podOf(holder);
  const pod = (await pods(shell, RELEASE_NS, CONTROLLER_SELECTOR)).find((p) => p.metadata?.name === podName);
  if (!pod) throw new Error(`the Lease holder ${holder} is no controller pod`);
  const restarts = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
  const killedAt = performance.now();
  signal(containerPids(pod), 'SIGKILL');
  const next = await waitFor(async () => {
    const h = await leaseHolder(shell);
    return h !== '' && h !== holder ? h : undefined;
  }, 'a new holder of the controller Lease', 120_000, 250);
  const tookOverAt = performance.now();
  await waitFor(async () => {
    const ps = await pods(shell, RELEASE_NS, CONTROLLER_SELECTOR);
    const p = ps.find((x) => x.metadata?.name === podName);
    return ps.length === 2 && ps.every(isReady) && (p?.status?.containerStatuses?.[0]?.restartCount ?? 0) > restarts ? true : undefined;
  }, 'the killed controller restarted and both controllers ready', 120_000, 250);
  return { killedAt, tookOverAt, byStandby: podOf(next) !== podName };
}

/** The controller leader's process SIGKILLed; a standby (or the restarted container) takes the Lease. */
export function leaderKill(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  return underLoad(shell, 'controller leader killed (SIGKILL)', s, async () => {
    const k = await killLeader(shell);
    return [`Lease taken over by ${k.byStandby ? 'the standby' : 'the restarted container'} ${((k.tookOverAt - k.killedAt) / 1000).toFixed(1)} s after the kill`];
  });
}

/** Fault times of `calls` around a signal at `at` (driver clock), the EndpointSlice's view and the gateways' counters. */
function faultTimes(calls: readonly CallRecord[], at: number, sliceNotReady: number | undefined, retries: number, ejections: number): FaultTimes {
  const failed = calls.filter((c) => c.kind !== undefined);
  const lastFailed = failed.reduce((m, c) => Math.max(m, c.start), -Infinity);
  const firstEnd = failed.reduce((m, c) => Math.min(m, c.end), Infinity);
  return {
    failed: failed.length,
    failedStartedAfter: failed.filter((c) => c.start > at).length,
    lastFailedStart: failed.length ? (lastFailed - at) / 1000 : undefined,
    sliceNotReady: sliceNotReady === undefined ? undefined : (sliceNotReady - at) / 1000,
    failedAfterSlice: sliceNotReady === undefined ? 0 : failed.filter((c) => c.start > sliceNotReady).length,
    failedAfterFirst: failed.filter((c) => c.start > firstEnd).length,
    failedCalls: failed.map((c): [number, number] => [Number(((c.start - at) / 1000).toFixed(3)), Number(((c.end - at) / 1000).toFixed(3))]),
    retries,
    ejections,
  };
}

/** One model pod's process SIGKILLed: the kubelet restarts its container. */
export async function modelKill(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  const watch = new SliceWatch(shell, MODEL);
  await watch.start();
  let at = 0;
  let notReady: number | undefined;
  let counters: [number, number] = [0, 0];
  try {
    await noneEjected(shell);
    return await underLoad(shell, 'one model pod SIGKILLed', s, async (load) => {
      const pod = await servingPod(shell, load);
      const ip = pod.status!.podIP!;
      const restarts = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
      const [r0, e0] = [await gatewayCounters(shell, 'predictgate_upstream_retries_total'), await gatewayCounters(shell, 'predictgate_upstream_ejections_total')];
      at = performance.now();
      signal(containerPids(pod), 'SIGKILL');
      await waitFor(async () => {
        const p = (await modelPods(shell)).find((x) => x.metadata?.name === pod.metadata?.name);
        return p && isReady(p) && (p.status?.containerStatuses?.[0]?.restartCount ?? 0) > restarts ? true : undefined;
      }, 'the killed model container restarted and Ready', 120_000, 250);
      await sliceReady(shell, MODEL, MODEL_REPLICAS);
      notReady = watch.turned(ip, false, at);
      counters = [gained(await gatewayCounters(shell, 'predictgate_upstream_retries_total'), r0), gained(await gatewayCounters(shell, 'predictgate_upstream_ejections_total'), e0)];
    }, (report) => ({ fault: faultTimes(report.calls, at, notReady, ...counters) }));
  } finally {
    watch.stop();
  }
}

/** One model pod's process SIGSTOPped until its EndpointSlice says not ready and every call sent before that is over, then SIGCONTinued. */
export async function modelFreeze(shell: NodeShell, s: RowSettings): Promise<RowResult> {
  const watch = new SliceWatch(shell, MODEL);
  await watch.start();
  let at = 0;
  let notReady: number | undefined;
  let counters: [number, number] = [0, 0];
  let stopped: number[] = [];
  try {
    await noneEjected(shell);
    return await underLoad(shell, 'one model pod frozen (SIGSTOP, then SIGCONT)', s, async (load) => {
      const pod = await servingPod(shell, load);
      const ip = pod.status!.podIP!;
      const [r0, e0] = [await gatewayCounters(shell, 'predictgate_upstream_retries_total'), await gatewayCounters(shell, 'predictgate_upstream_ejections_total')];
      stopped = containerPids(pod);
      at = performance.now();
      signal(stopped, 'SIGSTOP');
      const out = await waitFor(async () => watch.turned(ip, false, at), `the frozen pod ${pod.metadata?.name} not ready in its EndpointSlice`, 120_000, 100);
      await load.until('every call sent before the frozen pod left its EndpointSlice over', () => !load.inFlightSince(out), (DEADLINE_SECONDS + 30) * 1000);
      counters = [gained(await gatewayCounters(shell, 'predictgate_upstream_retries_total'), r0), gained(await gatewayCounters(shell, 'predictgate_upstream_ejections_total'), e0)];
      signal(stopped, 'SIGCONT');
      stopped = [];
      notReady = out;
      await sliceReady(shell, MODEL, MODEL_REPLICAS);
    }, (report) => ({ fault: faultTimes(report.calls, at, notReady, ...counters) }));
  } finally {
    if (stopped.length) signal(stopped, 'SIGCONT');
    watch.stop();
  }
}

/** One line on what a row saw: calls, failures by kind, latencies, the change's time and the fault's. */
export function summary(r: RowResult): string {
  const p = r.report;
  const kinds = p.failures.map((f) => `${f.count} × ${f.kind} (${f.sample.slice(0, 120)})`).join('; ');
  const f = r.fault;
  const fault = f ? `; fault: ${JSON.stringify(f)}` : '';
  return `${r.row}: ${p.total} calls in ${p.seconds.toFixed(1)} s (${p.concurrency} in flight, ${Math.round(p.callsPerSecond)}/s), ${p.failed} failed${kinds ? ` [${kinds}]` : ''}, p50 ${p.p50Ms.toFixed(1)} ms, p99 ${p.p99Ms.toFixed(1)} ms, change ${r.changeSeconds.toFixed(1)} s${fault}${r.notes.length ? `; ${r.notes.join('; ')}` : ''}`;
}

export interface ShareResult {
  report: LoadReport;
  /** Predict calls each model pod answered during the run, by pod. */
  perPod: Record<string, number>;
  /** The largest distance of a pod's count from an even share, as a fraction of the even share. */
  maxDeviation: number;
}

/** `calls` calls through the gateway, and how many of them each model pod answered (its own count). */
export async function evenShare(shell: NodeShell, concurrency: number, calls: number): Promise<ShareResult> {
  const before = await podCounts(shell);
  const load = new LoadDriver({ origin: origin(), path: predictPath, body: PREDICT_BODY, concurrency, maxCalls: calls, headers: shell.callerHeaders });
  load.start();
  const report = await load.finished();
  const after = await podCounts(shell);
  const perPod: Record<string, number> = {};
  for (const [pod, n] of after) perPod[pod] = n - (before.get(pod) ?? 0);
  const even = calls / after.size;
  const maxDeviation = Math.max(...Object.values(perPod).map((n) => Math.abs(n - even) / even));
  return { report, perPod, maxDeviation };
}
